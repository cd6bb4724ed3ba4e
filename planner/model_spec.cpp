// model_spec.cpp: parameter counting from a model's dimensions, validation, and the model-file format.
#include "model_spec.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "errors.hpp"
#include "format.hpp"
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
  if (m.moe.enabled()) {
    const auto& x = m.moe;
    positive(x.experts, 1'000'000, "moe.experts");
    positive(x.top_k, x.experts, "moe.top_k");
    positive(x.expert_ffn, max_width, "moe.expert_ffn");
    if (x.shared_ffn < 0 || x.shared_ffn > max_width)
      throw bad_input("model.moe.shared_ffn", "must be 0 (none) or a width up to 10,000,000");
    if (x.shared_gate && x.shared_ffn == 0)
      throw bad_input("model.moe.shared_gate", "a shared-expert gate needs shared experts (shared_ffn)");
    if (static_cast<std::int64_t>(x.layers.size()) != m.layers)
      throw bad_input("model.moe.layers", "the pattern has " + std::to_string(x.layers.size()) +
                                              " entries for " + std::to_string(m.layers) + " layers");
    if (std::find(x.layers.begin(), x.layers.end(), true) == x.layers.end())
      throw bad_input("model.moe.layers", "no layer is a mixture-of-experts layer");
    if (x.mtp_layers < 0 || x.mtp_layers > 16) throw bad_input("model.moe.mtp_layers", "must be 0-16");
  } else if (m.moe.top_k || m.moe.expert_ffn || m.moe.shared_ffn || m.moe.mtp_layers || !m.moe.layers.empty()) {
    throw bad_input("model.moe.experts", "mixture-of-experts fields without routed experts");
  }
  if (m.mla.enabled() || m.mla.q_lora_rank || m.mla.qk_nope_head_dim || m.mla.qk_rope_head_dim ||
      m.mla.v_head_dim) {
    positive(m.mla.kv_lora_rank, max_width, "mla.kv_lora_rank");
    positive(m.mla.qk_nope_head_dim, max_width, "mla.qk_nope_head_dim");
    positive(m.mla.qk_rope_head_dim, max_width, "mla.qk_rope_head_dim");
    positive(m.mla.v_head_dim, max_width, "mla.v_head_dim");
    if (m.mla.q_lora_rank < 0 || m.mla.q_lora_rank > max_width)
      throw bad_input("model.mla.q_lora_rank", "must be 0 (no query compression) or a width");
  }
  count_params(m);  // throws on overflow
}

namespace {

// Returns one attention block's parameters (docs/model.md, "Parameters"). Standard: Q (h x a*d), K and V
// (h x kv*d each), output projection (a*d x h), split by tp, with biases on Q, K, V (split) and on the output
// projection (replicated: a row-parallel bias). Multi-latent attention (Megatron-LM
// megatron/training/theoretical_memory_usage.py, MLA branch; DeepSeek-V3's modeling code): q_down (h x q_lora),
// its norm, q_up (q_lora x a*(nope + rope)) or, without q_lora, q (h x a*(nope + rope)); kv_down
// (h x (kv_lora + rope)), its norm, kv_up (kv_lora x a*(nope + v)); output a*v x h. The latent norms are
// replicated, the projections split by tp as Megatron's estimator buckets them.
layer_params attention_params(const model_spec& m, std::int64_t norm_params_per_width) {
  const char* what = "model parameter count";
  const std::int64_t h = m.hidden, a = m.heads;
  layer_params p;
  if (m.mla.enabled()) {
    const auto& x = m.mla;
    const std::int64_t qk = checked_add(x.qk_nope_head_dim, x.qk_rope_head_dim, what);
    const std::int64_t q_out = checked_mul(a, qk, what);
    if (x.q_lora_rank > 0) {
      p.sharded = checked_add(checked_mul(h, x.q_lora_rank, what), checked_mul(x.q_lora_rank, q_out, what), what);
      p.replicated += norm_params_per_width * x.q_lora_rank;
    } else {
      p.sharded = checked_mul(h, q_out, what);
    }
    p.sharded = checked_add(p.sharded, checked_mul(h, x.kv_lora_rank + x.qk_rope_head_dim, what), what);
    p.sharded = checked_add(
        p.sharded, checked_mul(x.kv_lora_rank, checked_mul(a, x.qk_nope_head_dim + x.v_head_dim, what), what),
        what);
    p.sharded = checked_add(p.sharded, checked_mul(checked_mul(a, x.v_head_dim, what), h, what), what);
    p.replicated += norm_params_per_width * x.kv_lora_rank;
  } else {
    const std::int64_t q = checked_mul(m.heads, m.head_dim, what);
    const std::int64_t kv = checked_mul(m.kv_heads, m.head_dim, what);
    p.sharded = checked_add(checked_mul(2 * h, q, what), checked_mul(2 * h, kv, what), what);
    if (m.linear_bias || m.qkv_bias_only) p.sharded += q + 2 * kv;
    if (m.linear_bias) p.replicated += h;
  }
  if (m.attention_sinks) p.sharded += a;  // one sink logit per head
  // q_norm and k_norm (Qwen3RMSNorm(head_dim) in transformers modeling_qwen3.py; TENorm(head_dim) in Megatron
  // attention.py): one weight each, shared by every head, so on every tp rank.
  if (m.qk_norm && !m.mla.enabled()) p.replicated += 2 * norm_params_per_width * m.head_dim;
  return p;
}

// Returns one MLP of width f with the model's mlp kind: gelu h->f->h, swiglu gate and up h->f, down f->h;
// biases (when the model has them) on the column-parallel matrices split, on the row-parallel one replicated.
layer_params mlp_params(const model_spec& m, std::int64_t f, bool bias) {
  const char* what = "model parameter count";
  const std::int64_t matrices = m.mlp == mlp_kind::gelu ? 2 : 3;
  layer_params p;
  p.sharded = checked_mul(checked_mul(matrices, m.hidden, what), f, what);
  if (bias) {
    p.sharded += (matrices - 1) * f;
    p.replicated += m.hidden;
  }
  return p;
}

layer_params plus(layer_params a, const layer_params& b) {
  const char* what = "model parameter count";
  a.sharded = checked_add(a.sharded, b.sharded, what);
  a.replicated = checked_add(a.replicated, b.replicated, what);
  a.expert = checked_add(a.expert, b.expert, what);
  return a;
}

layer_params times(const layer_params& a, std::int64_t n) {
  const char* what = "model parameter count";
  return {checked_mul(a.sharded, n, what), checked_mul(a.replicated, n, what), checked_mul(a.expert, n, what)};
}

}  // namespace

param_counts count_params(const model_spec& m) {
  const char* what = "model parameter count";
  const std::int64_t h = m.hidden;
  const std::int64_t norm_per_width = m.norm == norm_kind::layernorm ? 2 : 1;
  const std::int64_t norm = norm_per_width * h;
  param_counts c;
  const layer_params attn = attention_params(m, norm_per_width);
  const layer_params norms{0, m.norms_per_layer * norm, 0};
  c.dense_layer = plus(plus(attn, norms), mlp_params(m, m.ffn_hidden, m.linear_bias));
  c.per_layer = c.dense_layer.total();
  std::int64_t moe_count = 0;
  if (m.moe.enabled()) {
    const auto& x = m.moe;
    layer_params moe = plus(attn, norms);
    moe.replicated = checked_add(moe.replicated, checked_mul(h, x.experts, what), what);  // router
    if (x.router_bias) moe.replicated += x.experts;
    if (x.shared_ffn > 0) moe = plus(moe, mlp_params(m, x.shared_ffn, false));
    if (x.shared_gate) moe.replicated += h;
    const layer_params one_expert = mlp_params(m, x.expert_ffn, x.expert_bias);
    moe.expert = checked_mul(one_expert.total(), x.experts, what);
    c.moe_layer = moe;
    c.moe_before.assign(static_cast<std::size_t>(m.layers) + 1, 0);
    for (std::int64_t i = 0; i < m.layers; ++i)
      c.moe_before[static_cast<std::size_t>(i) + 1] = c.moe_before[static_cast<std::size_t>(i)] + (m.is_moe_layer(i) ? 1 : 0);
    moe_count = c.moe_before.back();
    if (x.mtp_layers > 0) {
      // DeepSeek-V3's multi-token prediction module (Megatron-LM megatron/core/transformer/
      // multi_token_prediction.py): enorm and hnorm, eh_proj (2h -> h), one transformer layer of the last
      // layer's kind, and its final norm; it shares the embedding and the output head.
      layer_params one = m.mtp_layer_is_moe() ? moe : c.dense_layer;
      one.sharded = checked_add(one.sharded, checked_mul(2 * h, h, what), what);
      one.replicated += 3 * norm;
      c.mtp = times(one, x.mtp_layers);
    }
  }
  c.embedding = checked_mul(m.vocab, h, what);
  if (m.position == position_kind::learned) {
    c.embedding_replicated = checked_mul(m.max_positions, h, what);
    c.embedding += c.embedding_replicated;
  }
  if (m.embedding_norm) {
    c.embedding += norm;
    c.embedding_replicated += norm;
  }
  c.output = norm + (m.tied_embeddings ? 0 : checked_mul(m.vocab, h, what));
  c.output_replicated = norm;
  c.output_tied = m.tied_embeddings ? m.vocab * h : 0;
  const std::int64_t dense_count = m.layers - moe_count;
  std::int64_t derived = checked_add(checked_mul(dense_count, c.dense_layer.total(), what),
                                     checked_mul(moe_count, c.moe_layer.total(), what), what);
  derived = checked_add(checked_add(derived, c.embedding, what), c.output, what);
  c.mtp_total = c.mtp.total();
  derived = checked_add(derived, c.mtp_total, what);
  // Active per token: every routed expert's share top_k / E of the experts (DeepSeek-V3's "37B activated").
  const std::int64_t routed_active =
      m.moe.enabled() ? c.moe_layer.expert / m.moe.experts * m.moe.top_k : 0;
  c.active = derived - c.mtp_total - moe_count * (c.moe_layer.expert - routed_active);
  // The largest byte count anywhere is about 20 bytes per parameter; keep it inside int64.
  checked_mul(derived, 64, what);
  if (m.stated_params) {
    checked_mul(*m.stated_params, 64, what);
    c.total = *m.stated_params;
    c.active = c.total;
    c.stated = true;
    c.per_layer = *m.stated_params / m.layers;
    c.dense_layer = {c.per_layer, 0, 0};
    c.moe_layer = {};
    c.mtp = {};
    c.mtp_total = 0;
    c.moe_before.clear();
    c.embedding = 0;
    c.embedding_replicated = 0;
    c.output = 0;
    c.output_replicated = 0;
    c.output_tied = 0;
  } else {
    c.total = derived;
  }
  return c;
}

std::vector<bool> moe_layer_pattern(std::int64_t layers, std::int64_t first_dense, std::int64_t every,
                                    std::int64_t phase, const std::vector<std::int64_t>& dense) {
  if (every < 1) throw bad_input("moe.every", "must be at least 1, got " + std::to_string(every));
  if (phase < 0 || phase >= every)
    throw bad_input("moe.phase", "must be in [0, " + std::to_string(every) + "), got " + std::to_string(phase));
  if (layers < 0 || layers > max_layers) throw bad_input("model.layers", "is out of range");
  std::vector<bool> v(static_cast<std::size_t>(layers), false);
  for (std::int64_t i = 0; i < layers; ++i)
    v[static_cast<std::size_t>(i)] =
        i >= first_dense && i % every == phase && std::find(dense.begin(), dense.end(), i) == dense.end();
  return v;
}

namespace {
// A recursive-descent reader of Megatron's layer-pattern expressions (megatron/training/arguments.py,
// moe_freq_type): sums of lists and parenthesised groups, each optionally repeated with *N.
struct pattern_reader {
  const std::string& s;
  const std::string& origin;
  std::size_t at = 0;
  int depth = 0;
  static constexpr std::size_t max_entries = 100'000;

  [[noreturn]] void fail(const std::string& why) const {
    throw bad_input(origin, "layer pattern: " + why + " at character " + std::to_string(at + 1));
  }
  void skip() {
    while (at < s.size() && (s[at] == ' ' || s[at] == '\t')) ++at;
  }
  std::int64_t number() {
    skip();
    if (at >= s.size() || s[at] < '0' || s[at] > '9') fail("expected a number");
    std::int64_t v = 0;
    while (at < s.size() && s[at] >= '0' && s[at] <= '9') {
      v = v * 10 + (s[at++] - '0');
      if (v > static_cast<std::int64_t>(max_entries)) fail("number too large");
    }
    return v;
  }
  std::vector<bool> term() {
    skip();
    std::vector<bool> v;
    if (at < s.size() && s[at] == '[') {
      ++at;
      skip();
      while (at < s.size() && s[at] != ']') {
        const std::int64_t x = number();
        if (x > 1) fail("entries must be 0 or 1");
        v.push_back(x == 1);
        skip();
        if (at < s.size() && s[at] == ',') ++at;
        skip();
      }
      if (at >= s.size()) fail("missing ']'");
      ++at;
    } else if (at < s.size() && s[at] == '(') {
      if (++depth > 32) fail("nested too deeply");
      ++at;
      v = sum();
      skip();
      if (at >= s.size() || s[at] != ')') fail("missing ')'");
      ++at;
      --depth;
    } else {
      fail("expected '[' or '('");
    }
    skip();
    while (at < s.size() && s[at] == '*') {
      ++at;
      const std::int64_t n = number();
      if (v.size() * static_cast<std::size_t>(n) > max_entries) fail("more than 100,000 entries");
      std::vector<bool> r;
      for (std::int64_t k = 0; k < n; ++k) r.insert(r.end(), v.begin(), v.end());
      v = std::move(r);
      skip();
    }
    return v;
  }
  std::vector<bool> sum() {
    std::vector<bool> v = term();
    skip();
    while (at < s.size() && s[at] == '+') {
      ++at;
      auto w = term();
      if (v.size() + w.size() > max_entries) fail("more than 100,000 entries");
      v.insert(v.end(), w.begin(), w.end());
      skip();
    }
    return v;
  }
};
}  // namespace

std::vector<bool> parse_layer_pattern(const std::string& expr, const std::string& origin) {
  if (expr.size() > 10'000) throw bad_input(origin, "layer pattern is longer than 10,000 characters");
  pattern_reader r{expr, origin};
  auto v = r.sum();
  r.skip();
  if (r.at != expr.size()) r.fail("unexpected character");
  return v;
}

namespace {
// Reads a model file's "moe" and "mla" objects into `m` (docs/model.md, "Model files"). Throws bad_input.
void read_moe_and_mla(const nlohmann::json& j, const std::string& origin, model_spec& m) {
  using namespace detail;
  if (auto it = j.find("moe"); it != j.end() && !it->is_null()) {
    const std::string o = origin + ".moe";
    if (!it->is_object()) throw bad_input(o, "expected an object");
    require_known_keys(*it, {"experts", "top_k", "expert_ffn", "shared_ffn", "shared_gate", "router_bias",
                             "expert_bias", "layers", "mtp_layers"},
                       o);
    auto& x = m.moe;
    x.experts = int_field(*it, "experts", o, 1, 1'000'000);
    x.top_k = int_field(*it, "top_k", o, 1, x.experts);
    x.expert_ffn = opt_int_field(*it, "expert_ffn", o, 1, max_width).value_or(m.ffn_hidden);
    x.shared_ffn = opt_int_field(*it, "shared_ffn", o, 0, max_width).value_or(0);
    x.shared_gate = opt_bool_field(*it, "shared_gate", o).value_or(false);
    x.router_bias = opt_bool_field(*it, "router_bias", o).value_or(false);
    x.expert_bias = opt_bool_field(*it, "expert_bias", o).value_or(false);
    x.mtp_layers = opt_int_field(*it, "mtp_layers", o, 0, 16).value_or(0);
    const auto lt = it->find("layers");
    if (lt == it->end() || lt->is_null()) {
      x.layers.assign(static_cast<std::size_t>(m.layers), true);  // every layer MoE (Mixtral)
    } else if (lt->is_string()) {
      x.layers = parse_layer_pattern(lt->get<std::string>(), o + ".layers");
    } else if (lt->is_array()) {
      if (lt->size() > static_cast<std::size_t>(max_layers))
        throw bad_input(o + ".layers", "more entries than layers can have");
      for (const auto& v : *lt) {
        if (!v.is_number_integer() || (v.get<std::int64_t>() != 0 && v.get<std::int64_t>() != 1))
          throw bad_input(o + ".layers", "entries must be 0 (dense) or 1 (MoE)");
        x.layers.push_back(v.get<std::int64_t>() == 1);
      }
    } else {
      throw bad_input(o + ".layers", "expected a list of 0/1 or a pattern such as \"[0]*3+[1]*58\"");
    }
  }
  if (auto it = j.find("mla"); it != j.end() && !it->is_null()) {
    const std::string o = origin + ".mla";
    if (!it->is_object()) throw bad_input(o, "expected an object");
    require_known_keys(*it, {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"},
                       o);
    m.mla.q_lora_rank = opt_int_field(*it, "q_lora_rank", o, 0, max_width).value_or(0);
    m.mla.kv_lora_rank = int_field(*it, "kv_lora_rank", o, 1, max_width);
    m.mla.qk_nope_head_dim = int_field(*it, "qk_nope_head_dim", o, 1, max_width);
    m.mla.qk_rope_head_dim = int_field(*it, "qk_rope_head_dim", o, 1, max_width);
    m.mla.v_head_dim = int_field(*it, "v_head_dim", o, 1, max_width);
  }
}
}  // namespace

std::string shape_difference(const model_spec& a, const model_spec& b) {
  auto num = [](const char* what, std::int64_t x, std::int64_t y) {
    return x == y ? std::string() : std::string(what) + " " + std::to_string(x) + " and " + std::to_string(y);
  };
  auto yes = [](bool v) { return v ? "yes" : "no"; };
  const bool dense_a = std::find(a.moe.layers.begin(), a.moe.layers.end(), false) != a.moe.layers.end() ||
                       !a.moe.enabled();
  const bool dense_b = std::find(b.moe.layers.begin(), b.moe.layers.end(), false) != b.moe.layers.end() ||
                       !b.moe.enabled();
  for (std::string d :
       {num("layers", a.layers, b.layers), num("hidden", a.hidden, b.hidden), num("heads", a.heads, b.heads),
        num("kv heads", a.kv_heads, b.kv_heads), num("head dim", a.head_dim, b.head_dim),
        // The dense FFN width matters only where a dense layer is built (an all-MoE model states its own).
        dense_a || dense_b ? num("ffn hidden", a.ffn_hidden, b.ffn_hidden) : std::string(),
        num("vocabulary", a.vocab, b.vocab), num("experts", a.moe.experts, b.moe.experts),
        num("top-k", a.moe.top_k, b.moe.top_k), num("expert ffn", a.moe.expert_ffn, b.moe.expert_ffn),
        num("shared-expert ffn", a.moe.shared_ffn, b.moe.shared_ffn),
        num("MTP layers", a.moe.mtp_layers, b.moe.mtp_layers),
        num("q LoRA rank", a.mla.q_lora_rank, b.mla.q_lora_rank),
        num("kv LoRA rank", a.mla.kv_lora_rank, b.mla.kv_lora_rank),
        num("qk nope head dim", a.mla.qk_nope_head_dim, b.mla.qk_nope_head_dim),
        num("qk rope head dim", a.mla.qk_rope_head_dim, b.mla.qk_rope_head_dim),
        num("v head dim", a.mla.v_head_dim, b.mla.v_head_dim)})
    if (!d.empty()) return d;
  if (a.moe.enabled() && b.moe.enabled() && a.moe.layers != b.moe.layers) return "the MoE layers' placement";
  if (a.tied_embeddings != b.tied_embeddings)
    return std::string("tied embeddings ") + yes(a.tied_embeddings) + " and " + yes(b.tied_embeddings);
  if (a.mlp != b.mlp) return std::string("mlp ") + to_string(a.mlp) + " and " + to_string(b.mlp);
  if (a.norm != b.norm) return std::string("norm ") + to_string(a.norm) + " and " + to_string(b.norm);
  if (a.qk_norm != b.qk_norm) return std::string("q/k norms ") + yes(a.qk_norm) + " and " + yes(b.qk_norm);
  return "";
}

model_spec model_from_json(const nlohmann::json& j, const std::string& origin) {
  using namespace detail;
  if (!j.is_object()) throw bad_input(origin, "expected a JSON object");
  refuse_unmodelled(j, origin);
  static const std::vector<std::string> known = {
      "name",    "source",          "note",           "layers",        "hidden",       "heads",
      "kv_heads", "head_dim",       "ffn_hidden",     "vocab",         "seq",          "max_positions",
      "mlp",     "norm",            "position",       "tied_embeddings", "dropout",    "bias",
      "qkv_bias_only", "embedding_norm", "norms_per_layer", "parallel_residual", "params",
      "moe",     "mla",             "attention_sinks", "qk_norm", "unfused"};
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
  m.attention_sinks = opt_bool_field(j, "attention_sinks", origin).value_or(false);
  m.qk_norm = opt_bool_field(j, "qk_norm", origin).value_or(false);  // absent in files written before it
  if (auto u = j.find("unfused"); u != j.end()) {  // absent: every fusion on, Megatron's default
    const std::string paths = names_phrase<unfused_path>();
    if (!u->is_array()) throw bad_input(origin + ".unfused", "must be a list of " + paths);
    for (const auto& x : *u) {
      const std::string n = x.is_string() ? x.get<std::string>() : "";
      const auto p = parse_name<unfused_path>(n);
      if (!p) throw bad_input(origin + ".unfused", "unknown path '" + printable(n, 40) + "': use " + paths);
      m.unfused |= unfused_bit(*p);
    }
  }
  read_moe_and_mla(j, origin, m);
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
  if (m.attention_sinks) j["attention_sinks"] = true;
  if (m.qk_norm) j["qk_norm"] = true;
  if (m.unfused) {
    nlohmann::json u = nlohmann::json::array();
    for (const auto& e : unfused_path_names)
      if (m.runs_unfused(e.value)) u.push_back(e.name);
    j["unfused"] = u;
  }
  if (m.moe.enabled()) {
    std::vector<int> layers;
    for (bool b : m.moe.layers) layers.push_back(b ? 1 : 0);
    j["moe"] = {{"experts", m.moe.experts},         {"top_k", m.moe.top_k},
                {"expert_ffn", m.moe.expert_ffn},   {"shared_ffn", m.moe.shared_ffn},
                {"shared_gate", m.moe.shared_gate}, {"router_bias", m.moe.router_bias},
                {"expert_bias", m.moe.expert_bias}, {"layers", layers},
                {"mtp_layers", m.moe.mtp_layers}};
  }
  if (m.mla.enabled())
    j["mla"] = {{"q_lora_rank", m.mla.q_lora_rank},
                {"kv_lora_rank", m.mla.kv_lora_rank},
                {"qk_nope_head_dim", m.mla.qk_nope_head_dim},
                {"qk_rope_head_dim", m.mla.qk_rope_head_dim},
                {"v_head_dim", m.mla.v_head_dim}};
  return j;
}

}  // namespace headroom
