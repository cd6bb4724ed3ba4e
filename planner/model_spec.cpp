// model_spec.cpp: parameter counting from a model's dimensions, validation, and the model-file format.
#include "model_spec.hpp"

#include <nlohmann/json.hpp>

#include "errors.hpp"
#include "json_fields.hpp"

namespace headroom {

using detail::checked_add;
using detail::checked_mul;

const char* to_string(mlp_kind k) {
  return k == mlp_kind::gelu ? "gelu" : "swiglu";
}
const char* to_string(norm_kind k) {
  return k == norm_kind::layernorm ? "layernorm" : "rmsnorm";
}
const char* to_string(position_kind k) {
  switch (k) {
    case position_kind::learned:
      return "learned";
    case position_kind::rotary:
      return "rotary";
    case position_kind::alibi:
      return "alibi";
  }
  return "?";
}

// Limits that no real model reaches; beyond them a number is a typo, and products could leave int64.
namespace {
constexpr std::int64_t max_layers = 10'000;  // the search tries every pp up to it: bounded cost (README, limits)
constexpr std::int64_t max_width = 10'000'000;  // hidden, ffn, head_dim
constexpr std::int64_t max_heads = 1'000'000;
constexpr std::int64_t max_vocab = 100'000'000;
constexpr std::int64_t max_seq = 100'000'000;
}  // namespace

void validate(const model_spec& m) {
  auto positive = [](std::int64_t v, std::int64_t hi, const char* field) {
    if (v <= 0) throw bad_input(std::string("model.") + field, "must be positive, got " + std::to_string(v));
    if (v > hi)
      throw bad_input(std::string("model.") + field,
                      "is absurd (" + std::to_string(v) + " > " + std::to_string(hi) + ")");
  };
  positive(m.layers, max_layers, "layers");
  positive(m.hidden, max_width, "hidden");
  positive(m.heads, max_heads, "heads");
  positive(m.kv_heads, max_heads, "kv_heads");
  positive(m.head_dim, max_width, "head_dim");
  positive(m.ffn_hidden, max_width, "ffn_hidden");
  positive(m.vocab, max_vocab, "vocab");
  positive(m.seq, max_seq, "seq");
  positive(m.max_positions, max_seq, "max_positions");
  // A derived head_dim is hidden / heads: heads must divide hidden, or the attention widths are a guess.
  if (!m.head_dim_stated && (m.hidden % m.heads != 0 || m.head_dim != m.hidden / m.heads))
    throw bad_input("model.heads", "must divide hidden (" + std::to_string(m.hidden) + "), got " +
                                       std::to_string(m.heads) + " heads (state head_dim if intended)");
  if (m.heads % m.kv_heads != 0)
    throw bad_input("model.kv_heads",
                    "must divide heads (" + std::to_string(m.heads) + "), got " + std::to_string(m.kv_heads));
  if (m.norms_per_layer < 1 || m.norms_per_layer > 2)
    throw bad_input("model.norms_per_layer", "must be 1 or 2");
  if (m.norms_per_layer == 1 && !m.parallel_residual)
    throw bad_input("model.norms_per_layer", "one norm per layer needs parallel_residual");
  if (m.stated_params && *m.stated_params <= 0) throw bad_input("model.params", "must be positive");
  count_params(m);  // throws on overflow
}

param_counts count_params(const model_spec& m) {
  const char* what = "model parameter count";
  const std::int64_t h = m.hidden, f = m.ffn_hidden;
  const std::int64_t q = checked_mul(m.heads, m.head_dim, what);
  const std::int64_t kv = checked_mul(m.kv_heads, m.head_dim, what);
  // Attention: Q (h x q), K and V (h x kv each), output projection (q x h).
  std::int64_t attn = checked_add(checked_mul(2 * h, q, what), checked_mul(2 * h, kv, what), what);
  if (m.linear_bias)
    attn += q + 2 * kv + h;
  else if (m.qkv_bias_only)
    attn += q + 2 * kv;
  const std::int64_t matrices = m.mlp == mlp_kind::gelu ? 2 : 3;
  std::int64_t mlp = checked_mul(matrices * h, f, what);
  if (m.linear_bias) mlp += (matrices - 1) * f + h;
  const std::int64_t norm = m.norm == norm_kind::layernorm ? 2 * h : h;
  param_counts c;
  c.per_layer = checked_add(checked_add(attn, mlp, what), m.norms_per_layer * norm, what);
  c.embedding = checked_mul(m.vocab, h, what);
  if (m.position == position_kind::learned) c.embedding += checked_mul(m.max_positions, h, what);
  if (m.embedding_norm) c.embedding += norm;
  c.output = norm + (m.tied_embeddings ? 0 : checked_mul(m.vocab, h, what));
  c.output_tied = m.tied_embeddings ? m.vocab * h : 0;
  const std::int64_t derived =
      checked_add(checked_add(checked_mul(m.layers, c.per_layer, what), c.embedding, what), c.output, what);
  // The largest byte count anywhere is about 20 bytes per parameter; keep it inside int64.
  checked_mul(derived, 64, what);
  if (m.stated_params) {
    checked_mul(*m.stated_params, 64, what);
    c.total = *m.stated_params;
    c.stated = true;
    c.per_layer = *m.stated_params / m.layers;
    c.embedding = 0;
    c.output = 0;
    c.output_tied = 0;
  } else {
    c.total = derived;
  }
  return c;
}

model_spec model_from_json(const nlohmann::json& j, const std::string& origin) {
  using namespace detail;
  if (!j.is_object()) throw bad_input(origin, "expected a JSON object");
  refuse_unmodelled(j, origin);
  static const std::vector<std::string> known = {
      "name",    "source",          "note",           "layers",        "hidden",       "heads",
      "kv_heads", "head_dim",       "ffn_hidden",     "vocab",         "seq",          "max_positions",
      "mlp",     "norm",            "position",       "tied_embeddings", "dropout",    "bias",
      "qkv_bias_only", "embedding_norm", "norms_per_layer", "parallel_residual", "params"};
  require_known_keys(j, known, origin);
  model_spec m;
  m.name = opt_string_field(j, "name", origin).value_or(origin);
  m.source = opt_string_field(j, "source", origin).value_or("");
  m.layers = int_field(j, "layers", origin, 1, max_layers);
  m.hidden = int_field(j, "hidden", origin, 1, max_width);
  m.heads = int_field(j, "heads", origin, 1, max_heads);
  m.kv_heads = opt_int_field(j, "kv_heads", origin, 1, max_heads).value_or(m.heads);
  const auto head_dim = opt_int_field(j, "head_dim", origin, 1, max_width);
  m.head_dim_stated = head_dim.has_value();
  m.head_dim = head_dim.value_or(m.hidden / m.heads);
  m.ffn_hidden = opt_int_field(j, "ffn_hidden", origin, 1, max_width).value_or(4 * m.hidden);
  m.vocab = int_field(j, "vocab", origin, 1, max_vocab);
  m.seq = opt_int_field(j, "seq", origin, 1, max_seq).value_or(2048);
  m.max_positions = opt_int_field(j, "max_positions", origin, 1, max_seq).value_or(m.seq);
  if (auto s = opt_string_field(j, "mlp", origin)) {
    if (*s == "gelu")
      m.mlp = mlp_kind::gelu;
    else if (*s == "swiglu")
      m.mlp = mlp_kind::swiglu;
    else
      throw bad_input(origin + ".mlp", "must be gelu or swiglu, got '" + *s + "'");
  }
  if (auto s = opt_string_field(j, "norm", origin)) {
    if (*s == "layernorm")
      m.norm = norm_kind::layernorm;
    else if (*s == "rmsnorm")
      m.norm = norm_kind::rmsnorm;
    else
      throw bad_input(origin + ".norm", "must be layernorm or rmsnorm, got '" + *s + "'");
  }
  if (auto s = opt_string_field(j, "position", origin)) {
    if (*s == "learned")
      m.position = position_kind::learned;
    else if (*s == "rotary")
      m.position = position_kind::rotary;
    else if (*s == "alibi")
      m.position = position_kind::alibi;
    else
      throw bad_input(origin + ".position", "must be learned, rotary or alibi, got '" + *s + "'");
  }
  m.tied_embeddings = opt_bool_field(j, "tied_embeddings", origin).value_or(true);
  m.dropout = opt_bool_field(j, "dropout", origin).value_or(true);
  m.linear_bias = opt_bool_field(j, "bias", origin).value_or(true);
  m.qkv_bias_only = opt_bool_field(j, "qkv_bias_only", origin).value_or(false);
  m.embedding_norm = opt_bool_field(j, "embedding_norm", origin).value_or(false);
  m.norms_per_layer = static_cast<int>(opt_int_field(j, "norms_per_layer", origin, 1, 2).value_or(2));
  m.parallel_residual = opt_bool_field(j, "parallel_residual", origin).value_or(false);
  m.stated_params = opt_int_field(j, "params", origin, 1, INT64_MAX / 64);
  validate(m);
  return m;
}

nlohmann::json model_to_json(const model_spec& m) {
  nlohmann::json j = {{"name", m.name},
                      {"source", m.source},
                      {"layers", m.layers},
                      {"hidden", m.hidden},
                      {"heads", m.heads},
                      {"kv_heads", m.kv_heads},
                      {"head_dim", m.head_dim},
                      {"ffn_hidden", m.ffn_hidden},
                      {"vocab", m.vocab},
                      {"seq", m.seq},
                      {"max_positions", m.max_positions},
                      {"mlp", to_string(m.mlp)},
                      {"norm", to_string(m.norm)},
                      {"position", to_string(m.position)},
                      {"tied_embeddings", m.tied_embeddings},
                      {"dropout", m.dropout},
                      {"bias", m.linear_bias},
                      {"qkv_bias_only", m.qkv_bias_only},
                      {"embedding_norm", m.embedding_norm},
                      {"norms_per_layer", m.norms_per_layer},
                      {"parallel_residual", m.parallel_residual}};
  if (m.stated_params) j["params"] = *m.stated_params;
  return j;
}

}  // namespace headroom
