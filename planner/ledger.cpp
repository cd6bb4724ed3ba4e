// ledger.cpp: the per-layer activation ledger (see ledger.hpp). For a GPT-3 layer (eager attention,
// dropout, GeLU, 4h MLP, tp = 1) the entries sum to s*b*h*(34 + 5*a*s/h) bytes exactly.
#include "ledger.hpp"
#include "op_policy.hpp"

#include <algorithm>
#include <cmath>

#include "errors.hpp"

namespace headroom {

ledger_shape shape_of(const problem& p, const layout& l) {
  ledger_shape s{p.training.seq,       p.training.micro_batch,       l.tp,           l.sp(), l.cp,
                 p.training.attention, p.precision.activation_bytes, p.training.loss};
  s.ep = l.ep;
  s.etp = l.etp;
  s.routing = p.training.routing;
  s.recompute_modules = p.training.recompute_modules;
  s.fp8 = p.precision.fp8_activations;
  s.op_policy = l.recompute == recompute_mode::selective_op;
  return s;
}

std::int64_t detail::entry_bytes(const std::vector<std::int64_t>& shape, std::int64_t dtype) {
  std::int64_t r = dtype;
  for (auto d : shape) r = detail::checked_mul(r, d, "activation ledger");
  return r;
}

namespace {
constexpr std::uint32_t bit(recompute_module m) {
  return module_bit(m);
}
}  // namespace

std::int64_t routed_rows(const model_spec& m, const ledger_shape& s) {
  const std::int64_t t = s.tp, s_local = s.seq / s.cp;
  const std::int64_t tokens = detail::checked_mul(s.sp ? s_local / t : s_local, s.micro_batch, "routed rows");
  const std::int64_t k = m.moe.top_k, E = m.moe.experts, etp = s.expert_tp();
  if (s.routing.pad_to_capacity && s.routing.capacity_factor > 0) {
    // Megatron-Core moe_utils.py get_capacity: ceil(tokens / E * cf) per expert, k routed rows per token.
    const double per_expert = std::ceil(static_cast<double>(tokens) * static_cast<double>(k) /
                                        static_cast<double>(E) * s.routing.capacity_factor);
    if (!(per_expert < 1e15)) throw bad_input("capacity-factor", "routed rows overflow");
    return detail::checked_mul(detail::checked_mul(static_cast<std::int64_t>(per_expert), E, "routed rows"), etp,
                               "routed rows");
  }
  const std::int64_t balanced = detail::checked_mul(detail::checked_mul(k, tokens, "routed rows"), etp, "routed rows");
  const double rows = std::ceil(static_cast<double>(balanced) * s.routing.imbalance);
  if (!(rows < 1e15)) throw bad_input("moe-imbalance", "routed rows overflow");
  return static_cast<std::int64_t>(rows);
}

// Adds a MoE MLP's tensors (docs/model.md 11c) through `add`, the ledger's entry maker.
template <class Add>
void moe_mlp_entries(const model_spec& m, const ledger_shape& s, const std::string& T, const std::string& a16,
                     Add& add) {
  const std::int64_t t = s.tp, act = s.activation_bytes, b = s.micro_batch, h = m.hidden;
  const std::int64_t s_local = s.seq / s.cp, s_sp = s.sp ? s_local / t : s_local;
  const std::uint32_t norm_out = bit(recompute_module::layernorm);
  const std::int64_t lin = s.linear_input_bytes();  // a linear layer's saved input: FP8 or not
  const std::string lin16 = std::to_string(lin);
  // A MoE MLP (docs/model.md, "Routed tokens"; Megatron-Core moe_layer.py, router.py, token_dispatcher.py,
  // experts.py): the norm's output feeds the router, the shared experts and the dispatcher.
  const auto& x = m.moe;
  const std::uint32_t moe = bit(recompute_module::moe), act_mod = bit(recompute_module::moe_act);
  const std::uint32_t shared = bit(recompute_module::shared_experts) | moe;
  const std::int64_t E = x.experts, R = routed_rows(m, s), etp = s.expert_tp();
  const std::int64_t fe = x.expert_ffn / etp, fc1 = m.mlp == mlp_kind::swiglu ? 2 * fe : fe;
  // --no-bias-swiglu-fusion (docs/model.md, "Megatron's unfused paths"): glu() keeps silu(gate) and
  // up + glu_linear_offset beside fc1's output, and the experts' probabilities multiply keeps glu's output.
  const bool unfused_glu = m.mlp == mlp_kind::swiglu && m.runs_unfused(unfused_path::swiglu);
  add("moe.input", a16 + "*s*b*h" + T, {s_sp, b, h}, act, act_role::saved, norm_out);
  add("moe.router.probs", a16 + "*s*b*E" + T, {s_sp, b, E}, act, act_role::saved, moe);
  add("moe.routing_map", "8*s*b*E" + T, {s_sp, b, E}, 8, act_role::saved, moe);
  if (x.shared_ffn > 0) {
    const std::int64_t fs = x.shared_ffn / t, sfc1 = m.mlp == mlp_kind::swiglu ? 2 * fs : fs;
    add("moe.shared.fc1.output", a16 + "*s*b*" + (sfc1 == fs ? "" : "2*") + "Fs/t", {s_local, b, sfc1}, act,
        act_role::saved, shared);
    if (unfused_glu) {  // glu() as in mlp.py l.318-333 (SharedExpertMLP is an MLP)
      add("moe.shared.silu.output", a16 + "*s*b*Fs/t", {s_local, b, fs}, act, act_role::saved,
          shared | act_mod);
      add("moe.shared.up.offset", a16 + "*s*b*Fs/t", {s_local, b, fs}, act, act_role::saved,
          shared | act_mod);
    }
    add("moe.shared.act.output", lin16 + "*s*b*Fs/t", {s_local, b, fs}, lin, act_role::saved, shared | act_mod);
  }
  // R routed rows (routed_rows): the experts' input after dispatch, fc1's output (2F wide for SwiGLU), the
  // activation's output, and fc2's output after the expert-tp reduce-scatter, which the unpermute keeps
  // (index_add_ under deterministic algorithms, moe_utils.py l.604-617; docs/validation.md).
  add("moe.experts.fc1.input", lin16 + "*R*h", {R, h}, lin, act_role::saved, moe);
  add("moe.experts.fc1.output", a16 + "*R*" + (fc1 == fe ? "" : "2*") + "F/etp", {R, fc1}, act, act_role::saved,
      moe);
  // The experts weight each row by its routing probability after the activation, act(fc1) * probs, and that
  // multiply keeps its activation operand for the probabilities' gradient (Megatron-Core @ d98e8a64
  // experts.py l.1012-1016 TEGroupedMLP, mlp.py l.336-340 SequentialMLP's experts). SwiGLU runs the fused
  // weighted_bias_swiglu_impl (Megatron's default), which keeps only fc1's output and the probabilities;
  // unfused, glu() then the multiply (experts.py l.996-1014).
  if (unfused_glu) {
    add("moe.experts.silu.output", a16 + "*R*F/etp", {R, fe}, act, act_role::saved, moe | act_mod);
    add("moe.experts.up.offset", a16 + "*R*F/etp", {R, fe}, act, act_role::saved, moe | act_mod);
  }
  if (m.mlp != mlp_kind::swiglu || unfused_glu)
    add("moe.experts.act.weighted", a16 + "*R*F/etp", {R, fe}, act, act_role::saved, moe | act_mod);
  add("moe.experts.act.output", lin16 + "*R*F/etp", {R, fe}, lin, act_role::saved, moe | act_mod);
  add("moe.unpermute.input", a16 + "*R*h/etp", {R / etp, h}, act, act_role::saved, moe);
}

std::int64_t kv_heads_on_rank(const model_spec& m, std::int64_t tp) {
  return m.kv_heads >= tp ? m.kv_heads / tp : 1;
}

// Adds, through `add`, the per-head q and k norms' tensors (docs/model.md, "Query and key norms"; Qwen3's
// q_norm / k_norm over head_dim, transformers modeling_qwen3_moe.py; Megatron --qk-layernorm, TENorm over
// head_dim, megatron/core/transformer/attention.py): each keeps its input, the projection's output, and
// fp32 statistics per token and head (rstd; LayerNorm also the mean), as ln1.stats does per token.
template <class Add>
void qk_norm_entries(const model_spec& m, const ledger_shape& s, Add& add) {
  const std::int64_t t = s.tp, act = s.activation_bytes, b = s.micro_batch, s_local = s.seq / s.cp;
  const std::int64_t heads = m.heads / t, kv = kv_heads_on_rank(m, t);
  const std::int64_t stats = m.norm == norm_kind::layernorm ? 2 : 1;
  const std::string a16 = std::to_string(act), st = std::to_string(4 * stats);
  add("attn.q_norm.input", a16 + "*s*b*a*d/t", {s_local, b, heads * m.head_dim}, act, act_role::saved);
  add("attn.q_norm.stats", st + "*s*b*a/t", {s_local, b, heads * stats}, 4, act_role::saved);
  add("attn.k_norm.input", a16 + "*s*b*kv*d/t", {s_local, b, kv * m.head_dim}, act, act_role::saved);
  add("attn.k_norm.stats", st + "*s*b*kv/t", {s_local, b, kv * stats}, 4, act_role::saved);
}

// Adds, through `add`, what --no-rope-fusion's unfused RoPE keeps (docs/model.md, "Megatron's unfused paths";
// rope_utils.py l.142-147): t * cos_ and rotate_half(t) * sin_ keep cos_ and sin_, s x the rotary dim `rot` in
// q's dtype, for q and for k; the fused kernel keeps only the freqs every layer shares.
template <class Add>
void rope_entries(const model_spec& m, const ledger_shape& s, std::int64_t rot, const char* f,
                  std::uint32_t modules, Add& add) {
  if (!m.runs_unfused(unfused_path::rope) || m.position != position_kind::rotary) return;
  add("attn.rope.cos_sin", std::to_string(s.activation_bytes) + "*4*s*" + f, {4, s.seq / s.cp, rot},
      s.activation_bytes, act_role::saved, modules);
}

// Adds, through `add`, the attention core's tensors. Eager: the probabilities (Megatron's softmax in PyTorch,
// docs/model.md, "Megatron's unfused paths", fused_softmax.py l.300-335: in fp32 it keeps fp32 probabilities,
// and the context bmm their bf16 copy where no dropout follows; it makes its causal mask, s x s bytes, when the
// batch brings none, which masked_fill_ keeps), and dropout's mask and output. A fused kernel (flash, or flex's
// compiled flex_attention) keeps no s x s tensor, only the fp32 log-sum-exp of each row.
template <class Add>
void core_entries(const model_spec& m, const ledger_shape& s, Add& add) {
  const std::int64_t act = s.activation_bytes, b = s.micro_batch, heads = m.heads / s.tp,
                     s_local = s.seq / s.cp;
  const std::string a16 = std::to_string(act);
  if (s.attention != attention_kind::eager) {
    add("attn.flash.logsumexp", "4*a*s*b/t", {b, heads, s_local}, 4, act_role::attention_core);
    return;
  }
  const bool fp32 = m.runs_unfused(unfused_path::softmax_fp32);
  const std::int64_t sm = fp32 ? 4 : act;
  add("attn.softmax.output", std::to_string(sm) + "*a*s^2*b/t", {b, heads, s_local, s.seq}, sm,
      act_role::attention_core);
  if (fp32 && !m.dropout)
    add("attn.softmax.probs", a16 + "*a*s^2*b/t", {b, heads, s_local, s.seq}, act, act_role::attention_core);
  if (m.runs_unfused(unfused_path::softmax_mask))
    add("attn.softmax.causal_mask", "1*s^2", {s_local, s.seq}, 1, act_role::attention_core);
  if (!m.dropout) return;
  add("attn.softmax.dropout_mask", "1*a*s^2*b/t", {b, heads, s_local, s.seq}, 1, act_role::attention_core);
  add("attn.softmax.dropout_output", a16 + "*a*s^2*b/t", {b, heads, s_local, s.seq}, act,
      act_role::attention_core);
}

// Marks or adds, through `add`, what torchtitan's per-op policy keeps of a layer (docs/model.md, "torchtitan's
// per-op policy"): its save list holds aten.mm, the SDPA kernels, the reduce-scatter, max and (DeepSeek-V3,
// Llama 4) the all-to-all and the flex HOPs, and of the matmuls it keeps every other one, counting from the
// block's first (pytorch/torchtitan@99fee810b torchtitan/distributed/activation_checkpoint.py l.92-116, where
// the count restarts with each block's forward; the same rule at 238fa995 l.98-122, a fresh counter per
// checkpoint call l.126-128, and at 9dec370 torchtitan/parallelisms/parallelize_llama.py l.214-264). The
// checkpoint keeps the block's input. A kept output that is a ledger tensor already (SwiGLU's gate or up, the
// GeLU input, the q norm's input, SDPA's log-sum-exp, flex's q and k) is marked op_saved; the others are added
// as op_output entries. A MoE layer (torchtitan models/moe.py l.392-468 @99fee810b, l.490, 524, 529 @238fa995)
// runs the router's gate, the dispatch all-to-all, the routed experts (torch._grouped_mm: not on the list,
// recomputed), the combine all-to-all, then the shared experts' w1, w3, w2, and under tensor parallelism
// reduce-scatters its output. The gate's matmul is forced to recompute and left out of the count
// (per_op_sac_force_recompute_mm_shapes_by_fqns, default ["moe.router.gate"]: config/job_config.py l.542-544
// @99fee810b, l.661-663 @238fa995; activation_checkpoint.py l.104-106 @99fee810b, l.110-113 @238fa995).
// Multi-latent attention (DeepSeek-V2/V3, torchtitan models/deepseek_v3/model/model.py @238fa995 Attention.forward
// l.250-323) runs wq (q_lora_rank = 0, l.273) or wq_a then wq_b (l.275-276), wkv_a (l.288), wkv_b (l.295-297),
// the core (l.309-316) and wo (l.323): 4 or 5 counted matmuls, so with q_lora_rank > 0 the MLP's parity flips
// (w3 kept, w1 and w2 recomputed). Under flex attention (attention_kind::flex) the compiled region runs as the
// inductor_compiled_code HOP, on the 238fa995 save list (models/deepseek_v3/infra/parallelize.py l.33-48;
// models/attention.py l.115-124 compiles flex_attention with wrap_inductor_compiled_regions), which caches
// every output of the compiled forward: out, the log-sum-exp and the saved inputs q, k, v. q and k are new
// tensors (rope, cat); v is a view of the matmul output holding v (wv's, wkv_b's), free when that matmul is
// kept, else kept whole through it.
template <class Add>
void op_policy_entries(const model_spec& m, const ledger_shape& s, bool moe_layer,
                       std::vector<ledger_entry>& out, Add& add) {
  const std::int64_t t = s.tp, act = s.activation_bytes, b = s.micro_batch, h = m.hidden;
  const std::int64_t s_local = s.seq / s.cp, s_sp = s.sp ? s_local / t : s_local;
  const std::string a16 = std::to_string(act), T = s.sp ? "/t" : "";
  const bool flex = s.attention == attention_kind::flex;
  auto mark = [&](const char* name) {
    for (auto& e : out)
      if (e.name == name) e.op_saved = true;
  };
  mark("ln1.input");
  const op_block blk = op_policy_matmuls(m, s, moe_layer);
  const auto& mms = blk.mms;
  const std::size_t attention_mms = blk.attention_mms, wo = attention_mms - 1;  // the core runs before wo
  // The all-to-alls of expert parallelism (expert_parallel.py l.123-128, 151-156), between the attention and
  // the shared experts: dispatch brings this rank the R rows its experts process, combine returns the k rows
  // of each of its own tokens (k * s/t * b * etp: split over tp when etp = 1, every token when etp = tp).
  auto all_to_alls = [&] {
    // Kept for every model: DeepSeek-V3's and Llama 4's save lists hold all_to_all_single
    // (pytorch/torchtitan@99fee810b torchtitan/models/deepseek_v3/infra/parallelize.py l.33-44,
    // torchtitan/experiments/llama4/infra/parallelize.py l.37-48); Qwen3's experiment does not
    // (experiments/qwen3/infra/parallelize.py l.36-46), where this over-counts by these two outputs. Which
    // list ran is a property of the torchtitan code, not of the model's shape, so it is not guessed.
    if (s.ep == 1) return;
    const std::int64_t own =
        detail::checked_mul(detail::checked_mul(m.moe.top_k, s_sp, "routed rows"),
                            detail::checked_mul(b, s.expert_tp(), "routed rows"), "routed rows");
    add("moe.dispatch.all_to_all.output", a16 + "*R*h", {routed_rows(m, s), h}, act, act_role::op_output);
    add("moe.combine.all_to_all.output", a16 + "*k*s*b*etp*h" + T, {own, h}, act, act_role::op_output);
  };
  auto kept = [](std::size_t i) { return i % 2 == 0; };  // the 1st, 3rd, ... matmul kept, the 2nd, 4th, ... not
  for (std::size_t i = 0; i < mms.size(); ++i) {
    const auto& x = mms[i];
    if (i == wo) {
      // The core runs before wo. SDPA (flash, memory-efficient, cuDNN: on the list) keeps its output and its
      // fp32 log-sum-exp; the compiled flex region the same, and its inputs q, k (the ledger's attn.q, attn.k)
      // and v, a view of mms[v_base]'s output: kept here when that matmul is not.
      add(flex ? "attn.flex.output" : "attn.sdpa.output", a16 + blk.core_formula, {s_local, b, blk.core_width}, act,
          act_role::op_output);
      if (s.attention == attention_kind::flash || flex) mark("attn.flash.logsumexp");
      if (flex) {
        mark("attn.q");
        mark("attn.k");
        const auto& v = mms[blk.v_base];
        if (!kept(blk.v_base)) add(v.name, a16 + v.formula, {s_local, b, v.width}, act, act_role::op_output);
      }
    }
    if (i == attention_mms && moe_layer) all_to_alls();
    if (kept(i) && x.ledger_name) mark(x.ledger_name);
    if (kept(i) && !x.ledger_name)
      add(x.name, a16 + x.formula, {s_local, b, x.width}, act, act_role::op_output);
    // The row-parallel outputs' reduce-scatter under sequence parallelism (torchtitan's TP plan: wo and w2
    // are RowwiseParallel with a sequence-sharded output; the shared experts' w2 leaves a partial sum).
    if ((i == wo || (!moe_layer && i + 1 == mms.size())) && s.sp)
      add(std::string(x.name) + ".reduce_scatter", a16 + "*s*b*h" + T, {s_sp, b, h}, act,
          act_role::op_output);
  }
  if (!moe_layer) return;
  if (mms.size() == attention_mms) all_to_alls();
  // The MoE output's reduce-scatter (PrepareModuleInputOutput: Partial to Shard(1), l.451-457).
  if (s.sp) add("moe.output.reduce_scatter", a16 + "*s*b*h" + T, {s_sp, b, h}, act, act_role::op_output);
}

std::vector<ledger_entry> layer_ledger(const model_spec& m, const ledger_shape& s, bool moe_layer) {
  if (moe_layer && !m.moe.enabled()) throw bad_input("model", "a MoE layer asked of a dense model");
  const std::int64_t t = s.tp, act = s.activation_bytes, b = s.micro_batch;
  const std::int64_t s_local = s.seq / s.cp;               // tokens of this cp rank
  const std::int64_t s_sp = s.sp ? s_local / t : s_local;  // rows outside the tp-split regions
  const std::int64_t heads = m.heads / t;
  const std::int64_t kv = kv_heads_on_rank(m, t);
  const std::int64_t q_width = heads * m.head_dim, kv_width = kv * m.head_dim;
  const std::int64_t f = m.ffn_hidden / t, h = m.hidden;
  // "/t" in a formula: split by tensor parallelism; "/T": split only with sequence parallelism.
  const std::string cpdiv = s.cp > 1 ? "/cp" : "";
  std::vector<ledger_entry> out;
  auto add = [&](std::string name, std::string formula, std::vector<std::int64_t> shape, std::int64_t dtype,
                 act_role role, std::uint32_t modules = 0) {
    ledger_entry e{std::move(name), std::move(formula) + cpdiv, std::move(shape), dtype, 0, role, modules};
    e.bytes = detail::entry_bytes(e.shape, dtype);
    out.push_back(std::move(e));
  };
  const std::string T = s.sp ? "/t" : "";
  const std::string a16 = std::to_string(act);
  const std::uint32_t norm_out = bit(recompute_module::layernorm);
  const std::int64_t lin = s.linear_input_bytes();  // a linear layer's saved input: FP8 or not
  const std::string lin16 = std::to_string(lin);
  add("ln1.input", a16 + "*s*b*h" + T, {s_sp, b, h}, act, act_role::layer_input);
  // Each norm keeps fp32 statistics per token for backward: LayerNorm mean and rstd, RMSNorm rstd
  // (Apex's FusedLayerNorm and Transformer Engine save them; Korthikanti et al. leave them out).
  const std::int64_t stats = m.norm == norm_kind::layernorm ? 2 : 1;
  const std::string stats_formula = std::to_string(4 * stats) + "*s*b" + T;
  add("ln1.stats", stats_formula, {s_sp, b, stats}, 4, act_role::saved);
  add("attn.qkv.input", lin16 + "*s*b*h" + T, {s_sp, b, h}, lin, act_role::saved, norm_out);
  std::int64_t proj_width = q_width;
  if (m.mla.enabled()) {
    // Multi-latent attention (docs/model.md, "Multi-latent attention"): the latent projections' outputs and
    // their norms' outputs on the sequence-parallel rows, q, k, v after the up projections (recomputed by
    // mla_up_proj) split by heads, and the attention core's output.
    const auto& x = m.mla;
    const std::int64_t qk = x.qk_nope_head_dim + x.qk_rope_head_dim;
    if (x.q_lora_rank > 0) {
      add("attn.q_down.output", a16 + "*s*b*q_lora" + T, {s_sp, b, x.q_lora_rank}, act, act_role::saved);
      add("attn.q_norm.output", lin16 + "*s*b*q_lora" + T, {s_sp, b, x.q_lora_rank}, lin, act_role::saved,
          norm_out);
    }
    add("attn.kv_down.output", a16 + "*s*b*(kv_lora+rope)" + T, {s_sp, b, x.kv_lora_rank + x.qk_rope_head_dim},
        act, act_role::saved);
    add("attn.kv_norm.output", lin16 + "*s*b*kv_lora" + T, {s_sp, b, x.kv_lora_rank}, lin, act_role::saved, norm_out);
    const std::uint32_t up = bit(recompute_module::mla_up_proj);
    add("attn.q", a16 + "*s*b*a*(nope+rope)/t", {s_local, b, heads * qk}, act, act_role::saved, up);
    add("attn.k", a16 + "*s*b*a*(nope+rope)/t", {s_local, b, heads * qk}, act, act_role::saved, up);
    add("attn.v", a16 + "*s*b*a*v/t", {s_local, b, heads * x.v_head_dim}, act, act_role::saved, up);
    rope_entries(m, s, x.qk_rope_head_dim, "rope", up, add);  // inside mla_up_proj's checkpoint
    proj_width = heads * x.v_head_dim;
  } else {
    if (m.qk_norm) qk_norm_entries(m, s, add);
    add("attn.q", a16 + "*s*b*a*d/t", {s_local, b, q_width}, act, act_role::saved);
    add("attn.k", a16 + "*s*b*kv*d/t", {s_local, b, kv_width}, act, act_role::saved);
    rope_entries(m, s, m.head_dim, "d", 0, add);
  }
  core_entries(m, s, add);
  if (!m.mla.enabled()) add("attn.v", a16 + "*s*b*kv*d/t", {s_local, b, kv_width}, act, act_role::saved);
  add("attn.proj.input", lin16 + (m.mla.enabled() ? "*s*b*a*v/t" : "*s*b*a*d/t"), {s_local, b, proj_width}, lin,
      act_role::saved);
  if (m.dropout) add("attn.dropout_mask", "1*s*b*h" + T, {s_sp, b, h}, 1, act_role::saved);
  // Parallel residual (GPT-NeoX, Falcon): the MLP's norm reads the layer input, which is already kept;
  // with a single norm (Falcon-7B) the MLP also shares the attention's normalised input.
  if (!m.parallel_residual) add("ln2.input", a16 + "*s*b*h" + T, {s_sp, b, h}, act, act_role::saved);
  if (m.norms_per_layer == 2) add("ln2.stats", stats_formula, {s_sp, b, stats}, 4, act_role::saved);
  if (moe_layer) {
    moe_mlp_entries(m, s, T, a16, add);
    if (m.dropout) add("mlp.dropout_mask", "1*s*b*h" + T, {s_sp, b, h}, 1, act_role::saved);
    if (s.op_policy) op_policy_entries(m, s, true, out, add);
    return out;
  }
  const std::uint32_t mlp = bit(recompute_module::mlp);
  if (m.norms_per_layer == 2)
    add("mlp.fc1.input", lin16 + "*s*b*h" + T, {s_sp, b, h}, lin, act_role::saved, norm_out);
  if (m.mlp == mlp_kind::gelu) {
    add("mlp.gelu.input", a16 + "*s*b*f/t", {s_local, b, f}, act, act_role::saved, mlp);
  } else {
    // Megatron's fused SwiGLU keeps gate and up and recomputes SiLU in backward.
    add("mlp.gate", a16 + "*s*b*f/t", {s_local, b, f}, act, act_role::saved, mlp);
    add("mlp.up", a16 + "*s*b*f/t", {s_local, b, f}, act, act_role::saved, mlp);
    if (m.runs_unfused(unfused_path::swiglu)) {
      // --no-bias-swiglu-fusion: glu() (mlp.py l.318-333) keeps silu(gate) and up + glu_linear_offset, the
      // operands of their product, beside fc1's output (which silu keeps through the gate's view).
      add("mlp.silu.output", a16 + "*s*b*f/t", {s_local, b, f}, act, act_role::saved, mlp);
      add("mlp.up.offset", a16 + "*s*b*f/t", {s_local, b, f}, act, act_role::saved, mlp);
    }
  }
  add("mlp.fc2.input", lin16 + "*s*b*f/t", {s_local, b, f}, lin, act_role::saved, mlp);
  if (m.dropout) add("mlp.dropout_mask", "1*s*b*h" + T, {s_sp, b, h}, 1, act_role::saved);
  if (s.op_policy) op_policy_entries(m, s, false, out, add);
  return out;
}

activation_sums sum_ledger(const std::vector<ledger_entry>& ledger, std::uint32_t modules) {
  activation_sums s;
  for (const auto& e : ledger) {
    if (kept_for_backward(e, recompute_mode::none, modules))
      s.none = detail::checked_add(s.none, e.bytes, "activation ledger");
    if (kept_for_backward(e, recompute_mode::selective, modules)) s.selective += e.bytes;
    if (kept_for_backward(e, recompute_mode::full, modules)) s.full += e.bytes;
    if (kept_for_backward(e, recompute_mode::selective_op, modules)) s.op += e.bytes;
  }
  return s;
}

namespace {

// Returns whether the layer's ledger entry `e` is recomputed during its backward under `r` (op outputs never
// are): the backward working set holds it again.
bool recomputed_in_backward(const ledger_entry& e, recompute_mode r, std::uint32_t modules) {
  return e.role != act_role::op_output && !kept_for_backward(e, r, modules);
}

// Appends to `out` what one layer's backward holds besides its recomputed tensors, whatever the recompute
// mode: the gradients flowing through it, the dispatcher's buffers, eager attention's probabilities' gradient
// and, ZeRO >= 2, the unsharded parameter gradients.
void backward_gradients(const model_spec& m, const ledger_shape& s, std::int64_t unsharded_grad_bytes,
                        bool moe_layer, std::vector<ledger_entry>& out) {
  const std::int64_t t = s.tp, act = s.activation_bytes, b = s.micro_batch;
  const std::int64_t s_local = s.seq / s.cp, s_sp = s.sp ? s_local / t : s_local;
  const std::string T = s.sp ? "/t" : "", a16 = std::to_string(act), cpdiv = s.cp > 1 ? "/cp" : "";
  auto add = [&](std::string name, std::string formula, std::vector<std::int64_t> shape, std::int64_t dtype) {
    ledger_entry e{std::move(name), std::move(formula) + cpdiv, std::move(shape), dtype, 0, act_role::saved};
    e.bytes = detail::entry_bytes(e.shape, dtype);
    out.push_back(std::move(e));
  };
  add("grad.layer_output", a16 + "*s*b*h" + T, {s_sp, b, m.hidden}, act);
  add("grad.layer_input", a16 + "*s*b*h" + T, {s_sp, b, m.hidden}, act);
  if (moe_layer) {
    // The routed rows' widest gradient (fc1's output), and the dispatcher's buffers during the backward
    // all-to-all (receive and sort, R x h each) or the all-gather's s*b*ep*h (token_dispatcher.py: the
    // [S/TP*B, H] rows gathered over TP x EP, held in the global memory buffer).
    const std::int64_t R = routed_rows(m, s), etp = s.expert_tp();
    const std::int64_t fe = m.moe.expert_ffn / etp, fc1 = m.mlp == mlp_kind::swiglu ? 2 * fe : fe;
    add("grad.moe.experts.fc1.output", a16 + "*R*F/etp", {R, fc1}, act);
    if (s.routing.dispatcher == dispatcher_kind::alltoall) {
      add("moe.dispatch.receive", a16 + "*R*h", {R, m.hidden}, act);
      add("moe.dispatch.sort", a16 + "*R*h", {R, m.hidden}, act);
    } else {
      add("moe.dispatch.allgather", a16 + "*s*b*ep*h", {s_local, b, static_cast<std::int64_t>(s.ep), m.hidden}, act);
    }
  } else {
    add("grad.mlp.hidden", a16 + "*s*b*f/t", {s_local, b, m.ffn_hidden / t}, act);
  }
  if (s.attention == attention_kind::eager)
    add("grad.attn.probs", a16 + "*a*s^2*b/t", {b, m.heads / t, s_local, s.seq}, act);
  if (unsharded_grad_bytes > 0) {
    ledger_entry e{"grad.params.unsharded", "layer params/t * grad bytes",
                   {unsharded_grad_bytes},  1,
                   unsharded_grad_bytes,    act_role::saved};
    out.push_back(std::move(e));
  }
}

}  // namespace

std::vector<ledger_entry> backward_working_set(const model_spec& m, const ledger_shape& s, recompute_mode r,
                                               std::int64_t unsharded_grad_bytes, bool moe_layer) {
  std::vector<ledger_entry> out;
  for (const auto& e : layer_ledger(m, s, moe_layer)) {
    if (recomputed_in_backward(e, r, s.recompute_modules)) {
      out.push_back(e);
      out.back().name = "recomputed." + e.name;
    }
  }
  backward_gradients(m, s, unsharded_grad_bytes, moe_layer, out);
  return out;
}

peak_sums sum_peaks(const model_spec& m, const ledger_shape& s) {
  peak_sums p;
  // Each layer kind's ledger and backward gradients once, for every mode's working set
  // (backward_working_set's bytes, without copying its entries; the MoE layer's sums below).
  const std::vector<ledger_entry> dense = layer_ledger(m, s);
  const std::vector<ledger_entry> moe =
      m.moe.enabled() ? layer_ledger(m, s, true) : std::vector<ledger_entry>{};
  std::vector<ledger_entry> dense_grads, moe_grads;
  backward_gradients(m, s, 0, false, dense_grads);
  if (m.moe.enabled()) backward_gradients(m, s, 0, true, moe_grads);
  auto working_set = [&](const std::vector<ledger_entry>& layer, const std::vector<ledger_entry>& grads,
                         recompute_mode r) {
    std::int64_t bytes = total_bytes(grads);
    for (const auto& e : layer)
      if (recomputed_in_backward(e, r, s.recompute_modules))
        bytes = detail::checked_add(bytes, e.bytes, "ledger");
    return bytes;
  };
  for (auto r :
       {recompute_mode::none, recompute_mode::selective, recompute_mode::full, recompute_mode::selective_op}) {
    p.working_set[static_cast<std::size_t>(r)] = working_set(dense, dense_grads, r);
    if (m.moe.enabled()) p.moe_working_set[static_cast<std::size_t>(r)] = working_set(moe, moe_grads, r);
  }
  // full_every_N: the largest layer working set is a recomputed layer's (the stage's first N - 1 layers are
  // not recomputed; estimate() asks for none's where a stage has fewer than N layers).
  const auto full = static_cast<std::size_t>(recompute_mode::full);
  for (int n = 2; n <= max_full_every; ++n) {
    const auto i = static_cast<std::size_t>(full_every_mode(n));
    p.working_set[i] = p.working_set[full];
    p.moe_working_set[i] = p.moe_working_set[full];
  }
  if (m.moe.enabled()) p.moe_layer = sum_ledger(moe, s.recompute_modules);
  p.output_phase = output_phase_peak(output_phase_tensors(m, s));
  p.first_stage = total_bytes(first_stage_tensors(m, s));
  p.mtp_module = sum_ledger(mtp_module_tensors(m, s), s.recompute_modules);
  return p;
}

std::vector<ledger_entry> mtp_module_tensors(const model_spec& m, const ledger_shape& s) {
  std::vector<ledger_entry> out;
  if (m.moe.mtp_layers <= 0) return out;
  const std::int64_t s_local = s.seq / s.cp, rows = s.sp ? s_local / s.tp : s_local;
  const std::string tdiv = std::string(s.sp ? "/t" : "") + (s.cp > 1 ? "/cp" : "");
  auto add = [&](const char* name, std::int64_t width, std::int64_t dtype, act_role role) {
    ledger_entry e{name,
                   std::to_string(dtype) + "*s*b" +
                       (width == 1          ? ""
                        : width == m.hidden ? "*h"
                                            : "*2h") +
                       tdiv,
                   width == 1 ? std::vector<std::int64_t>{rows, s.micro_batch}
                              : std::vector<std::int64_t>{rows, s.micro_batch, width},
                   dtype,
                   detail::entry_bytes({rows, s.micro_batch, width}, dtype),
                   role};
    e.op_saved = true;  // no per-op policy runs an MTP module: kept
    out.push_back(std::move(e));
  };
  const std::int64_t a = s.activation_bytes, h = m.hidden;
  add("mtp.enorm.input", h, a, act_role::layer_input);
  add("mtp.hnorm.input", h, a, act_role::layer_input);
  add("mtp.norm.stats", 1, 4 * 3, act_role::saved);  // enorm, hnorm, final norm: one fp32 value per row each
  add("mtp.eh_proj.input", 2 * h, a, act_role::saved);
  add("mtp.final_norm.input", h, a, act_role::saved);
  add("mtp.output.input", h, a, act_role::layer_input);
  return out;
}

std::vector<ledger_entry> first_stage_tensors(const model_spec& m, const ledger_shape& s) {
  std::vector<ledger_entry> out;
  if (!m.dropout) return out;
  const std::int64_t s_local = s.seq / s.cp, s_sp = s.sp ? s_local / s.tp : s_local;
  out.push_back({"embedding.dropout_mask",
                 std::string("1*s*b*h") + (s.sp ? "/t" : "") + (s.cp > 1 ? "/cp" : ""),
                 {s_sp, s.micro_batch, m.hidden},
                 1,
                 detail::entry_bytes({s_sp, s.micro_batch, m.hidden}, 1),
                 act_role::saved});
  return out;
}

std::int64_t total_bytes(const std::vector<ledger_entry>& entries) {
  std::int64_t s = 0;
  for (const auto& e : entries) s = detail::checked_add(s, e.bytes, "ledger");
  return s;
}
}  // namespace headroom
