// model_files.cpp: presets, model files and HuggingFace config.json import (see model_files.hpp).
#include "model_files.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "errors.hpp"
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
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

nlohmann::json read_json_file(const std::string& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) throw bad_input(path, "cannot open file (missing)");
  if (!fs::is_regular_file(status))
    throw bad_input(path, "is not a regular file (a directory, device or pipe is not read)");
  const auto size = fs::file_size(path, ec);
  if (ec) throw bad_input(path, "cannot read its size");
  if (size > max_json_file_bytes)
    throw bad_input(
        path, "is larger than the " + std::to_string(max_json_file_bytes >> 20) + " MiB a JSON input may be");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw bad_input(path, "cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_json_text(ss.str(), path);
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

model_spec load_preset(const std::string& name, const std::string& dir) {
  bool plain = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  fs::path p = fs::path(dir) / (name + ".json");
  if (!plain || !fs::exists(p)) {
    std::string known;
    for (const auto& n : list_presets(dir)) known += (known.empty() ? "" : ", ") + n;
    throw bad_input("preset", "unknown preset '" + name +
                                  "' (known: " + (known.empty() ? "none in " + dir : known) + ")");
  }
  auto m = model_from_json(read_json_file(p.string()), name);
  return m;
}

model_spec load_model_file(const std::string& path) {
  return model_from_json(read_json_file(path), fs::path(path).filename().string());
}

namespace {

using detail::int_field;
using detail::opt_bool_field;
using detail::opt_int_field;
using detail::opt_number_field;
using detail::opt_string_field;

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
  m.head_dim = opt_int_field(c, "head_dim", origin, 1, big).value_or(m.hidden / m.heads);
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
  return model_from_hf_config(read_json_file(path), fs::path(path).filename().string());
}

}  // namespace headroom
