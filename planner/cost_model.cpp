// cost_model.cpp: the ranking terms of --suggest (see cost_model.hpp).
#include "cost_model.hpp"

#include <algorithm>

#include "op_policy.hpp"

namespace headroom {

// Returns torchtitan's per-op policy's repeated forward FLOPs as a fraction of a layer's forward and backward
// FLOPs. The policy counts a block's matmuls in order and recomputes every second one (torchtitan
// distributed/activation_checkpoint.py @ 238fa995 l.98-122; docs/model.md): the block's matmuls are the ledger's
// (op_policy.hpp, op_policy_matmuls), 2 x input x output FLOPs per token each, so multi-latent attention's four
// or five matmuls set the MLP's parity here as they do its kept outputs. A MoE layer also repeats the router's
// gate (forced to recompute, not counted) and the routed experts' grouped matmuls (on no save list); its forward
// counts the top_k experts a token runs. The attention core (SDPA, flex: kept) is in the forward only, 2 FLOPs
// per multiply-add of q.k and p.v at sequence `seq`. The model's fraction weighs each kind by its layers.
static double op_policy_recompute(const model_spec& m, std::int64_t seq) {
  const double h = static_cast<double>(m.hidden), s = static_cast<double>(seq);
  const double n = static_cast<double>(m.heads);
  const double core = m.mla.enabled() ? 2 * s * n *
                                            static_cast<double>(m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim +
                                                                m.mla.v_head_dim)
                                      : 4 * s * static_cast<double>(m.heads * m.head_dim);
  const ledger_shape one_rank(seq, 1, 1, false, 1, attention_kind::flash, 2);  // per token, tp 1
  // Sums one block's forward FLOPs per token and those the policy repeats; `uncounted` is repeated whole.
  auto block = [&](bool moe_layer, double uncounted, double& forward, double& again) {
    const op_block b = op_policy_matmuls(m, one_rank, moe_layer);
    forward = core + uncounted;
    again = uncounted;
    for (std::size_t i = 0; i < b.mms.size(); ++i) {
      const double flops = 2 * static_cast<double>(b.mms[i].input) * static_cast<double>(b.mms[i].width);
      forward += flops;
      if (i % 2 == 1) again += flops;  // the 2nd, 4th, ... counted matmul is recomputed
    }
  };
  double forward = 0, recomputed = 0;
  block(false, 0, forward, recomputed);
  if (m.moe.enabled()) {
    const double k = static_cast<double>(m.moe.top_k), fe = static_cast<double>(m.moe.expert_ffn);
    const double gate = 2 * static_cast<double>(m.moe.experts) * h;
    const double experts = 2 * k * (m.mlp == mlp_kind::swiglu ? 3 : 2) * h * fe;
    double moe_forward = 0, moe_again = 0;
    block(true, gate + experts, moe_forward, moe_again);
    double n_moe = 0;
    for (const bool is_moe : m.moe.layers) n_moe += is_moe ? 1 : 0;
    const double n_dense = static_cast<double>(m.layers) - n_moe;
    recomputed = n_dense * recomputed + n_moe * moe_again;
    forward = n_dense * forward + n_moe * moe_forward;
  }
  return forward > 0 ? recomputed / (3 * forward) : 0;
}

// Megatron-Core's all-to-all dispatcher (megatron/core/transformer/moe/token_dispatcher.py,
// MoEAlltoAllTokenDispatcher: token_dispatch sends each rank's permuted tokens, k rows per token, over the
// expert-parallel group with all_to_all; token_combine sends the experts' outputs back the same way) moves,
// per MoE layer and micro-batch, k x s/(t*c) x b rows of h activations per GPU (its own tokens, split by tp
// under sequence parallelism), of which the (ep - 1)/ep routed to other ranks leave it (balanced routing).
// Forward: dispatch + combine; backward: the same two reversed; a recomputed forward repeats the first two
// (as the tensor-parallel term counts its collectives). The group's ranks are etp apart (Megatron's expert
// grid orders etp before ep), so a node holds gpus_per_node / etp of them: what goes to those crosses NVLink,
// the rest the NICs, both at once (the slower decides). docs/model.md, "Ranking".
double ep_alltoall_seconds(const problem& p, const param_counts& pc, const layout& l, const cost_model& c,
                           double micro_batches) {
  if (l.ep <= 1 || pc.moe_before.empty() || pc.moe_before.back() == 0) return 0;
  // The all-gather dispatcher gathers every token of the group instead (each rank receives the other ep - 1
  // ranks' tokens once, whatever k) and reduce-scatters the outputs back.
  const double ep = l.ep;
  const double rows_per_token = p.training.routing.dispatcher == dispatcher_kind::allgather
                                    ? ep
                                    : static_cast<double>(p.model.moe.top_k);
  const double tokens = static_cast<double>(p.training.seq) / l.cp * static_cast<double>(p.training.micro_batch) /
                        (l.sp() ? l.tp : 1);
  const double message = rows_per_token * tokens * static_cast<double>(p.model.hidden) *
                         static_cast<double>(p.precision.activation_bytes);
  const double passes = l.recompute == recompute_mode::full ? 6 : 4;
  const double layers = static_cast<double>(pc.moe_before.back()) / l.pp;
  const double per_step = passes * message * layers * micro_batches;  // bytes through one rank's all-to-alls
  const int node = std::min(l.gpus, p.device.gpus_per_node);
  const double local = std::clamp(static_cast<double>(node / l.expert_tp()), 1.0, ep);  // group ranks on a node
  const double intra = per_step * (local - 1) / ep / (c.intra_node_gbs * 1e9);
  const double inter = per_step * (ep - local) / ep / (c.inter_node_gbs * 1e9);
  return std::max(intra, inter);
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
  r.ep_comm = ep_alltoall_seconds(p, pc, l, c, M) / compute_s;
  const double D = l.shard_degree();
  if (D > 1) {
    const double rank_params = static_cast<double>(pc.total) / (static_cast<double>(l.tp) * l.pp);
    const double pbytes = static_cast<double>(p.precision.bytes_of(buffer_kind::params));
    r.dp_bytes = (l.zero == 3 ? 3 : 2) * rank_params * pbytes * (D - 1) / D;
    const double bw = (l.gpus > p.device.gpus_per_node ? c.inter_node_gbs : c.intra_node_gbs) * 1e9;
    r.dp_exposed = std::max(0.0, r.dp_bytes / bw - compute_s) / compute_s;
  }
  r.total = r.recompute + r.bubble + r.tp_comm + r.pp_comm + r.ep_comm + r.dp_exposed;
  return r;
}

}  // namespace headroom
