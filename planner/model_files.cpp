// model_files.cpp: presets, model files and HuggingFace config.json import (see model_files.hpp).
#include "model_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "errors.hpp"
#include "format.hpp"
#include "large_buffers.hpp"
#include "hf_families.hpp"
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
  // One byte more than the file holds, so the read that finds the end needs no larger buffer (growing a
  // large one would copy it whole).
  const auto room = static_cast<std::size_t>(std::min<std::uintmax_t>(static_cast<std::uintmax_t>(st.st_size), cap) + 1);
  reserve_large(bytes, room);
  bytes.resize(room);
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
    throw bad_input(origin, "unreadable JSON value (" + without_json_tag(e.what()) + ")");
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

// ---- HuggingFace config.json ----------------------------------------------------------------------------------
// One reader for every family: each family is a row of hf_families.hpp (which keys hold each field, what the
// field is when absent, how MoE layers are placed, the family's quirks), and model_from_hf_config reads the
// config once, field by field, through its row.

namespace detail::hf {

// falcon (RefinedWeb): the new decoder architecture states its kv heads; the old one is multi-query unless told
// otherwise, and with parallel attention one norm feeds both branches (modeling_falcon.py, FalconDecoderLayer).
void falcon_quirk(const nlohmann::json& c, const std::string& origin, model_spec& m) {
  const bool new_arch = opt_bool_field(c, "new_decoder_architecture", origin).value_or(false);
  if (new_arch) {
    m.kv_heads = 0;
    for (const char* k : {"num_kv_heads", "n_head_kv"})
      if (auto v = detail::opt_int_field(c, k, origin, 1, 1'000'000'000); v && !m.kv_heads) m.kv_heads = *v;
    if (!m.kv_heads)
      throw bad_input(origin + ".num_kv_heads", "missing (looked for num_kv_heads or n_head_kv)");
  } else {
    m.kv_heads = opt_bool_field(c, "multi_query", origin).value_or(true) ? 1 : m.heads;
  }
  if (opt_bool_field(c, "alibi", origin).value_or(false)) m.position = position_kind::alibi;
  m.parallel_residual = m.parallel_residual || new_arch;
  m.norms_per_layer = new_arch ? 2 : m.parallel_residual ? 1 : 2;
}

}  // namespace detail::hf

namespace {

using detail::opt_bool_field;
using detail::opt_number_field;
using detail::opt_string_field;
using json = nlohmann::json;
using namespace detail::hf;

constexpr std::int64_t big = 1'000'000'000;
constexpr std::int64_t max_experts = 100'000;  // 256 is the largest released count; more is a typo
constexpr std::int64_t max_list = 10'000;      // a layer list longer than the largest model has layers

// Mixture-of-experts families this version does not read: refused, never priced as the dense model their
// attention and embeddings would describe.
constexpr std::array<const char*, 10> unread_moe_types = {
    "jamba",    "jetmoe",  "granitemoe",    "phimoe", "arctic", "grok-1", "switch_transformers",
    "nllb_moe", "minimax", "hunyuan_v1_moe"};

// Where a key lives: the object holding it ("a.b": key b of the nested object a), the key within it and the
// object's name for errors; obj is nullptr when the nested object is absent.
struct located {
  const json* obj;
  std::string key, origin;
};

std::string where(const std::string& origin, std::string_view key) {
  return origin + "." + std::string(key);
}

// Returns where `key` lives in `s`. Throws when its nested object is present but not an object.
located locate(const json& s, const std::string& origin, std::string_view key) {
  const auto dot = key.find('.');
  if (dot == std::string_view::npos) return {&s, std::string(key), origin};
  const std::string section(key.substr(0, dot));
  const auto it = s.find(section);
  if (it == s.end() || it->is_null()) return {nullptr, "", ""};
  if (!it->is_object()) throw bad_input(where(origin, section), "must be an object");
  return {&*it, std::string(key.substr(dot + 1)), where(origin, section)};
}

// Returns the first of the rule's keys that the config states, within [lo, hi]; nullopt when none is.
std::optional<std::int64_t> stated(const json& s, const std::string& origin, const int_rule& r,
                                   std::int64_t lo, std::int64_t hi) {
  for (const char* k : r.keys) {
    if (!k) break;
    if (const auto at = locate(s, origin, k); at.obj)
      if (auto v = detail::opt_int_field(*at.obj, at.key, at.origin, lo, hi)) return v;
  }
  return std::nullopt;
}

// Returns the field a rule describes: stated, else its default (`m` gives hidden and heads); throws naming the
// keys looked for when it is required and absent.
std::int64_t read_int(const json& s, const std::string& origin, const int_rule& r, const model_spec& m,
                      std::int64_t lo = 1, std::int64_t hi = big) {
  if (auto v = stated(s, origin, r, lo, hi)) return *v;
  switch (r.when) {
    case absent::value:
      return r.value;
    case absent::four_hidden:
      return detail::checked_mul(4, m.hidden, "model.ffn_hidden");
    case absent::heads:
      return m.heads;
    case absent::hidden_per_head:
      return m.hidden / m.heads;
    case absent::required:
      break;
  }
  std::string names;
  for (const char* k : r.keys)
    if (k) names += (names.empty() ? "" : " or ") + std::string(k);
  // A key of the config one or two edits away is most likely the one meant ("num_local_expert").
  std::vector<std::string> keys;
  for (auto it = s.begin(); it != s.end(); ++it) keys.push_back(it.key());
  const std::string near = r.keys[0] ? detail::closest_name(r.keys[0], keys) : "";
  throw bad_input(where(origin, r.keys[0] ? r.keys[0] : "?"),
                  "missing (looked for " + names + ")" +
                      (near.empty() ? ": add it" : "; the config has '" + shown_name(near) + "': did you mean it?"));
}

bool read_bool(const json& s, const std::string& origin, const bool_rule& r) {
  return r.key ? opt_bool_field(s, r.key, origin).value_or(r.value) : r.value;
}

// Returns the layer indices a list key states, each in [0, layers); empty when absent.
std::vector<std::int64_t> layer_list(const json& s, const std::string& origin, const char* key,
                                     std::int64_t layers) {
  std::vector<std::int64_t> out;
  const auto it = key ? s.find(key) : s.end();
  if (!key || it == s.end() || it->is_null()) return out;
  if (!it->is_array()) throw bad_input(where(origin, key), "must be a list of layer indices");
  if (it->size() > static_cast<std::size_t>(max_list))
    throw bad_input(where(origin, key), "is absurdly long");
  for (const auto& v : *it) {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() >= layers)
      throw bad_input(where(origin, key), "must hold layer indices in [0, " + std::to_string(layers) + ")");
    out.push_back(v.get<std::int64_t>());
  }
  return out;
}

// Returns which layers are MoE under the row's placement rule.
std::vector<bool> read_placement(const json& s, const std::string& origin, const family_row& row,
                                 const model_spec& m) {
  const auto& p = row.placement;
  if (const auto it = p.moe_list ? s.find(p.moe_list) : s.end();
      p.moe_list && it != s.end() && !it->is_null()) {
    std::vector<bool> moe(static_cast<std::size_t>(m.layers), false);
    for (const auto i : layer_list(s, origin, p.moe_list, m.layers)) moe[static_cast<std::size_t>(i)] = true;
    return moe;
  }
  const std::int64_t first = read_int(s, origin, p.first_dense, m, 0, m.layers);
  const std::int64_t every = read_int(s, origin, p.every, m, 1, big);
  return moe_layer_pattern(m.layers, first, every, p.phase_last ? every - 1 : 0,
                           layer_list(s, origin, p.dense_list, m.layers));
}

// Fills m.moe from the row's MoE keys.
// DeepSeek's group-limited routing (transformers modeling_deepseek_v3.py, DeepseekV3TopkRouter.get_topk_indices;
// DeepSeek's own modeling_deepseek.py MoEGate): the scores are viewed as n_group groups of experts / n_group, the
// topk_group best groups kept and top_k experts chosen among them. A config whose groups do not divide the
// experts, or that keeps more groups than there are or too few to hold top_k experts, cannot run: refused.
void check_group_routing(const json& s, const std::string& origin, const moe_spec& e) {
  const auto groups = detail::opt_int_field(s, "n_group", origin, 1, max_experts);
  const auto kept = detail::opt_int_field(s, "topk_group", origin, 1, max_experts);
  if (!groups) {
    if (kept && *kept > 1)
      throw bad_input(where(origin, "topk_group"), "keeps " + std::to_string(*kept) + " groups, and n_group states none");
    return;
  }
  if (e.experts % *groups != 0)
    throw bad_input(where(origin, "n_group"), std::to_string(*groups) + " groups do not divide the " +
                                                  std::to_string(e.experts) + " routed experts");
  if (kept && *kept > *groups)
    throw bad_input(where(origin, "topk_group"), "keeps " + std::to_string(*kept) + " groups of n_group " +
                                                     std::to_string(*groups));
  const std::int64_t reachable = kept.value_or(*groups) * (e.experts / *groups);
  if (e.top_k > reachable)
    throw bad_input(where(origin, "num_experts_per_tok"),
                    std::to_string(e.top_k) + " experts cannot be chosen from the " + std::to_string(reachable) +
                        " in topk_group groups");
}

void read_moe(const json& s, const std::string& origin, const family_row& row, model_spec& m) {
  auto& e = m.moe;
  e.experts = read_int(s, origin, row.experts, m, 0, max_experts);
  // transformers' MoE blocks route with torch.topk over the experts: none to route to, or fewer than top-k,
  // and the model does not run (qwen2/3_moe build every layer dense at 0 experts: another model).
  if (e.experts == 0)
    throw bad_input(where(origin, row.experts.keys[0]),
                    "0 routed experts: a mixture-of-experts config needs at least top-k of them; state the "
                    "checkpoint's expert count, or plan the dense model under its dense model_type");
  e.top_k = read_int(s, origin, row.top_k, m, 1, max_experts);
  if (e.top_k > e.experts)
    throw bad_input(where(origin, row.top_k.keys[0]), "must be at most the number of experts (" +
                                                          std::string(row.experts.keys[0]) + " " +
                                                          std::to_string(e.experts) + "), got " +
                                                          std::to_string(e.top_k) + ": lower it");
  if (row.mla) check_group_routing(s, origin, e);
  e.expert_ffn = read_int(s, origin, row.expert_ffn, m);
  switch (row.shared_as) {
    case shared_kind::none:
      break;
    case shared_kind::width:
      e.shared_ffn = read_int(s, origin, row.shared, m, 0, big);
      e.shared_gate = e.shared_ffn > 0;
      break;
    case shared_kind::count:
      e.shared_ffn = detail::checked_mul(read_int(s, origin, row.shared, m, 0, max_experts), e.expert_ffn,
                                         "model.moe.shared_ffn");
      break;
    case shared_kind::one_expert:
      e.shared_ffn = e.expert_ffn;
      break;
  }
  e.router_bias = row.router_bias;
  e.expert_bias = row.expert_bias;
  e.layers = read_placement(s, origin, row, m);
  // A step or a dense prefix past the last layer leaves no MoE layer: a config of another model.
  if (std::none_of(e.layers.begin(), e.layers.end(), [](bool b) { return b; })) {
    const auto& p = row.placement;
    const char* key = p.every.keys[0] ? p.every.keys[0] : p.first_dense.keys[0] ? p.first_dense.keys[0] : "layers";
    throw bad_input(where(origin, key), "places no mixture-of-experts layer among the " + std::to_string(m.layers) +
                                            " layers: lower it (at most the layer count), or plan a dense model");
  }
  if (row.mtp) e.mtp_layers = read_int(s, origin, opt(row.mtp, 0), m, 0, 16);
}

// Fills m.mla (DeepSeek-V2/V3; configuration_deepseek_v3.py @ 001f85b3 defaults). A null q_lora_rank states
// queries projected straight from h (DeepSeek-V2-Lite); an absent one is the class default 1536.
void read_mla(const json& s, const std::string& origin, model_spec& m) {
  auto& a = m.mla;
  const auto q = s.find("q_lora_rank");
  a.q_lora_rank = q != s.end() && q->is_null() ? 0 : read_int(s, origin, opt("q_lora_rank", 1536), m);
  a.kv_lora_rank = read_int(s, origin, opt("kv_lora_rank", 512), m);
  a.qk_nope_head_dim = read_int(s, origin, opt("qk_nope_head_dim", 128), m);
  a.qk_rope_head_dim = read_int(s, origin, opt("qk_rope_head_dim", 64), m);
  a.v_head_dim = read_int(s, origin, opt("v_head_dim", 128), m);
}

bool any_dropout(const json& s, const std::string& origin, const std::array<const char*, 3>& keys) {
  for (const char* k : keys) {
    if (!k) break;
    if (const auto at = locate(s, origin, k); at.obj)
      if (auto v = opt_number_field(*at.obj, at.key, at.origin); v && *v > 0) return true;
  }
  return false;
}

// Refuses the mixture-of-experts and multi-latent-attention keys (json_fields.hpp's unmodelled table) that the
// row does not read: a dense family's code, or another family's, ignores them, so a config stating one
// describes a model that code does not build (a custom one), not the model this reader would price.
void refuse_unread(const json& s, const std::string& origin, const family_row& row) {
  const auto reads = [&](std::string_view key) {
    const auto in = [&](const int_rule& r) {
      return std::any_of(r.keys.begin(), r.keys.end(), [&](const char* k) {
        const std::string_view v = k ? k : "";
        return v == key || (v.size() > key.size() && v.substr(0, key.size()) == key && v[key.size()] == '.');
      });
    };
    if (row.mla && (key == "q_lora_rank" || key == "kv_lora_rank" || key == "qk_rope_head_dim" ||
                    key == "qk_nope_head_dim" || key == "v_head_dim"))
      return true;
    const auto& p = row.placement;
    return in(row.experts) || in(row.top_k) || in(row.expert_ffn) || in(row.shared) || in(row.ffn) ||
           in(p.first_dense) || in(p.every) || (p.dense_list && key == p.dense_list) ||
           (p.moe_list && key == p.moe_list) || (row.mtp && key == row.mtp);
  };
  for (const auto& f : detail::unmodelled_fields()) {
    const auto it = s.find(f.key);
    if (it == s.end() || it->is_null() || (it->is_boolean() && !it->get<bool>()) ||
        (it->is_number() && it->get<double>() == 0) || reads(f.key))
      continue;
    throw bad_input(where(origin, f.key), std::string(f.what) +
                                              " key that this family's code does not read: a "
                                              "custom model, refused rather than guessed");
  }
}

const family_row* row_of(const std::string& type) {
  for (const auto& r : family_rows)
    for (const char* t : r.types)
      if (t && type == t) return &r;
  return nullptr;
}

std::string supported_types() {
  std::string s;
  for (const auto& r : family_rows)
    for (const char* t : r.types)
      if (t) s += (s.empty() ? "" : ", ") + std::string(t);
  return s;
}

}  // namespace

model_spec model_from_hf_config(const json& c, const std::string& origin) {
  if (!c.is_object()) throw bad_input(origin, "expected a JSON object");
  const auto type = opt_string_field(c, "model_type", origin);
  if (!type) throw bad_input(origin + ".model_type", "missing");
  if (std::find(unread_moe_types.begin(), unread_moe_types.end(), *type) != unread_moe_types.end())
    throw bad_input(origin + ".model_type", "'" + shown_name(*type) +
                                                "' is a mixture-of-experts family this version does not read "
                                                "(refused rather than priced as a dense model)");
  const family_row* row = row_of(*type);
  if (!row)
    throw bad_input(origin + ".model_type",
                    "unsupported '" + shown_name(*type) + "' (supported: " + supported_types() + ")");
  // The text model: a nested section when the config has one (Llama 4's text_config), else the config itself.
  const json* text = &c;
  std::string at = origin;
  if (row->nested)
    if (const auto it = c.find(row->nested); it != c.end() && !it->is_null()) {
      if (!it->is_object()) throw bad_input(where(origin, row->nested), "must be an object");
      text = &*it;
      at = where(origin, row->nested);
    }
  const json& s = *text;
  refuse_unread(s, at, *row);
  model_spec m;
  m.name = opt_string_field(c, "_name_or_path", origin).value_or(*type);
  m.source = "HuggingFace config.json (" + shown_name(*type) +
             (row->nested && text != &c ? ", text model" : "") + ")";
  m.hidden = read_int(s, at, row->hidden, m);
  m.layers = read_int(s, at, row->layers, m);
  m.heads = read_int(s, at, row->heads, m);
  m.kv_heads = read_int(s, at, row->kv_heads, m);
  m.head_dim_stated = stated(s, at, row->head_dim, 1, big).has_value() || row->head_dim.when == absent::value;
  m.head_dim = read_int(s, at, row->head_dim, m);
  m.ffn_hidden = read_int(s, at, row->ffn, m);
  m.vocab = read_int(s, at, row->vocab, m);
  m.max_positions = read_int(s, at, row->max_positions, m) + row->position_offset;
  m.mlp = row->mlp;
  m.norm = row->norm;
  m.position = row->position;
  m.tied_embeddings = read_bool(s, at, row->tied);
  m.linear_bias = read_bool(s, at, row->bias) && !row->qkv_bias_only;
  m.qkv_bias_only = row->qkv_bias_only && read_bool(s, at, row->bias);
  m.embedding_norm = row->embedding_norm;
  m.parallel_residual = read_bool(s, at, row->parallel_residual);
  m.dropout = any_dropout(s, at, row->dropout);
  m.attention_sinks = row->attention_sinks;
  // q / k norms: no config key states them, the family implies them (hf_families.hpp, qk_norm).
  m.qk_norm = row->qk_norm;
  if (row->experts.keys[0]) read_moe(s, at, *row, m);
  if (row->mla) read_mla(s, at, m);
  if (row->quirk) row->quirk(s, at, m);
  // A config states the longest context, not the training sequence; --seq overrides this default.
  m.seq = std::min<std::int64_t>(m.max_positions, 4096);
  validate(m);
  return m;
}

model_spec load_hf_config(const std::string& path) {
  const json c = read_json_file(path);
  model_spec m = model_from_hf_config(c, shown_name(fs::path(path).filename().string()));
  if (!c.contains("_name_or_path"))
    if (std::string name = model_name_of_file(path); !name.empty()) m.name = std::move(name);
  return m;
}

std::string model_name_of_file(const std::string& path) {
  const fs::path p(path);
  std::string stem = p.stem().string();
  if (stem == "config") stem = p.has_parent_path() ? p.parent_path().filename().string() : "";
  return stem == "." || stem == ".." ? "" : stem;
}

}  // namespace headroom
