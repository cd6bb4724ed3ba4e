// cost_model.hpp: how --suggest ranks layouts that fit. Each term is a fraction of the ideal step time:
// extra FLOPs of recomputation, the pipeline bubble, tensor-parallel collectives, pipeline sends and
// expert-parallel all-to-alls (on the critical path), and data-parallel traffic that compute cannot hide.
// docs/model.md ("Ranking") derives each term.
#pragma once

#include "estimate.hpp"
#include "layout.hpp"

namespace headroom {

// Throughput assumptions; defaults are a 192 GiB-class GPU (B200: 2250 dense bf16 TFLOP/s, NVLink 5 at
// 900 GB/s per direction, one 400 Gb/s NIC per GPU) at 40% model FLOPs utilisation.
struct cost_model {
  double tflops = 2250.0;
  double mfu = 0.40;
  double intra_node_gbs = 900.0;
  double inter_node_gbs = 50.0;
};

struct layout_cost {
  double recompute = 0;   // extra FLOPs / model FLOPs: 1/3 full; (s/6h)/(1 + s/6h + V/16Lh) selective
  double bubble = 0;      // (pp - 1) / (M * vpp)
  double tp_comm = 0;     // tp collective time / compute time
  double pp_comm = 0;     // pipeline send / receive time / compute time (x vpp when interleaved)
  double ep_comm = 0;     // expert-parallel all-to-all time (dispatch and combine) / compute time
  double dp_exposed = 0;  // max(0, dp traffic time - compute time) / compute time
  double dp_bytes = 0;    // data-parallel bytes sent per GPU per step (ZeRO-3: 3 x params, else 2 x)
  double total = 0;       // sum of the six fractions
};

// Returns the bytes of one micro-batch's activation message between layers, s/cp x b x h in the recipe's
// activation precision: what one tensor-parallel collective moves; 1/tp of it when `per_tp_rank` (a
// pipeline send or a context-parallel exchange, Megatron's scatter/gather). The ranking below and the
// multi-rank probe's first collectives (probes/ranks/nccl_groups.cpp) both size their messages here.
inline double activation_message_bytes(const problem& p, const layout& l, bool per_tp_rank = false) {
  const double act = static_cast<double>(p.training.seq) / l.cp * static_cast<double>(p.training.micro_batch) *
                     static_cast<double>(p.model.hidden) * static_cast<double>(p.precision.activation_bytes);
  return per_tp_rank ? act / l.tp : act;
}

// Returns the seconds one GPU spends in the expert-parallel all-to-alls of one step under `l`, with
// `micro_batches` micro-batches per step: 0 without expert parallelism or without MoE layers.
double ep_alltoall_seconds(const problem& p, const param_counts& pc, const layout& l, const cost_model& c,
                           double micro_batches);

// Returns the cost of `l` for `p`; `pc` is count_params(p.model).
layout_cost cost_of(const problem& p, const param_counts& pc, const layout& l, const cost_model& c);

}  // namespace headroom
