// schedule.hpp: the pipeline, stated once. How many transformer layers each stage holds (a balanced split
// when the layers do not divide, an explicit --pp-layout, Megatron's first / last stage counts, the
// embedding and the loss counted as pipeline layers) and how many model chunks each stage keeps in flight
// under Megatron's 1F1B and interleaved schedules. estimate() and the step trace both call it, so the
// planner's activations and the probes' replay cannot disagree about the schedule.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "errors.hpp"
#include "layout.hpp"

namespace headroom {

// Returns why the pipeline split of `l` cannot be made for `p` (a --pp-layout that does not sum to the
// layers, a stage left with no layer, a stage's layers not divisible by vpp where its chunks must be even,
// ...), or nullopt.
std::optional<bad_input> split_error(const problem& p, const layout& l);

// Returns the transformer layers of stage `stage` (the split must be valid). No allocation.
//   explicit (--pp-layout): as given; with pp x vpp counts (virtual stages), the sum of the stage's chunks;
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

// Returns whether the model chunks of a stage may differ in size under the interleaved schedule: an explicit
// split of pp x vpp virtual stages (a Megatron --pipeline-model-parallel-layout string, or --pp-layout with
// pp x vpp counts), or the embedding / loss counted as pipeline layers with vpp > 1 (Megatron takes one layer
// off the first virtual stage of the first rank and the last of the last: transformer_block.py
// get_num_layers_to_build, l.76-200 at NVIDIA/Megatron-LM@d98e8a64). Otherwise every chunk of stage k holds
// stage_layers(k) / vpp layers.
inline bool uneven_chunks(const problem& p, const layout& l) {
  const auto& s = p.training.split;
  return l.vpp > 1 &&
         (s.layers.size() == static_cast<std::size_t>(l.pp) * static_cast<std::size_t>(l.vpp) ||
          (s.layers.empty() && (s.embedding_as_layer || s.loss_as_layer)));
}

// Returns the transformer layers of virtual stage `v` (0 <= v < pp x vpp; virtual stage v is model chunk
// v / pp of stage v % pp, Megatron's order). The split must be valid (split_error).
std::int64_t virtual_stage_layers(const problem& p, const layout& l, std::int64_t v);

// Returns the transformer layers of model chunk `chunk` of stage `stage` (the stage's own with vpp = 1).
inline std::int64_t chunk_layers(const problem& p, const layout& l, int stage, std::int64_t chunk) {
  if (l.vpp <= 1) return stage_layers(p, l, stage);
  if (!uneven_chunks(p, l)) return stage_layers(p, l, stage) / l.vpp;
  return virtual_stage_layers(p, l, chunk * l.pp + stage);
}

// Returns the most layers one model chunk of stage `stage` holds (ZeRO-3's gathers stay inside a chunk).
std::int64_t largest_chunk_layers(const problem& p, const layout& l, int stage);

// Returns the first layer (0-based, global) of model chunk `chunk` of stage `stage`: with vpp = 1 the stage's
// own (first_layer_of); interleaved, the layers of every virtual stage before chunk * pp + stage. estimate()
// and the step trace place MoE layers by it.
std::int64_t chunk_first_layer(const problem& p, const layout& l, int stage, std::int64_t chunk);

// Returns, for each model chunk of stage `stage`, the copies alive at the moment the stage holds the most
// activation bytes, given the bytes one copy of each chunk keeps (`chunk_bytes`, vpp entries). Megatron's
// order: the warm-up forwards, then one forward and one backward at a time; forward step i runs chunk
// (i mod pp*vpp) / pp, backward step j chunk vpp - 1 - (j mod pp*vpp) / pp. The chunks in flight stay as many
// through the steady state, but which chunks they are turns with it, so where chunks differ in bytes (sizes,
// or dense and MoE layers) the most is found over a round of it, not only at the end of the warm-up. With
// equal chunks the copies sum to chunks_in_flight; with vpp = 1, {min(pp - k, M)}.
std::vector<std::int64_t> peak_chunk_copies(const layout& l, int stage, std::int64_t microbatches,
                                            const std::vector<std::int64_t>& chunk_bytes);
// The same, written into `copies` (vpp entries): no allocation, for the search's inner loop.
void peak_chunk_copies(const layout& l, int stage, std::int64_t microbatches,
                       std::span<const std::int64_t> chunk_bytes, std::span<std::int64_t> copies);

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
