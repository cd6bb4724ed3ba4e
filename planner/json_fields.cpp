// json_fields.cpp: typed JSON field readers whose errors name the field (see json_fields.hpp).
#include "json_fields.hpp"

#include <algorithm>
#include <cmath>

#include "errors.hpp"

namespace headroom::detail {

namespace {
// Returns a value for an error message: scalars as written (cut at 60 characters), containers by their
// kind only, so no error path walks or prints an unbounded value.
std::string shown(const nlohmann::json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string where(const std::string& origin, const std::string& key) {
  return origin.empty() ? key : origin + "." + key;
}
}  // namespace

std::optional<std::int64_t> opt_int_field(const nlohmann::json& j, const std::string& key,
                                          const std::string& origin, std::int64_t lo, std::int64_t hi) {
  if (!j.is_object()) throw bad_input(origin.empty() ? "input" : origin, "expected a JSON object");
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  std::int64_t v = 0;
  if (it->is_number_integer()) {
    if (it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      throw bad_input(where(origin, key), "is too large");
    v = it->get<std::int64_t>();
  } else if (it->is_number_float()) {
    double d = it->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e18)
      throw bad_input(where(origin, key), "must be a whole number, got " + shown(*it));
    v = static_cast<std::int64_t>(d);
  } else {
    throw bad_input(where(origin, key), "must be an integer, got " + shown(*it));
  }
  if (v < lo || v > hi)
    throw bad_input(where(origin, key), "must be between " + std::to_string(lo) + " and " +
                                            std::to_string(hi) + ", got " + std::to_string(v));
  return v;
}

std::int64_t int_field(const nlohmann::json& j, const std::string& key, const std::string& origin,
                       std::int64_t lo, std::int64_t hi) {
  auto v = opt_int_field(j, key, origin, lo, hi);
  if (!v) throw bad_input(where(origin, key), "missing");
  return *v;
}

std::optional<double> opt_number_field(const nlohmann::json& j, const std::string& key,
                                       const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) throw bad_input(where(origin, key), "must be a number, got " + shown(*it));
  double d = it->get<double>();
  if (!std::isfinite(d) || d < 0) throw bad_input(where(origin, key), "must be a non-negative number");
  return d;
}

std::optional<bool> opt_bool_field(const nlohmann::json& j, const std::string& key,
                                   const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) throw bad_input(where(origin, key), "must be true or false, got " + shown(*it));
  return it->get<bool>();
}

std::optional<std::string> opt_string_field(const nlohmann::json& j, const std::string& key,
                                            const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) throw bad_input(where(origin, key), "must be a string, got " + shown(*it));
  return it->get<std::string>();
}

std::size_t edit_distance(const std::string& name, const std::string& b) {
  const std::string a = name.substr(0, 64);  // a 1 MB key costs no more than a long one
  std::vector<std::size_t> row(b.size() + 1), prev(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      row[j] = std::min({prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(row, prev);
  }
  return prev[b.size()];
}

std::string closest_name(const std::string& name, const std::vector<std::string>& known) {
  std::string best;
  std::size_t best_d = std::max<std::size_t>(2, std::min<std::size_t>(name.size(), 64) / 3) + 1;
  for (const auto& b : known)
    if (const std::size_t d = edit_distance(name, b); d < best_d) {
      best_d = d;
      best = b;
    }
  return best;
}

std::vector<std::string> nearest_names(const std::string& name, const std::vector<std::string>& known,
                                       std::size_t count) {
  std::vector<std::pair<std::size_t, std::size_t>> ranked;  // distance, index in known
  for (std::size_t i = 0; i < known.size(); ++i) ranked.emplace_back(edit_distance(name, known[i]), i);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < ranked.size() && i < count; ++i) out.push_back(known[ranked[i].second]);
  return out;
}

void require_known_keys(const nlohmann::json& j, const std::vector<std::string>& known,
                        const std::string& origin) {
  if (!j.is_object()) return;
  for (const auto& [key, value] : j.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    const std::string near = closest_name(key, known);
    throw bad_input(where(origin, key.substr(0, 80)),
                    "unknown key" + (near.empty() ? std::string(" (not read by this version)")
                                                  : " (did you mean '" + near + "'?)"));
  }
}

const std::vector<unmodelled_field>& unmodelled_fields() {
  // Field names as Hugging Face configs (Mixtral, Qwen-MoE, DeepSeek-V2/V3, DBRX, Llama 4, OLMoE) and
  // Megatron-style model files spell them. A model file states experts and latent attention in its "moe" and
  // "mla" objects, so these flat keys stay refused there; the HuggingFace reader (model_files.cpp) refuses only
  // those its family's row does not read (a config holding one describes a custom model).
  static const std::vector<unmodelled_field> fields = {
      {"num_local_experts", "mixture-of-experts"},
      {"num_experts", "mixture-of-experts"},
      {"n_routed_experts", "mixture-of-experts"},
      {"num_experts_per_tok", "mixture-of-experts"},
      {"moe_intermediate_size", "mixture-of-experts"},
      {"n_shared_experts", "mixture-of-experts"},
      {"shared_expert_intermediate_size", "mixture-of-experts"},
      {"first_k_dense_replace", "mixture-of-experts"},
      {"moe_layer_freq", "mixture-of-experts"},
      {"decoder_sparse_step", "mixture-of-experts"},
      {"interleave_moe_layer_step", "mixture-of-experts"},
      {"ffn_config", "mixture-of-experts"},
      {"experts", "mixture-of-experts"},
      {"moe_top_k", "mixture-of-experts"},
      {"expert_ffn_hidden", "mixture-of-experts"},
      {"q_lora_rank", "multi-latent attention"},
      {"kv_lora_rank", "multi-latent attention"},
      {"qk_rope_head_dim", "multi-latent attention"},
      {"qk_nope_head_dim", "multi-latent attention"},
      {"v_head_dim", "multi-latent attention"},
      {"num_nextn_predict_layers", "multi-token prediction"},
  };
  return fields;
}

void refuse_unmodelled(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) return;
  for (const auto& f : unmodelled_fields()) {
    const auto it = j.find(f.key);
    if (it == j.end() || it->is_null() || (it->is_boolean() && !it->get<bool>()) ||
        (it->is_number() && it->get<double>() == 0))
      continue;
    throw bad_input(where(origin, f.key), std::string(f.what) +
                                              " as a flat key: a model file states it in its \"moe\" or "
                                              "\"mla\" object (docs/model.md, \"Model files\"); refused "
                                              "rather than priced as a dense model");
  }
}

}  // namespace headroom::detail
