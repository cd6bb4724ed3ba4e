// cost_model.cpp: the ranking terms of --suggest (see cost_model.hpp).
#include "cost_model.hpp"

#include <algorithm>

namespace headroom {

// Returns torchtitan's per-op policy's repeated forward FLOPs as a fraction of a layer's forward and backward
// FLOPs: every second matmul of a block is recomputed (torchtitan parallelize_llama.py at 9dec370,
// l.214-264; docs/model.md), which in a Llama block is wk, wo and the MLP's second matmul (w3 when gated,
// w2 when not), per token 2(h·kv + q·h + h·f) FLOPs, against a forward of 2 per parameter plus the
// attention core's 4·s·q at sequence `seq`. A MoE layer (torchtitan models/moe.py at 99fee810b, ledger.cpp
// op_policy_entries) repeats wk, wo, the router's gate (forced to recompute), the routed experts' grouped
// matmuls (on no save list: all three for each of its top_k experts) and the shared experts' w3; its forward
// counts the top_k experts a token runs, not all of them. The model's fraction weighs each kind by its
// layers.
static double op_policy_recompute(const model_spec& m, std::int64_t seq) {
  const double h = static_cast<double>(m.hidden), f = static_cast<double>(m.ffn_hidden);
  const double q = static_cast<double>(m.heads * m.head_dim), kv = static_cast<double>(m.kv_heads * m.head_dim);
  const double s = static_cast<double>(seq), mats = m.mlp == mlp_kind::swiglu ? 3 : 2;
  const double attention = 2 * (2 * h * q + 2 * h * kv) + 4 * s * q, attention_again = 2 * (h * kv + q * h);
  double recomputed = attention_again + 2 * h * f, forward = attention + 2 * mats * h * f;
  if (m.moe.enabled()) {
    const double k = static_cast<double>(m.moe.top_k), fe = static_cast<double>(m.moe.expert_ffn);
    const double fs = static_cast<double>(m.moe.shared_ffn), gate = static_cast<double>(m.moe.experts) * h;
    const double moe_again = attention_again + 2 * (gate + k * mats * h * fe + (fs > 0 ? h * fs : 0));
    const double moe_forward = attention + 2 * (gate + k * mats * h * fe + mats * h * fs);
    double n_moe = 0;
    for (const bool is_moe : m.moe.layers) n_moe += is_moe ? 1 : 0;
    const double n_dense = static_cast<double>(m.layers) - n_moe;
    recomputed = n_dense * recomputed + n_moe * moe_again;
    forward = n_dense * forward + n_moe * moe_forward;
  }
  return forward > 0 ? recomputed / (3 * forward) : 0;
}

layout_cost cost_of(const problem& p, const param_counts& pc, const layout& l, const cost_model& c) {
  layout_cost r;
  const double s = static_cast<double>(p.training.seq), h = static_cast<double>(p.model.hidden);
  const double L = static_cast<double>(p.model.layers), V = static_cast<double>(p.model.vocab);
  const double attn = s / (6 * h);
  // Korthikanti et al. (arXiv 2205.05198), model FLOPs 72BLsh^2(1 + s/6h + V/16Lh): full recomputation
  // repeats the forward (+1/3); selective repeats the attention core (GPT-3 175B: 2.7%).
  if (l.recompute == recompute_mode::full)
    r.recompute = 1.0 / 3.0;
  else if (l.recompute == recompute_mode::selective)
    r.recompute = attn / (1 + attn + V / (16 * L * h));
  else if (const int n = full_every(l.recompute))
    r.recompute = 1.0 / (3.0 * n);  // torchtitan's layer policy: one layer in n repeats its forward
  else if (l.recompute == recompute_mode::selective_op)
    r.recompute = op_policy_recompute(p.model, p.training.seq);

  const double M = static_cast<double>(microbatches_per_step(p, l));
  r.bubble = (l.pp - 1) / (M * l.vpp);

  const double tokens = M * static_cast<double>(p.training.micro_batch) * l.dp() * s;
  // A MoE token runs its top_k experts, not all of them: the parameters a token touches (param_counts.active).
  const double touched = p.model.moe.enabled() && pc.active > 0 ? static_cast<double>(pc.active)
                                                                 : static_cast<double>(pc.total);
  const double flops_per_gpu = 6.0 * touched * tokens * (1 + attn) / l.gpus;
  const double compute_s = flops_per_gpu * (1 + r.recompute) / (c.tflops * 1e12 * c.mfu);

  if (l.tp > 1) {
    // Per layer and micro-batch: 2 collectives forward, 2 backward (+2 when the forward is recomputed),
    // each moving 2(t-1)/t of an s x b x h activation; the same for all-gather/reduce-scatter under sp.
    const double t = l.tp;
    const double act = activation_message_bytes(p, l);
    const double per_layer = (l.recompute == recompute_mode::full ? 6 : 4) * 2 * (t - 1) / t * act;
    const double bytes = per_layer * (L / l.pp) * M;
    r.tp_comm = bytes / (c.intra_node_gbs * 1e9) / compute_s;
  }
  if (l.pp > 1) {
    // Pipeline sends: per micro-batch each of a stage's vpp chunks sends its output forward and its input
    // gradient backward, s/cp x b x h activations each, 1/tp of it per GPU (Megatron's scatter/gather);
    // interleaving multiplies these sends by vpp (Narayanan et al., arXiv 2104.04473, sections 2.2.2 and
    // 4.1). Neighbouring stages are N/pp ranks apart: on another node once that reaches a node's GPUs.
    const double msg = activation_message_bytes(p, l, true);
    const double bytes = 2.0 * l.vpp * M * msg;
    const bool crosses = l.gpus / l.pp >= p.device.gpus_per_node && l.gpus > p.device.gpus_per_node;
    r.pp_comm = bytes / ((crosses ? c.inter_node_gbs : c.intra_node_gbs) * 1e9) / compute_s;
  }
  const double D = l.shard_degree();
  if (D > 1) {
    const double rank_params = static_cast<double>(pc.total) / (static_cast<double>(l.tp) * l.pp);
    const double pbytes = static_cast<double>(p.precision.bytes_of(buffer_kind::params));
    r.dp_bytes = (l.zero == 3 ? 3 : 2) * rank_params * pbytes * (D - 1) / D;
    const double bw = (l.gpus > p.device.gpus_per_node ? c.inter_node_gbs : c.intra_node_gbs) * 1e9;
    r.dp_exposed = std::max(0.0, r.dp_bytes / bw - compute_s) / compute_s;
  }
  r.total = r.recompute + r.bubble + r.tp_comm + r.pp_comm + r.dp_exposed;
  return r;
}

}  // namespace headroom
