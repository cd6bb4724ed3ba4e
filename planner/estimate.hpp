// estimate.hpp: the per-GPU memory of one layout, stage by stage: state (the recipe's buffers after
// tp / pp / ZeRO division), the ZeRO-3 gather transient, activations (ledger x layers x micro-batches in
// flight), and the reserve. This is the reference case's analytic model; every figure is "predicted".
//
// The verdict (stated once in stage_terms.hpp): a layout fits when both the reference total (state +
// activations + reserve) and the step peak plus the fixed overheads outside the allocator (persistent +
// transient + activations + max(backward working set, output phase) + context, cuBLAS, NCCL) are within
// the capacity. The reference total decides every figure of the reference case; the step peak decides at long
// sequences and large vocabularies, where the output phase alone can dwarf the 10 GiB reserve.
#pragma once

#include <array>
#include <cstdint>
#include <iterator>
#include <vector>

#include "layout.hpp"
#include "ledger.hpp"
#include "model_spec.hpp"
#include "schedule.hpp"
#include "stage_terms.hpp"

namespace headroom {

struct layout_shares;

// One pipeline stage's rank, in bytes unless said otherwise.
struct stage_breakdown {
  int stage = 0;
  std::int64_t layers = 0;          // transformer layers on this stage
  std::int64_t moe_layers = 0;      // of `layers`, those with a MoE MLP
  std::int64_t params_on_rank = 0;  // parameters this rank owns before ZeRO sharding (count, not bytes)
  std::int64_t expert_params_on_rank = 0;  // of params_on_rank, routed experts' (sharded over expert dp)
  std::array<std::int64_t, max_recipe_buffers> buffer_bytes{};    // per recipe buffer, on the GPU
  std::int64_t params = 0, grads = 0, master = 0, optimizer = 0;  // buffer bytes by kind, on the GPU
  std::int64_t host_offload = 0;       // master + optimizer bytes held in host memory instead
  std::int64_t persistent = 0;         // params + grads + master + optimizer
  std::int64_t transient = 0;          // ZeRO-3: unsharded layers gathered in flight
  std::int64_t state = 0;              // persistent + transient (the reference case's "state" column)
  std::int64_t layer_activations = 0;  // layers x micro-batch chunks whose activations are alive at once
  std::int64_t moe_layer_activations = 0;  // of those, MoE layers' (the rest are dense layers')
  std::int64_t embedding_activations =
      0;                             // first stage: the embedding dropout masks of micro-batches in flight
  std::int64_t mtp_activations = 0;  // last stage: its MTP modules' per micro-batch in flight (in activations)
  std::int64_t activations = 0;      // layer activations + embedding activations + MTP activations
  std::int64_t logits = 0;           // one fp32 logits copy on the last stage; in the reserve, not added
  std::int64_t working_set = 0;      // one layer's backward working set (ledger.hpp)
  std::int64_t output_phase = 0;     // last stage: the loss's tensors (output_phase_tensors)
  std::int64_t allocator_workspaces = 0;  // cuBLAS and TransformerEngine workspaces in the allocator (device_spec)
  std::int64_t step_peak = 0;  // workspaces + persistent + transient + activations + max(output_phase, working_set)
  std::int64_t fixed_overheads = 0;  // outside the allocator: context, NCCL (device_spec)
  std::int64_t peak_total = 0;       // step_peak + fixed_overheads
  std::int64_t reserve = 0;
  std::int64_t total = 0;  // state + activations + reserve: the reference total
  std::int64_t capacity = 0;
  std::int64_t headroom = 0;  // capacity - decisive_total() (negative when it does not fit)
  bool fits = false;          // both totals within the capacity

  // Returns whether the step peak (+ fixed overheads), not the reference total, decides the verdict.
  bool peak_decides() const { return peak_total > total; }
  // Returns the total that decides: the larger of the reference total and the step peak + fixed overheads.
  std::int64_t decisive_total() const { return peak_decides() ? peak_total : total; }
  // Returns the five terms the verdict derives from (stage_terms.hpp), bytes.
  stage_terms terms() const {
    return {persistent, transient, activations, working_set, output_phase, allocator_workspaces};
  }
  // Returns whether it fits with under 5% of the capacity left (is_tight).
  bool tight() const { return fits && is_tight(headroom, capacity); }
};

// Everything a layout's figures derive from that does not depend on the stage.
struct plan_basis {
  param_counts params;
  std::vector<ledger_entry> ledger;        // one dense layer, one micro-batch, this rank
  activation_sums per_layer;               // sums of `ledger`
  std::vector<ledger_entry> moe_ledger;    // one MoE layer (empty for a dense model)
  peak_sums peaks;                         // the working set and output phase the step peak adds
  std::vector<ledger_entry> working_set;   // one layer's backward working set (backward_working_set)
  std::vector<ledger_entry> output_phase;  // the last stage's output-layer tensors
  std::vector<ledger_entry> first_stage;   // the first stage's per-micro-batch tensors beyond its layers
  std::vector<ledger_entry> mtp_module;    // one MTP module's tensors beyond its layer (mtp_module_tensors)
  std::int64_t microbatches = 1;           // per step: ceil(global batch / (micro-batch x dp))
};

struct breakdown {
  layout where;
  plan_basis basis;
  std::vector<stage_breakdown> stages;  // one per pipeline stage
  int worst = 0;                        // index of the stage with the largest total

  const stage_breakdown& worst_stage() const { return stages[static_cast<std::size_t>(worst)]; }
  bool fits() const { return worst_stage().fits; }
};

// The parameters one rank owns before ZeRO sharding (counts): the dense part shards over dp * cp, the routed
// experts' over the expert data-parallel ranks (layout::expert_shard_degree).
struct rank_params {
  std::int64_t dense = 0;
  std::int64_t expert = 0;
  std::int64_t other = 0;  // of `dense`, what is not a transformer layer's linear weight: embedding, head,
                           // norms, router (recipes with FP8 copies price the linear weights apart)
  constexpr std::int64_t total() const { return dense + expert; }
};

// Returns the parameters of the heaviest layer on one rank of `l` (a count): a dense layer / tp for a dense
// model; for a MoE model the larger of a dense and a MoE layer, tp-sharded part / tp + replicated part +
// routed experts / (ep x expert tp).
rank_params layer_params_on_rank(const param_counts& pc, const layout& l);

// Returns the bytes of one ZeRO-3 gather unit: a layer's parameters / (tp * pp), the reference case's rule,
// for a dense model; for a MoE model, the heaviest layer's parameters on the rank (layer_params_on_rank).
// Under DeepSpeed's stage3_max_live_parameters below one dense layer, the unit is that limit plus the
// largest weight, in the same proportion (zero3_dense_live_bound).
std::int64_t zero3_gather_bytes(const problem& p, const param_counts& pc, const layout& l);

// Returns the ZeRO-3 gather units in flight on a stage whose model chunks hold `chunk_layers` layers: the
// --zero3-inflight-units, at most the chunk's layers, at most the whole layers --zero3-live-params holds.
std::int64_t zero3_units(const param_counts& pc, const layout& l, std::int64_t chunk_layers);

// Throws bad_input when the model's whole state in bytes (every buffer x Ψ) cannot be held in 64 bits with
// room to spare: the guard that keeps every per-rank state figure exact.
void check_state_fits_in_int64(const problem& p, const param_counts& pc);

// Returns the tokens of one micro-batch on a rank of `l` (seq / cp x micro-batch): the reserve's per-token
// term.
std::int64_t reserve_tokens(const problem& p, const layout& l);

// Returns a * b, or INT64_MAX / 4 when the product overflows (an absurd layout that cannot fit; the sum
// with the other terms then still does not overflow).
inline std::int64_t saturating_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX / 4 : r;
}
// Returns a + b, or the same absurd-but-safe value as saturating_mul when the sum leaves int64.
inline std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? INT64_MAX / 4 : r;
}

// The pieces of a stage's figures, stated once: evaluate_stage assembles them into a breakdown, and the
// search (suggest.cpp) combines them without building one.
// Returns the MoE layers among the `layers` layers of stage `stage` (its model chunks' layers when
// interleaved: virtual stage c * pp + stage holds chunk c). 0 for a dense model.
std::int64_t stage_moe_layers(const problem& p, const param_counts& pc, const layout& l, int stage,
                              std::int64_t layers);
// Returns the parameters rank `stage` owns before ZeRO sharding (counts): a stated Ψ spread by layers,
// divided by tp; a derived one with the embedding on the first stage, the output layer (and MTP layers) on
// the last, the tp-sharded part / tp, the replicated part whole, the routed experts / (ep x expert tp).
rank_params stage_params_on_rank(const problem& p, const param_counts& pc, const layout& l, int stage,
                                 std::int64_t layers, std::int64_t moe_layers);
// Returns whether buffer `b` lives in host memory when the optimizer is offloaded or not (ZeRO-Offload:
// master and optimizer states), and the parameters are or not (ZeRO-3's offload_param: the sharded
// parameters; the gathered layers stay the GPU's transient).
inline bool offloaded(const recipe_buffer& b, bool offload_optimizer, bool offload_params = false) {
  return (offload_optimizer && (b.kind == buffer_kind::master || b.kind == buffer_kind::optimizer)) ||
         (offload_params && b.kind == buffer_kind::params);
}
// Returns whether buffer `b` lives in host memory under `l`.
inline bool offloaded(const recipe_buffer& b, const layout& l) {
  return offloaded(b, l.offload_optimizer, l.offload_params && l.zero == 3);
}
// Returns the bytes of buffer `i` of recipe `r` for the rank's parameters: the dense part divided over the
// dp * cp shards and the experts' over the expert data-parallel shards, when the ZeRO stage shards the buffer;
// a buffer of the linear weights only (or of the rest only, recipe::linear_only / other_only) counts its part.
std::int64_t buffer_bytes(const recipe& r, std::size_t i, const layout& l, const rank_params& on_rank);
// The same, with the layout's shard degrees given (layout::shard_degree, expert_shard_degree): no division
// beyond the buffer's own.
std::int64_t buffer_bytes(const recipe& r, std::size_t i, int zero, int shard_degree, int expert_shard_degree,
                          const rank_params& on_rank);
// Returns the bytes of every buffer kept on the GPU (params + grads + master + optimizer).
std::int64_t persistent_bytes(const problem& p, const layout& l, const rank_params& on_rank);
// The same, with the shard degrees of `sh`.
std::int64_t persistent_bytes(const problem& p, const layout& l, const rank_params& on_rank, const layout_shares& sh);
// Returns the ZeRO-3 gather transient of a stage whose largest model chunk holds `chunk_layers` layers
// (schedule.hpp largest_chunk_layers; the stage's layers with vpp = 1), in bytes (0 below ZeRO-3); `sh` gives
// the shard degree.
std::int64_t stage_transient(const problem& p, const param_counts& pc, const layout& l, std::int64_t chunk_layers,
                             const rank_params& on_rank, const layout_shares& sh);
// Returns the bytes a stage keeps of activations for its layers: chunks in flight x (dense layers x the dense
// layer's bytes + MoE layers x the MoE layer's bytes) / vpp under recompute mode `r`. Under full_every_N a
// dense chunk of n layers keeps n - n/N layers whole and n/N layer inputs (activation_sums::layered_bytes).
inline std::int64_t stage_layer_activations(std::int64_t chunks, std::int64_t layers, std::int64_t moe_layers,
                                            int vpp, const activation_sums& dense, const peak_sums& peaks,
                                            recompute_mode r) {
  if (moe_layers == 0 && full_every(r) > 0) return saturating_mul(chunks, dense.layered_bytes(r, layers / vpp));
  if (moe_layers == 0) return saturating_mul(chunks * (layers / vpp), dense.of(r));
  const std::int64_t per_chunk =
      ((layers - moe_layers) * dense.of(r) + moe_layers * peaks.moe_layer.of(r)) / vpp;
  return saturating_mul(chunks, per_chunk);
}

// What every stage of one layout shares, found once per layout rather than once per stage (evaluate_worst,
// estimate and the search's inner loop, which finds each at the loop level it changes in).
struct layout_shares {
  std::int64_t microbatches = 1;    // per step (microbatches_per_step)
  std::int64_t embeddings = 0;      // micro-batches whose embedding output the first stage holds
  int shard_degree = 1;             // layout::shard_degree()
  int expert_shard_degree = 1;      // layout::expert_shard_degree()
  std::int64_t tokens = 0;          // tokens of a micro-batch on a rank (reserve_tokens)
  std::int64_t unsharded_grad = 0;  // bytes (unsharded_layer_grad_bytes)
};
// Returns the shares of `l` (a layout without layout_error).
layout_shares shares_of(const problem& p, const param_counts& pc, const layout& l);

// Where a stage sits in the pipeline of `l`, which pp, vpp and the split alone decide. Counts of layers.
struct stage_place {
  int stage = 0;
  std::int64_t layers = 0;         // stage_layers
  std::int64_t moe_layers = 0;     // of those, MoE layers (stage_moe_layers)
  std::int64_t largest_chunk = 0;  // the most layers of one model chunk (largest_chunk_layers)
  bool first = false, last = false;
};
// Returns the place of stage `stage` of `l`.
stage_place place_of(const problem& p, const param_counts& pc, const layout& l, int stage);

// A stage's activations under l.recompute: layer counts and bytes.
struct stage_activation_terms {
  std::int64_t layer_activations = 0;      // layers x chunks whose activations are alive at once (a count)
  std::int64_t moe_layer_activations = 0;  // of those, MoE layers' (a count)
  std::int64_t embedding = 0;              // bytes: first stage, the embedding's per micro-batch in flight
  std::int64_t mtp = 0;                    // bytes: last stage, its MTP modules' per micro-batch in flight
  std::int64_t activations = 0;            // bytes: the layers' + embedding + mtp
};
// Returns the activations of stage `s` of `l` under l.recompute; `sh` gives the micro-batches. No
// allocation up to 16 model chunks a stage.
stage_activation_terms stage_activations(const problem& p, const param_counts& pc, const activation_sums& per_layer,
                                         const peak_sums& peaks, const layout& l, const stage_place& s,
                                         const layout_shares& sh);
// Returns stage `s`'s backward working set under l.recompute, bytes: a layer's (the larger kind's where the
// stage holds MoE layers; none's under full_every_N when the stage recomputes no layer) plus
// `unsharded_grad`.
std::int64_t stage_working_set(const peak_sums& peaks, const layout& l, const stage_place& s,
                               std::int64_t unsharded_grad);

// Returns the breakdown of one stage, given the precomputed per-layer sums. No allocation: this is the
// inner loop of --suggest.
stage_breakdown evaluate_stage(const problem& p, const param_counts& pc, const activation_sums& per_layer,
                               const peak_sums& peaks, const layout& l, int stage);
// The same for a stage whose place and layout shares are known.
stage_breakdown evaluate_stage(const problem& p, const param_counts& pc, const activation_sums& per_layer,
                               const peak_sums& peaks, const layout& l, const stage_place& s,
                               const layout_shares& sh);

// Returns the terms of stage `s` of `l` (stage_terms.hpp), bytes: the figures evaluate_stage's verdict adds up,
// without the breakdown.
stage_terms stage_terms_of(const problem& p, const param_counts& pc, const activation_sums& per_layer,
                           const peak_sums& peaks, const layout& l, const stage_place& s, const layout_shares& sh);

// Returns whether middle stage `a` holds at least what middle stage `b` after it holds, whatever the
// recompute mode and ZeRO stage: the same layers of the same kinds in each model chunk (so the same
// parameters, transient and working set) and, earlier in the pipeline, at least as many copies of each in
// flight (1F1B: min(pp - k, M); interleaved, a warm-up of more forwards over the same order of chunks).
bool middle_stage_dominates(const problem& p, const param_counts& pc, const layout& l, const stage_place& a,
                            const stage_place& b);

// Calls visit(place) for every stage of `l` that can be the worst, in pipeline order: the first and the last
// alone where the middle stages are dominated (a dense model, middle_stages_dominated); otherwise every stage
// but a middle one that an earlier middle stage dominates (middle_stage_dominates; only where the decisive
// total grows with activations, total_grows_with_activations, and among the first 16 stages kept).
template <class Visit>
void for_each_worst_candidate(const problem& p, const param_counts& pc, const layout& l, Visit&& visit) {
  visit(place_of(p, pc, l, 0));
  if (l.pp == 1) return;
  if (middle_stages_dominated(p, l) && !p.model.moe.enabled()) {
    visit(place_of(p, pc, l, l.pp - 1));
    return;
  }
  const bool skip = total_grows_with_activations(p.device);
  stage_place kept[16];
  std::size_t n = 0;
  for (int k = 1; k < l.pp; ++k) {
    const stage_place s = place_of(p, pc, l, k);
    if (!s.last && skip) {
      bool dominated = false;
      for (std::size_t i = 0; i < n && !dominated; ++i) dominated = middle_stage_dominates(p, pc, l, kept[i], s);
      if (dominated) continue;
      if (n < std::size(kept)) kept[n++] = s;
    }
    visit(s);
  }
}

// Returns the stage with the largest decisive total (the first such), among for_each_worst_candidate's: their
// totals from stage_terms_of, the full breakdown (evaluate_stage) for that stage alone.
stage_breakdown evaluate_worst(const problem& p, const param_counts& pc, const activation_sums& per_layer,
                               const peak_sums& peaks, const layout& l);

// Returns the bytes of the heaviest layer's unsharded parameter gradients on the rank that exist before
// reduce-scatter (ZeRO >= 2 with more than one shard), else 0.
std::int64_t unsharded_layer_grad_bytes(const problem& p, const param_counts& pc, const layout& l);
// The same, with the layout's shard degree given (layout::shard_degree).
std::int64_t unsharded_layer_grad_bytes(const problem& p, const param_counts& pc, const layout& l,
                                        int shard_degree);

// Validates `l` against `p` and returns every stage's breakdown. Throws bad_input.
breakdown estimate(const problem& p, const layout& l);

}  // namespace headroom
