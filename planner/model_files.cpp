// model_files.cpp: presets, model files and HuggingFace config.json import (see model_files.hpp).
#include "model_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "errors.hpp"
#include "format.hpp"
#include "json_fields.hpp"

#ifndef HEADROOM_PRESET_DIR
#define HEADROOM_PRESET_DIR "presets"
#endif

namespace headroom {

namespace fs = std::filesystem;

std::string preset_dir() {
  if (const char* env = std::getenv("HEADROOM_PRESET_DIR"); env && *env) return env;
  return HEADROOM_PRESET_DIR;
}

std::vector<std::string> list_presets(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  // The error_code forms throughout: an unreadable or vanished directory lists nothing, never throws.
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".json") names.push_back(it->path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string shown_name(const std::string& name) {
  return printable(name, 93);  // the one sanitiser (format.hpp): 45 characters each side of "..."
}

namespace {

// Closes a descriptor on every path out of read_regular_file.
struct fd_guard {
  int fd;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

// Returns the reason an open(2) of an input failed, as a phrase.
std::string open_failure(int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return "cannot open file (missing)";
    case ENAMETOOLONG:
      return "cannot open file (file name too long)";
    case EACCES:
    case EPERM:
      return "cannot open file (permission denied)";
    case ELOOP:
      return "cannot open file (too many symbolic links)";
    default:
      return std::string("cannot open file (") + std::strerror(err) + ")";
  }
}

}  // namespace

std::string read_regular_file(const std::string& path, std::uintmax_t cap, const char* what) {
  const std::string shown = shown_name(path);
  if (path.empty()) throw bad_input("input", "an empty file name");
  const auto not_regular = [&](const struct stat& st) {
    return bad_input(shown, S_ISDIR(st.st_mode)
                                ? "is a directory, not a regular file"
                                : "is not a regular file (a device, pipe or socket is not read)");
  };
  // A device is never opened (opening some has effects); what the path names is checked again on the
  // opened descriptor, with O_NONBLOCK so a FIFO swapped in meanwhile cannot block the open.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) throw not_regular(st);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw bad_input(shown, open_failure(errno));
  const fd_guard guard{fd};
  if (::fstat(fd, &st) != 0) throw bad_input(shown, "cannot read its status");
  if (!S_ISREG(st.st_mode)) throw not_regular(st);
  const auto too_large = [&] {
    const std::string limit =
        cap % (1u << 20) == 0 ? std::to_string(cap >> 20) + " MiB" : std::to_string(cap) + " bytes";
    return bad_input(shown, "is larger than the " + limit + " " + what + " may be");
  };
  if (static_cast<std::uintmax_t>(st.st_size) > cap) throw too_large();
  std::string bytes;
  bytes.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  // Read until the end, never past cap + 1 bytes: a file that grows while it is read is refused too.
  while (true) {
    if (got == bytes.size()) {
      if (bytes.size() > cap) throw too_large();
      bytes.resize(std::min<std::size_t>(bytes.size() + (64u << 10), static_cast<std::size_t>(cap) + 1));
    }
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw bad_input(shown, std::string("cannot be read (") + std::strerror(errno) + ")");
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  bytes.resize(got);
  return bytes;
}

nlohmann::json read_json_file(const std::string& path) {
  return parse_json_text(read_regular_file(path, max_json_file_bytes, "a JSON input"), shown_name(path));
}

nlohmann::json parse_json_text(const std::string& text, const std::string& origin) {
  try {
    // Nesting is capped while parsing: no reader walks deeper, and no error path prints a deep value.
    const nlohmann::json::parser_callback_t depth_cap = [&](int depth, nlohmann::json::parse_event_t,
                                                            nlohmann::json&) {
      if (depth > max_json_depth)
        throw bad_input(origin, "JSON nested deeper than " + std::to_string(max_json_depth) + " levels");
      return true;
    };
    return nlohmann::json::parse(text, depth_cap);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann's message names the byte; keep only that part, on one line.
    std::string msg = e.what();
    if (auto p = msg.find("parse error"); p != std::string::npos) msg = msg.substr(p);
    throw bad_input(origin, "malformed JSON (" + msg + ")");
  } catch (const nlohmann::json::exception& e) {
    // Out-of-range numbers (1e400) and the like: the input's problem, not a bug.
    throw bad_input(origin, std::string("unreadable JSON value (") + e.what() + ")");
  }
}

bool is_preset_name(const std::string& name) {
  if (name.empty() || name.size() > max_preset_name || !std::isalnum(static_cast<unsigned char>(name[0])))
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

model_spec load_preset(const std::string& name, const std::string& dir) {
  // A name that cannot be a preset is not looked up at all: no path is built from it, so '/', '..', a
  // name longer than a file name may be and odd characters all end as "unknown preset".
  std::error_code ec;
  const fs::path p = fs::path(dir) / (name + ".json");
  if (!is_preset_name(name) || !fs::exists(p, ec) || ec) {
    const auto all = list_presets(dir);
    std::string nearest;
    for (const auto& n : detail::nearest_names(name, all, 3)) nearest += (nearest.empty() ? "" : ", ") + n;
    throw bad_input("preset", "unknown preset '" + shown_name(name) + "' (" +
                                  (all.empty() ? "none in " + shown_name(dir)
                                               : "closest: " + nearest + "; `headroom presets` lists all " +
                                                     std::to_string(all.size())) +
                                  ")");
  }
  return model_from_json(read_json_file(p.string()), name);
}

model_spec load_model_file(const std::string& path) {
  return model_from_json(read_json_file(path), shown_name(fs::path(path).filename().string()));
}

namespace {

using detail::int_field;
using detail::opt_bool_field;
using detail::opt_int_field;
using detail::opt_number_field;
using detail::opt_string_field;
using detail::refuse_unmodelled;

constexpr std::int64_t big = 1'000'000'000;

// The first of `keys` present in `j`, as an integer; throws naming all of them when none is.
std::int64_t first_int(const nlohmann::json& j, std::initializer_list<const char*> keys,
                       const std::string& origin) {
  for (const char* k : keys)
    if (auto v = opt_int_field(j, k, origin, 1, big)) return *v;
  std::string names;
  for (const char* k : keys) names += (names.empty() ? "" : " or ") + std::string(k);
  throw bad_input(origin + "." + *keys.begin(), "missing (looked for " + names + ")");
}

bool any_dropout(const nlohmann::json& j, std::initializer_list<const char*> keys,
                 const std::string& origin) {
  for (const char* k : keys)
    if (auto v = opt_number_field(j, k, origin); v && *v > 0) return true;
  return false;
}

}  // namespace

namespace {

// llama, mistral, qwen2: SwiGLU, RMSNorm, rotary positions, grouped-query attention.
void read_llama_like(const nlohmann::json& c, const std::string& origin, const std::string& t,
                     model_spec& m) {
  m.hidden = int_field(c, "hidden_size", origin, 1, big);
  m.layers = int_field(c, "num_hidden_layers", origin, 1, big);
  m.heads = int_field(c, "num_attention_heads", origin, 1, big);
  m.kv_heads = opt_int_field(c, "num_key_value_heads", origin, 1, big).value_or(m.heads);
  const auto head_dim = opt_int_field(c, "head_dim", origin, 1, big);
  m.head_dim_stated = head_dim.has_value();
  m.head_dim = head_dim.value_or(m.hidden / m.heads);
  m.ffn_hidden = int_field(c, "intermediate_size", origin, 1, big);
  m.vocab = int_field(c, "vocab_size", origin, 1, big);
  m.max_positions = opt_int_field(c, "max_position_embeddings", origin, 1, big).value_or(4096);
  m.mlp = mlp_kind::swiglu;
  m.norm = norm_kind::rmsnorm;
  m.position = position_kind::rotary;
  m.tied_embeddings = opt_bool_field(c, "tie_word_embeddings", origin).value_or(false);
  m.linear_bias = opt_bool_field(c, "attention_bias", origin).value_or(false) && t == "llama";
  m.qkv_bias_only = t == "qwen2";
  m.dropout = any_dropout(c, {"attention_dropout", "hidden_dropout"}, origin);
}

// gpt2: GELU, LayerNorm, learned positions, tied embeddings.
void read_gpt2(const nlohmann::json& c, const std::string& origin, const std::string& /*model_type*/,
               model_spec& m) {
  m.hidden = int_field(c, "n_embd", origin, 1, big);
  m.layers = int_field(c, "n_layer", origin, 1, big);
  m.heads = int_field(c, "n_head", origin, 1, big);
  m.kv_heads = m.heads;
  m.head_dim = m.hidden / m.heads;
  m.ffn_hidden = opt_int_field(c, "n_inner", origin, 1, big).value_or(4 * m.hidden);
  m.vocab = int_field(c, "vocab_size", origin, 1, big);
  m.max_positions = first_int(c, {"n_positions", "n_ctx"}, origin);
  m.position = position_kind::learned;
  m.tied_embeddings = opt_bool_field(c, "tie_word_embeddings", origin).value_or(true);
  m.dropout = any_dropout(c, {"resid_pdrop", "attn_pdrop", "embd_pdrop"}, origin);
}

// gpt_neox: rotary positions, parallel residual.
void read_gpt_neox(const nlohmann::json& c, const std::string& origin, const std::string& /*model_type*/,
                   model_spec& m) {
  m.hidden = int_field(c, "hidden_size", origin, 1, big);
  m.layers = int_field(c, "num_hidden_layers", origin, 1, big);
  m.heads = int_field(c, "num_attention_heads", origin, 1, big);
  m.kv_heads = m.heads;
  m.head_dim = m.hidden / m.heads;
  m.ffn_hidden = int_field(c, "intermediate_size", origin, 1, big);
  m.vocab = int_field(c, "vocab_size", origin, 1, big);
  m.max_positions = opt_int_field(c, "max_position_embeddings", origin, 1, big).value_or(2048);
  m.position = position_kind::rotary;
  m.tied_embeddings = opt_bool_field(c, "tie_word_embeddings", origin).value_or(false);
  m.parallel_residual = opt_bool_field(c, "use_parallel_residual", origin).value_or(true);
  m.dropout = any_dropout(c, {"attention_dropout", "hidden_dropout"}, origin);
}

// bloom: ALiBi, a LayerNorm after the embedding.
void read_bloom(const nlohmann::json& c, const std::string& origin, const std::string& /*model_type*/,
                model_spec& m) {
  m.hidden = first_int(c, {"hidden_size", "n_embed"}, origin);
  m.layers = first_int(c, {"n_layer", "num_hidden_layers"}, origin);
  m.heads = first_int(c, {"n_head", "num_attention_heads"}, origin);
  m.kv_heads = m.heads;
  m.head_dim = m.hidden / m.heads;
  m.ffn_hidden = 4 * m.hidden;
  m.vocab = int_field(c, "vocab_size", origin, 1, big);
  m.max_positions = opt_int_field(c, "seq_length", origin, 1, big).value_or(2048);
  m.position = position_kind::alibi;
  m.embedding_norm = true;
  m.tied_embeddings = opt_bool_field(c, "tie_word_embeddings", origin).value_or(true);
  m.dropout = any_dropout(c, {"attention_dropout", "hidden_dropout"}, origin);
}

// opt: learned positions with an offset of 2.
void read_opt(const nlohmann::json& c, const std::string& origin, const std::string& /*model_type*/,
              model_spec& m) {
  m.hidden = int_field(c, "hidden_size", origin, 1, big);
  m.layers = int_field(c, "num_hidden_layers", origin, 1, big);
  m.heads = int_field(c, "num_attention_heads", origin, 1, big);
  m.kv_heads = m.heads;
  m.head_dim = m.hidden / m.heads;
  m.ffn_hidden = int_field(c, "ffn_dim", origin, 1, big);
  m.vocab = int_field(c, "vocab_size", origin, 1, big);
  // OPT's learned position table has two extra rows (an offset of 2).
  m.max_positions = int_field(c, "max_position_embeddings", origin, 1, big) + 2;
  m.position = position_kind::learned;
  m.tied_embeddings = opt_bool_field(c, "tie_word_embeddings", origin).value_or(true);
  m.dropout = any_dropout(c, {"dropout", "attention_dropout"}, origin);
}

// falcon (RefinedWeb): multi-query or grouped-query attention, parallel attention.
void read_falcon(const nlohmann::json& c, const std::string& origin, const std::string& /*model_type*/,
                 model_spec& m) {
  m.hidden = int_field(c, "hidden_size", origin, 1, big);
  m.layers = first_int(c, {"num_hidden_layers", "n_layer"}, origin);
  m.heads = first_int(c, {"num_attention_heads", "n_head"}, origin);
  bool new_arch = opt_bool_field(c, "new_decoder_architecture", origin).value_or(false);
  bool mqa = opt_bool_field(c, "multi_query", origin).value_or(true);
  if (new_arch)
    m.kv_heads = first_int(c, {"num_kv_heads", "n_head_kv"}, origin);
  else
    m.kv_heads = mqa ? 1 : m.heads;
  m.head_dim = m.hidden / m.heads;
  m.ffn_hidden = opt_int_field(c, "ffn_hidden_size", origin, 1, big).value_or(4 * m.hidden);
  m.vocab = int_field(c, "vocab_size", origin, 1, big);
  m.max_positions = opt_int_field(c, "max_position_embeddings", origin, 1, big).value_or(2048);
  m.position =
      opt_bool_field(c, "alibi", origin).value_or(false) ? position_kind::alibi : position_kind::rotary;
  m.linear_bias = opt_bool_field(c, "bias", origin).value_or(false);
  m.parallel_residual = opt_bool_field(c, "parallel_attn", origin).value_or(true) || new_arch;
  m.norms_per_layer = new_arch ? 2 : m.parallel_residual ? 1 : 2;
  m.tied_embeddings = opt_bool_field(c, "tie_word_embeddings", origin).value_or(true);
  m.dropout = any_dropout(c, {"attention_dropout", "hidden_dropout"}, origin);
}

using family_reader = void (*)(const nlohmann::json&, const std::string&, const std::string&, model_spec&);

// Returns the reader of `model_type`, or nullptr when it is not supported.
family_reader reader_of(const std::string& t) {
  if (t == "llama" || t == "mistral" || t == "qwen2") return read_llama_like;
  if (t == "gpt2") return read_gpt2;
  if (t == "gpt_neox") return read_gpt_neox;
  if (t == "bloom") return read_bloom;
  if (t == "opt") return read_opt;
  if (t == "falcon" || t == "RefinedWeb" || t == "RefinedWebModel") return read_falcon;
  return nullptr;
}

}  // namespace

model_spec model_from_hf_config(const nlohmann::json& c, const std::string& origin) {
  if (!c.is_object()) throw bad_input(origin, "expected a JSON object");
  auto type = opt_string_field(c, "model_type", origin);
  if (!type) throw bad_input(origin + ".model_type", "missing");
  // Mixture-of-experts and multi-latent attention are refused, by family and by field, never read as the
  // dense model their attention and embeddings would describe (a Mixtral as 7.24 B parameters).
  for (const char* moe : {"mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "dbrx", "llama4",
                          "llama4_text", "olmoe", "jamba", "jetmoe", "granitemoe", "phimoe", "gpt_oss", "arctic",
                          "switch_transformers", "nllb_moe", "grok-1", "hunyuan_v1_moe", "minimax"})
    if (*type == moe)
      throw bad_input(origin + ".model_type", "'" + *type +
                                                  "' is a mixture-of-experts model: not modelled by this version "
                                                  "(refused rather than priced as a dense one)");
  refuse_unmodelled(c, origin);
  model_spec m;
  m.name = opt_string_field(c, "_name_or_path", origin).value_or(*type);
  m.source = "HuggingFace config.json (" + *type + ")";
  const auto read = reader_of(*type);
  if (!read)
    throw bad_input(
        origin + ".model_type",
        "unsupported '" + *type + "' (supported: llama, mistral, qwen2, gpt2, gpt_neox, bloom, opt, falcon)");
  read(c, origin, *type, m);
  // A config states the longest context, not the training sequence; --seq overrides this default.
  m.seq = std::min<std::int64_t>(m.max_positions, 4096);
  validate(m);
  return m;
}

model_spec load_hf_config(const std::string& path) {
  return model_from_hf_config(read_json_file(path), shown_name(fs::path(path).filename().string()));
}

}  // namespace headroom
