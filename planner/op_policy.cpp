// op_policy.cpp: the per-op policy's counted matmuls of a block (op_policy.hpp), with torchtitan's tensor-parallel
// placement of each output.
#include "op_policy.hpp"

namespace headroom {

op_block op_policy_matmuls(const model_spec& m, const ledger_shape& s, bool moe_layer) {
  const std::int64_t t = s.tp, h = m.hidden;
  const std::int64_t heads = m.heads / t, q_width = heads * m.head_dim;
  const std::int64_t kv_width = kv_heads_on_rank(m, t) * m.head_dim, f = m.ffn_hidden / t;
  op_block b;
  auto& mms = b.mms;
  b.core_width = q_width;
  if (!m.mla.enabled()) {
    mms = {{"attn.wq.output", "*s*b*a*d/t", q_width, m.qk_norm ? "attn.q_norm.input" : nullptr, h},
           {"attn.wk.output", "*s*b*kv*d/t", kv_width, m.qk_norm ? "attn.k_norm.input" : nullptr, h},
           {"attn.wv.output", "*s*b*kv*d/t", kv_width, nullptr, h},
           {"attn.wo.output", "*s*b*h", h, nullptr, q_width}};
  } else {
    // torchtitan's DeepSeek-V3 TP plan (models/deepseek_v3/infra/parallelize.py @238fa995): the attention's
    // input all-gathered to Replicate (l.259-267); wq (l.284-286), wq_b (l.293) and wkv_b (l.272) column-
    // parallel (/t); wq_a (l.292) and wkv_a (l.271) NoParallel, every token of the rank on every tp rank; wo
    // row-parallel to Shard(1) (l.276), a partial sum over every token before its reduce-scatter. None of
    // these outputs is one of the ledger's MLA tensors (Megatron's latents are sequence-parallel rows).
    const auto& x = m.mla;
    const std::int64_t qk = heads * (x.qk_nope_head_dim + x.qk_rope_head_dim);
    const op_matmul wkv_a{"attn.wkv_a.output", "*s*b*(kv_lora+rope)", x.kv_lora_rank + x.qk_rope_head_dim,
                          nullptr, h};
    const op_matmul wkv_b{"attn.wkv_b.output", "*s*b*a*(nope+v)/t", heads * (x.qk_nope_head_dim + x.v_head_dim),
                          nullptr, x.kv_lora_rank};
    const op_matmul out_proj{"attn.wo.output", "*s*b*h", h, nullptr, heads * x.v_head_dim};
    if (x.q_lora_rank == 0)
      mms = {{"attn.wq.output", "*s*b*a*(nope+rope)/t", qk, nullptr, h}, wkv_a, wkv_b, out_proj};
    else
      mms = {{"attn.wq_a.output", "*s*b*q_lora", x.q_lora_rank, nullptr, h},
             {"attn.wq_b.output", "*s*b*a*(nope+rope)/t", qk, nullptr, x.q_lora_rank},
             wkv_a,
             wkv_b,
             out_proj};
    b.v_base = mms.size() - 2;
    b.core_formula = "*s*b*a*v/t";
    b.core_width = heads * x.v_head_dim;
  }
  b.attention_mms = mms.size();
  const std::int64_t fs = m.moe.shared_ffn / t;
  if (moe_layer && fs > 0)
    mms.insert(mms.end(), {{"moe.shared.w1.output", "*s*b*Fs/t", fs, nullptr, h},
                           {"moe.shared.w3.output", "*s*b*Fs/t", fs, nullptr, h},
                           {"moe.shared.w2.output", "*s*b*h", h, nullptr, fs}});
  else if (!moe_layer && m.mlp == mlp_kind::swiglu)
    mms.insert(mms.end(), {{"mlp.w1.output", "", f, "mlp.gate", h},
                           {"mlp.w3.output", "", f, "mlp.up", h},
                           {"mlp.w2.output", "*s*b*h", h, nullptr, f}});
  else if (!moe_layer)
    mms.insert(mms.end(),
               {{"mlp.fc1.output", "", f, "mlp.gelu.input", h}, {"mlp.fc2.output", "*s*b*h", h, nullptr, f}});
  return b;
}

}  // namespace headroom
