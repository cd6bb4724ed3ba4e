// schedule.cpp: the pipeline split and the schedule's chunks in flight (see schedule.hpp).
#include "schedule.hpp"

#include <algorithm>
#include <string>

namespace headroom {

namespace {

// Layers of the stages a --first/--last-stage-layers split leaves to be spread evenly.
struct middle {
  std::int64_t stages = 0, layers = 0;
};
middle middle_of(const problem& p, const layout& l) {
  const auto& s = p.training.split;
  middle m{l.pp, p.model.layers};
  if (s.first_stage) --m.stages, m.layers -= s.first_stage;
  if (s.last_stage) --m.stages, m.layers -= s.last_stage;
  return m;
}

std::int64_t slots(const problem& p) {
  const auto& s = p.training.split;
  return p.model.layers + (s.embedding_as_layer ? 1 : 0) + (s.loss_as_layer ? 1 : 0);
}

}  // namespace

std::int64_t detail::stage_layers_of_split(const problem& p, const layout& l, int stage) {
  const auto& s = p.training.split;
  if (!s.layers.empty()) return s.layers[static_cast<std::size_t>(stage)];
  if (s.first_stage || s.last_stage) {
    if (stage == 0 && s.first_stage) return s.first_stage;
    if (stage == l.pp - 1 && s.last_stage) return s.last_stage;
    const middle m = middle_of(p, l);
    return m.layers / m.stages;
  }
  const std::int64_t n = slots(p), base = n / l.pp, extra = n % l.pp;
  std::int64_t k = base + (stage < extra ? 1 : 0);
  if (stage == 0 && s.embedding_as_layer) --k;
  if (stage == l.pp - 1 && s.loss_as_layer) --k;
  return k;
}

std::int64_t first_layer_of(const problem& p, const layout& l, int stage) {
  std::int64_t first = 0;
  for (int k = 0; k < stage; ++k) first += stage_layers(p, l, k);
  return first;
}

std::optional<bad_input> split_error(const problem& p, const layout& l) {
  const auto& s = p.training.split;
  const std::int64_t L = p.model.layers;
  const bool counted = s.embedding_as_layer || s.loss_as_layer;
  if (!s.layers.empty()) {
    if (s.first_stage || s.last_stage || counted)
      return bad_input("pp-layout",
                       "an explicit layout excludes --first/--last-stage-layers and counted "
                       "embedding or loss layers");
    if (static_cast<std::int64_t>(s.layers.size()) != l.pp)
      return bad_input("pp-layout",
                       "gives " + std::to_string(s.layers.size()) + " stages for pp=" + std::to_string(l.pp));
    std::int64_t sum = 0;
    for (auto n : s.layers) {
      if (n < 1 || n > L)
        return bad_input("pp-layout", "every stage needs between 1 and " + std::to_string(L) + " layers");
      sum += n;
    }
    if (sum != L)
      return bad_input("pp-layout",
                       "sums to " + std::to_string(sum) + " layers, the model has " + std::to_string(L));
  } else if (s.first_stage || s.last_stage) {
    if (counted)
      return bad_input("first-stage-layers", "excludes counting the embedding or loss as pipeline layers");
    if (s.first_stage < 0 || s.last_stage < 0)
      return bad_input("first-stage-layers", "stage layer counts must be positive");
    const middle m = middle_of(p, l);
    if (m.stages < 0 || (m.stages == 0 && m.layers != 0) || (l.pp == 1))
      return bad_input("first-stage-layers",
                       "needs pp of at least " +
                           std::to_string((s.first_stage ? 1 : 0) + (s.last_stage ? 1 : 0) + 1) +
                           ", got pp=" + std::to_string(l.pp));
    if (m.stages > 0 && (m.layers < m.stages || m.layers % m.stages != 0))
      return bad_input("pp", "the " + std::to_string(m.layers) + " layers left for the " +
                                 std::to_string(m.stages) +
                                 " middle stages do not divide evenly (pp=" + std::to_string(l.pp) + ")");
  } else {
    const std::int64_t n = slots(p);
    if (n < l.pp)
      return bad_input("pp", "layers (" + std::to_string(L) + ") fewer than pp=" + std::to_string(l.pp));
  }
  for (int k = 0; k < l.pp; ++k) {
    const std::int64_t n = stage_layers(p, l, k);
    if (n < 1)
      return bad_input("pp", "stage " + std::to_string(k) +
                                 " would hold no transformer layer (pp=" + std::to_string(l.pp) + ")");
    if (n % l.vpp != 0)
      return bad_input("vpp", "stage " + std::to_string(k) + "'s " + std::to_string(n) +
                                  " layers are not divisible by vpp=" + std::to_string(l.vpp));
    if (l.vpp > 1 && n != stage_layers(p, l, 0))
      return bad_input("vpp", "the interleaved schedule needs the same layers on every stage");
  }
  return std::nullopt;
}

bool detail::middle_stages_dominated_in_split(const problem& p, const layout& l) {
  const auto& s = p.training.split;
  if (s.layers.empty() && !s.first_stage && !s.last_stage && !s.embedding_as_layer) return true;
  const std::int64_t first = stage_layers(p, l, 0);
  for (int k = 1; k + 1 < l.pp; ++k)
    if (stage_layers(p, l, k) > first) return false;
  return true;
}

std::int64_t embeddings_in_flight(const layout& l, std::int64_t microbatches) {
  const std::int64_t pp = l.pp, v = l.vpp, total = microbatches * v;
  const std::int64_t warmup = std::min(warmup_chunks(l, 0), total);
  if (v == 1) return std::min(warmup + 1, total);
  // Interleaved: walk Megatron's order (forward step i runs chunk (i mod pp*v) / pp; backward the chunks
  // in reverse) and take the most chunk-0 forwards not yet matched by their chunk-0 backward at the start
  // of any backward. The order repeats every pp*v steps, so two rounds past the warm-up find the maximum.
  auto fwd_chunk0 = [&](std::int64_t i) { return (i % (pp * v)) / pp == 0; };
  auto bwd_chunk0 = [&](std::int64_t i) { return v - 1 - (i % (pp * v)) / pp == 0; };
  std::int64_t alive = 0, most = 0, next_f = 0;
  for (; next_f < warmup; ++next_f) alive += fwd_chunk0(next_f);
  const std::int64_t last_b = std::min(total, warmup + 2 * pp * v + 1);
  for (std::int64_t b = 0; b < last_b; ++b) {
    if (next_f < total) alive += fwd_chunk0(next_f++);
    most = std::max(most, alive);
    alive -= bwd_chunk0(b);
  }
  return most;
}

}  // namespace headroom
