// ledger.cpp: the per-layer activation ledger (see ledger.hpp). For a GPT-3 layer (eager attention,
// dropout, GeLU, 4h MLP, tp = 1) the entries sum to s*b*h*(34 + 5*a*s/h) bytes exactly.
#include "ledger.hpp"

#include "errors.hpp"

namespace headroom {

ledger_shape shape_of(const problem& p, const layout& l) {
  return {p.training.seq,       p.training.micro_batch,       l.tp,           l.sp(), l.cp,
          p.training.attention, p.precision.activation_bytes, p.training.loss};
}

namespace {
std::int64_t product(const std::vector<std::int64_t>& shape, std::int64_t dtype) {
  std::int64_t r = dtype;
  for (auto d : shape) r = detail::checked_mul(r, d, "activation ledger");
  return r;
}
}  // namespace

std::vector<ledger_entry> layer_ledger(const model_spec& m, const ledger_shape& s) {
  const std::int64_t t = s.tp, act = s.activation_bytes, b = s.micro_batch;
  const std::int64_t s_local = s.seq / s.cp;               // tokens of this cp rank
  const std::int64_t s_sp = s.sp ? s_local / t : s_local;  // rows outside the tp-split regions
  const std::int64_t heads = m.heads / t;
  const std::int64_t kv = m.kv_heads >= t ? m.kv_heads / t : 1;  // fewer kv heads than tp: replicated
  const std::int64_t q_width = heads * m.head_dim, kv_width = kv * m.head_dim;
  const std::int64_t f = m.ffn_hidden / t, h = m.hidden;
  // "/t" in a formula: split by tensor parallelism; "/T": split only with sequence parallelism.
  const std::string cpdiv = s.cp > 1 ? "/cp" : "";
  std::vector<ledger_entry> out;
  auto add = [&](std::string name, std::string formula, std::vector<std::int64_t> shape, std::int64_t dtype,
                 act_role role) {
    ledger_entry e{std::move(name), std::move(formula) + cpdiv, std::move(shape), dtype, 0, role};
    e.bytes = product(e.shape, dtype);
    out.push_back(std::move(e));
  };
  const std::string T = s.sp ? "/t" : "";
  const std::string a16 = std::to_string(act);
  add("ln1.input", a16 + "*s*b*h" + T, {s_sp, b, h}, act, act_role::layer_input);
  // Each norm keeps fp32 statistics per token for backward: LayerNorm mean and rstd, RMSNorm rstd
  // (Apex's FusedLayerNorm and Transformer Engine save them; Korthikanti et al. leave them out).
  const std::int64_t stats = m.norm == norm_kind::layernorm ? 2 : 1;
  const std::string stats_formula = std::to_string(4 * stats) + "*s*b" + T;
  add("ln1.stats", stats_formula, {s_sp, b, stats}, 4, act_role::saved);
  add("attn.qkv.input", a16 + "*s*b*h" + T, {s_sp, b, h}, act, act_role::saved);
  add("attn.q", a16 + "*s*b*a*d/t", {s_local, b, q_width}, act, act_role::saved);
  add("attn.k", a16 + "*s*b*kv*d/t", {s_local, b, kv_width}, act, act_role::saved);
  if (s.attention == attention_kind::eager) {
    add("attn.softmax.output", a16 + "*a*s^2*b/t", {b, heads, s_local, s.seq}, act, act_role::attention_core);
    if (m.dropout) {
      add("attn.softmax.dropout_mask", "1*a*s^2*b/t", {b, heads, s_local, s.seq}, 1,
          act_role::attention_core);
      add("attn.softmax.dropout_output", a16 + "*a*s^2*b/t", {b, heads, s_local, s.seq}, act,
          act_role::attention_core);
    }
  } else {
    // A flash kernel keeps no s x s tensor, only the fp32 log-sum-exp of each row.
    add("attn.flash.logsumexp", "4*a*s*b/t", {b, heads, s_local}, 4, act_role::attention_core);
  }
  add("attn.v", a16 + "*s*b*kv*d/t", {s_local, b, kv_width}, act, act_role::saved);
  add("attn.proj.input", a16 + "*s*b*a*d/t", {s_local, b, q_width}, act, act_role::saved);
  if (m.dropout) add("attn.dropout_mask", "1*s*b*h" + T, {s_sp, b, h}, 1, act_role::saved);
  // Parallel residual (GPT-NeoX, Falcon): the MLP's norm reads the layer input, which is already kept;
  // with a single norm (Falcon-7B) the MLP also shares the attention's normalised input.
  if (!m.parallel_residual) add("ln2.input", a16 + "*s*b*h" + T, {s_sp, b, h}, act, act_role::saved);
  if (m.norms_per_layer == 2) add("ln2.stats", stats_formula, {s_sp, b, stats}, 4, act_role::saved);
  if (m.norms_per_layer == 2) add("mlp.fc1.input", a16 + "*s*b*h" + T, {s_sp, b, h}, act, act_role::saved);
  if (m.mlp == mlp_kind::gelu) {
    add("mlp.gelu.input", a16 + "*s*b*f/t", {s_local, b, f}, act, act_role::saved);
  } else {
    // Megatron's fused SwiGLU keeps gate and up and recomputes SiLU in backward.
    add("mlp.gate", a16 + "*s*b*f/t", {s_local, b, f}, act, act_role::saved);
    add("mlp.up", a16 + "*s*b*f/t", {s_local, b, f}, act, act_role::saved);
  }
  add("mlp.fc2.input", a16 + "*s*b*f/t", {s_local, b, f}, act, act_role::saved);
  if (m.dropout) add("mlp.dropout_mask", "1*s*b*h" + T, {s_sp, b, h}, 1, act_role::saved);
  return out;
}

activation_sums sum_ledger(const std::vector<ledger_entry>& ledger) {
  activation_sums s;
  for (const auto& e : ledger) {
    s.none = detail::checked_add(s.none, e.bytes, "activation ledger");
    if (kept_for_backward(e.role, recompute_mode::selective)) s.selective += e.bytes;
    if (kept_for_backward(e.role, recompute_mode::full)) s.full += e.bytes;
  }
  return s;
}

std::vector<ledger_entry> backward_working_set(const model_spec& m, const ledger_shape& s, recompute_mode r,
                                               std::int64_t unsharded_grad_bytes) {
  std::vector<ledger_entry> out;
  for (const auto& e : layer_ledger(m, s)) {
    if (!kept_for_backward(e.role, r)) {
      out.push_back(e);
      out.back().name = "recomputed." + e.name;
    }
  }
  const std::int64_t t = s.tp, act = s.activation_bytes, b = s.micro_batch;
  const std::int64_t s_local = s.seq / s.cp, s_sp = s.sp ? s_local / t : s_local;
  const std::string T = s.sp ? "/t" : "", a16 = std::to_string(act), cpdiv = s.cp > 1 ? "/cp" : "";
  auto add = [&](std::string name, std::string formula, std::vector<std::int64_t> shape, std::int64_t dtype) {
    ledger_entry e{std::move(name), std::move(formula) + cpdiv, std::move(shape), dtype, 0, act_role::saved};
    e.bytes = product(e.shape, dtype);
    out.push_back(std::move(e));
  };
  add("grad.layer_output", a16 + "*s*b*h" + T, {s_sp, b, m.hidden}, act);
  add("grad.layer_input", a16 + "*s*b*h" + T, {s_sp, b, m.hidden}, act);
  add("grad.mlp.hidden", a16 + "*s*b*f/t", {s_local, b, m.ffn_hidden / t}, act);
  if (s.attention == attention_kind::eager)
    add("grad.attn.probs", a16 + "*a*s^2*b/t", {b, m.heads / t, s_local, s.seq}, act);
  if (unsharded_grad_bytes > 0) {
    ledger_entry e{"grad.params.unsharded", "layer params/t * grad bytes",
                   {unsharded_grad_bytes},  1,
                   unsharded_grad_bytes,    act_role::saved};
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<ledger_entry> output_phase_tensors(const model_spec& m, const ledger_shape& s) {
  const std::int64_t tokens = detail::checked_mul(s.seq / s.cp, s.micro_batch, "logits");
  const std::int64_t v = (m.vocab + s.tp - 1) / s.tp;
  const std::int64_t act = s.activation_bytes;
  std::vector<ledger_entry> out;
  const std::string cpdiv = s.cp > 1 ? "/cp" : "";
  auto logit = [&](std::string name, std::int64_t dtype) {
    out.push_back({std::move(name),
                   std::to_string(dtype) + "*s*b*V/t" + cpdiv,
                   {tokens, v},
                   dtype,
                   product({tokens, v}, dtype),
                   act_role::saved});
  };
  auto token = [&](std::string name, std::int64_t dtype) {
    out.push_back({std::move(name),
                   std::to_string(dtype) + "*s*b" + cpdiv,
                   {tokens},
                   dtype,
                   product({tokens}, dtype),
                   act_role::saved});
  };
  if (s.loss == loss_kind::fused) {
    // Megatron's _VocabParallelCrossEntropy: logits.float() is exponentiated and normalised in place and
    // saved; backward turns it into the gradient in place; the output layer's backward gets it cast back.
    // The forward peak (bf16 logits + their fp32 copy) holds the same 6 bytes per logit.
    logit("output.softmax", 4);
    logit("output.logits.grad", act);
    token("output.loss", 4);
    token("output.target_mask", 1);
    token("output.masked_target", 8);
  } else {
    // F.cross_entropy(logits.float(), target): log_softmax saves its output; backward makes the gradient
    // of that output (nll_loss) and of its input (log_softmax) before the cast back to bf16.
    logit("output.logits", act);
    logit("output.logits.fp32", 4);
    logit("output.log_softmax", 4);
    logit("output.log_softmax.grad", 4);
    logit("output.logits.fp32.grad", 4);
    token("output.loss", 4);
  }
  return out;
}

peak_sums sum_peaks(const model_spec& m, const ledger_shape& s) {
  peak_sums p;
  for (auto r : {recompute_mode::none, recompute_mode::selective, recompute_mode::full})
    p.working_set[static_cast<std::size_t>(r)] = total_bytes(backward_working_set(m, s, r, 0));
  p.output_phase = total_bytes(output_phase_tensors(m, s));
  p.first_stage = total_bytes(first_stage_tensors(m, s));
  return p;
}

std::vector<ledger_entry> first_stage_tensors(const model_spec& m, const ledger_shape& s) {
  std::vector<ledger_entry> out;
  if (!m.dropout) return out;
  const std::int64_t s_local = s.seq / s.cp, s_sp = s.sp ? s_local / s.tp : s_local;
  out.push_back({"embedding.dropout_mask",
                 std::string("1*s*b*h") + (s.sp ? "/t" : "") + (s.cp > 1 ? "/cp" : ""),
                 {s_sp, s.micro_batch, m.hidden},
                 1,
                 product({s_sp, s.micro_batch, m.hidden}, 1),
                 act_role::saved});
  return out;
}

std::int64_t total_bytes(const std::vector<ledger_entry>& entries) {
  std::int64_t s = 0;
  for (const auto& e : entries) s = detail::checked_add(s, e.bytes, "ledger");
  return s;
}

std::int64_t logits_bytes(const model_spec& m, const ledger_shape& s) {
  std::int64_t tokens = detail::checked_mul(s.seq / s.cp, s.micro_batch, "logits");
  return detail::checked_mul(detail::checked_mul(tokens, (m.vocab + s.tp - 1) / s.tp, "logits"), 4, "logits");
}

}  // namespace headroom
