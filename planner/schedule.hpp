// schedule.hpp: the pipeline, stated once. How many transformer layers each stage holds (a balanced split
// when the layers do not divide, an explicit --pp-layout, Megatron's first / last stage counts, the
// embedding and the loss counted as pipeline layers) and how many model chunks each stage keeps in flight
// under Megatron's 1F1B and interleaved schedules. estimate() and the step trace both call it, so the
// planner's activations and the probes' replay cannot disagree about the schedule.
#pragma once

#include <cstdint>
#include <optional>

#include "errors.hpp"
#include "layout.hpp"

namespace headroom {

// Returns why the pipeline split of `l` cannot be made for `p` (a --pp-layout that does not sum to the
// layers, a stage left with no layer, stage layers not divisible by vpp, ...), or nullopt.
std::optional<bad_input> split_error(const problem& p, const layout& l);

// Returns the transformer layers of stage `stage` (the split must be valid). No allocation.
//   explicit (--pp-layout): as given;
//   first / last stage counts (Megatron's decoder-first/last-pipeline-num-layers): those, the rest even;
//   otherwise DeepSpeed's uniform partition over L (+1 for an embedding, +1 for a loss counted as layers):
//   every stage floor(slots / pp), the first (slots mod pp) one more, and the counted embedding and loss
//   then take their slot on the first and last stage.
namespace detail {
std::int64_t stage_layers_of_split(const problem& p, const layout& l, int stage);
bool middle_stages_dominated_in_split(const problem& p, const layout& l);
}  // namespace detail
// The balanced split is the search's hot path: inline, two divisions.
inline std::int64_t stage_layers(const problem& p, const layout& l, int stage) {
  if (!p.training.split.is_balanced()) return detail::stage_layers_of_split(p, l, stage);
  const std::int64_t L = p.model.layers;
  return L / l.pp + (stage < L % l.pp ? 1 : 0);
}

// Returns the first transformer layer (0-based, global) of stage `stage`.
std::int64_t first_layer_of(const problem& p, const layout& l, int stage);

// Returns the first layer (0-based, global) of model chunk `chunk` of stage `stage`, whose first layer is
// `stage_first` (first_layer_of): with vpp = 1 the stage's own; interleaved, chunk c is virtual stage
// c * pp + stage, c rounds of L / vpp layers after the stage's share of the first round (every stage's layers
// divide by vpp: split_error). estimate() and the step trace place MoE layers by it.
inline std::int64_t chunk_first_layer(const problem& p, const layout& l, std::int64_t stage_first,
                                      std::int64_t chunk) {
  return l.vpp <= 1 ? stage_first : chunk * (p.model.layers / l.vpp) + stage_first / l.vpp;
}

// Returns the copies of model chunk `chunk` a stage holds at the end of its warm-up, when `in_flight`
// (chunks_in_flight) chunks are alive: forward step i runs chunk (i mod pp*vpp) / pp.
inline std::int64_t chunk_copies_in_flight(const layout& l, std::int64_t in_flight, std::int64_t chunk) {
  const std::int64_t round = static_cast<std::int64_t>(l.pp) * l.vpp;
  const std::int64_t full = in_flight / round, rest = in_flight % round;
  const std::int64_t in_rest = rest - chunk * l.pp;
  return full * l.pp + (in_rest <= 0 ? 0 : in_rest < l.pp ? in_rest : l.pp);
}

// Returns whether no middle stage holds more layers than the first, so that only the first and the last
// stage can be the worst (the search's fast path).
inline bool middle_stages_dominated(const problem& p, const layout& l) {
  return p.training.split.is_balanced() || detail::middle_stages_dominated_in_split(p, l);
}

// Megatron's schedules: the warm-up forwards of stage k, in model chunks: 1F1B pp - k - 1; interleaved
// with v virtual stages 2(pp - k - 1) + (v - 1) pp.
inline std::int64_t warmup_chunks(const layout& l, int stage) {
  const std::int64_t pp = l.pp, k = stage, v = l.vpp;
  return v == 1 ? pp - k - 1 : 2 * (pp - k - 1) + (v - 1) * pp;
}

// Returns the model chunks whose activations stage k holds at once: min(warm-up + 1, M * v). 1F1B:
// min(pp - k, M) micro-batches of the stage's layers; interleaved: chunks of layers / v.
inline std::int64_t chunks_in_flight(const layout& l, int stage, std::int64_t microbatches) {
  const std::int64_t all = microbatches * l.vpp, w = warmup_chunks(l, stage) + 1;
  return w < all ? w : all;
}

// Returns the micro-batches whose embedding output the first stage holds at once (their chunk-0 forward
// done, its backward not): 1F1B min(pp, M); interleaved, the warm-up steps that ran chunk 0, plus the one
// forward before the first backward: #{i <= warm-up : (i / pp) mod v == 0}, at most M.
std::int64_t embeddings_in_flight(const layout& l, std::int64_t microbatches);

}  // namespace headroom
