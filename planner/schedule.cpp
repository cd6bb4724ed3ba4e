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
  if (!s.layers.empty() && s.layers.size() == static_cast<std::size_t>(l.pp))
    return s.layers[static_cast<std::size_t>(stage)];
  if (!s.layers.empty()) {  // pp x vpp virtual stages (uneven_chunks)
    std::int64_t n = 0;
    for (std::size_t v = static_cast<std::size_t>(stage); v < s.layers.size(); v += static_cast<std::size_t>(l.pp))
      n += s.layers[v];
    return n;
  }
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

std::int64_t virtual_stage_layers(const problem& p, const layout& l, std::int64_t v) {
  const auto& s = p.training.split;
  if (!uneven_chunks(p, l)) return stage_layers(p, l, static_cast<int>(v % l.pp)) / l.vpp;
  if (!s.layers.empty()) return s.layers[static_cast<std::size_t>(v)];
  // Megatron's counted embedding and loss with vpp > 1: (L + E + Lo) / (pp x vpp) slots a virtual stage, one
  // fewer transformer layer on the first and on the last virtual stage.
  const std::int64_t all = static_cast<std::int64_t>(l.pp) * l.vpp, per = slots(p) / all;
  return per - (v == 0 && s.embedding_as_layer ? 1 : 0) - (v == all - 1 && s.loss_as_layer ? 1 : 0);
}

std::int64_t largest_chunk_layers(const problem& p, const layout& l, int stage) {
  if (!uneven_chunks(p, l)) return stage_layers(p, l, stage) / std::max(1, l.vpp);
  std::int64_t most = 0;
  for (std::int64_t c = 0; c < l.vpp; ++c) most = std::max(most, chunk_layers(p, l, stage, c));
  return most;
}

std::int64_t chunk_first_layer(const problem& p, const layout& l, int stage, std::int64_t chunk) {
  if (l.vpp <= 1) return first_layer_of(p, l, stage);
  if (!uneven_chunks(p, l))  // every virtual stage of rank k holds stage_layers(k) / vpp
    return chunk * (p.model.layers / l.vpp) + first_layer_of(p, l, stage) / l.vpp;
  const std::int64_t v = chunk * l.pp + stage;
  const auto& s = p.training.split;
  if (s.layers.empty())  // the counted embedding and loss: (L + E + Lo) / (pp x vpp) slots a virtual stage
    return v == 0 ? 0 : v * (slots(p) / (static_cast<std::int64_t>(l.pp) * l.vpp)) - (s.embedding_as_layer ? 1 : 0);
  std::int64_t first = 0;
  for (std::int64_t u = 0; u < v; ++u) first += s.layers[static_cast<std::size_t>(u)];
  return first;
}

std::int64_t first_layer_of(const problem& p, const layout& l, int stage) {
  if (p.training.split.is_balanced()) {  // stages before `stage`: L / pp each, the first L mod pp one more
    const std::int64_t L = p.model.layers;
    return stage * (L / l.pp) + std::min<std::int64_t>(stage, L % l.pp);
  }
  std::int64_t first = 0;
  for (int k = 0; k < stage; ++k) first += stage_layers(p, l, k);
  return first;
}

std::optional<bad_input> split_error(const problem& p, const layout& l) {
  const auto& s = p.training.split;
  const std::int64_t L = p.model.layers;
  const bool counted = s.embedding_as_layer || s.loss_as_layer;
  const std::int64_t virtual_stages = static_cast<std::int64_t>(l.pp) * l.vpp;
  if (!s.layers.empty()) {
    if (s.first_stage || s.last_stage || counted)
      return bad_input("pp-layout",
                       "an explicit layout excludes --first/--last-stage-layers and counted "
                       "embedding or loss layers");
    const auto given = static_cast<std::int64_t>(s.layers.size());
    const bool per_chunk = l.vpp > 1 && given == virtual_stages;
    // Placing a chunk sums the virtual stages before it (chunk_first_layer), so their count is bounded; no
    // launch comes near (Megatron-MoE-ModelZoo's largest is 64 x 4).
    if (per_chunk && given > 4096)
      return bad_input("pp-layout", "gives " + std::to_string(given) + " virtual stages; at most 4096 are planned");
    if (given != l.pp && !per_chunk)
      return bad_input("pp-layout", "gives " + std::to_string(given) + " stages for pp=" + std::to_string(l.pp) +
                                        (l.vpp > 1 ? " (or pp x vpp = " + std::to_string(virtual_stages) +
                                                         " virtual stages)"
                                                   : ""));
    std::int64_t sum = 0;
    for (auto n : s.layers) {
      // A virtual stage may hold no transformer layer (Megatron's "mL" stage: MTP and the loss alone).
      if (n < (per_chunk ? 0 : 1) || n > L)
        return bad_input("pp-layout", std::string("every ") + (per_chunk ? "virtual stage needs between 0" : "stage needs between 1") +
                                          " and " + std::to_string(L) + " layers");
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
    if (m.layers < 0)  // the first and last stages already hold more than the model
      return bad_input("first-stage-layers",
                       std::to_string(s.first_stage) + " on the first stage and " + std::to_string(s.last_stage) +
                           " on the last are more than the model's " + std::to_string(L) + " layers");
    if (m.stages > 0 && (m.layers < m.stages || m.layers % m.stages != 0))
      return bad_input("pp", "the " + std::to_string(m.layers) + " layers left for the " +
                                 std::to_string(m.stages) +
                                 " middle stages do not divide evenly (pp=" + std::to_string(l.pp) + ")");
  } else {
    const std::int64_t n = slots(p);
    if (n < l.pp)
      return bad_input("pp", "layers (" + std::to_string(L) + ") fewer than pp=" + std::to_string(l.pp));
    if (counted && l.vpp > 1 && n % virtual_stages != 0)
      return bad_input("vpp", "the embedding or loss counted as layers with vpp > 1 needs the " + std::to_string(n) +
                                  " slots (layers + embedding + loss) to divide into pp x vpp = " +
                                  std::to_string(virtual_stages) +
                                  " equal virtual stages (Megatron's get_num_layers_to_build)");
  }
  for (int k = 0; k < l.pp; ++k) {
    const std::int64_t n = stage_layers(p, l, k);
    if (n < 1)
      return bad_input("pp", "stage " + std::to_string(k) +
                                 " would hold no transformer layer (pp=" + std::to_string(l.pp) + ")");
    if (!uneven_chunks(p, l) && n % l.vpp != 0)
      return bad_input("vpp", "stage " + std::to_string(k) + "'s " + std::to_string(n) +
                                  " layers are not divisible by vpp=" + std::to_string(l.vpp) +
                                  " (give pp x vpp counts to --pp-layout for chunks of different sizes)");
  }
  return std::nullopt;
}

bool detail::middle_stages_dominated_in_split(const problem& p, const layout& l) {
  const auto& s = p.training.split;
  // Chunks of different sizes: a middle stage with no more layers may keep more of them in flight.
  if (uneven_chunks(p, l)) return false;
  if (s.layers.empty() && !s.first_stage && !s.last_stage && !s.embedding_as_layer) return true;
  const std::int64_t first = stage_layers(p, l, 0);
  for (int k = 1; k + 1 < l.pp; ++k)
    if (stage_layers(p, l, k) > first) return false;
  return true;
}

namespace {

// Megatron's interleaved order (vpp > 1): forward step i runs chunk (i mod pp*vpp) / pp, backward step j chunk
// vpp - 1 - (j mod pp*vpp) / pp. Stage k runs its warm-up forwards, then one forward and one backward at a
// time, and holds the most after a steady-state forward, before its backward. Counted in closed form rather
// than walked step by step: at steady step b the stage holds forwards [0, warm-up + b] less backwards
// [0, b - 1] of each chunk.
struct interleaved_order {
  std::int64_t pp, vpp, round, total, warmup;

  interleaved_order(const layout& l, int stage, std::int64_t microbatches)
      : pp(l.pp), vpp(l.vpp), round(pp * vpp), total(microbatches * vpp),
        warmup(std::min(warmup_chunks(l, stage), total)) {}
  // Returns the copies of chunk `c` among the first `n` forwards.
  std::int64_t forwards(std::int64_t n, std::int64_t c) const {
    return n / round * pp + std::clamp<std::int64_t>(n % round - c * pp, 0, pp);
  }
  // Returns the copies of chunk `c` alive at steady step `b` (b < 0: after a warm-up that ran every forward).
  std::int64_t alive(std::int64_t b, std::int64_t c) const {
    if (b < 0) return forwards(total, c);
    return forwards(warmup + b + 1, c) - forwards(b, vpp - 1 - c);  // a backward of chunk c is the
                                                                     // forward order's chunk vpp - 1 - c
  }
  // Calls at(b), in increasing b, for each steady step at which the bytes held can first reach their most:
  // from one step to the next they change by the bytes of the chunk forwarded less those of the chunk
  // backwarded, which stay the same between the steps where either chunk changes (b a multiple of pp, or
  // warm-up + b + 1 one), so the first most is at such a step, the first or the last; the order repeats
  // every pp*vpp steps, so one round holds it. With no steady step, at(-1).
  template <class At>
  void each_candidate(At at) const {
    const std::int64_t steps = std::min(total - warmup, round);
    if (steps <= 0) {
      at(-1);
      return;
    }
    const std::int64_t shift = (pp - (warmup + 1) % pp) % pp;  // the first b with warm-up + b + 1 = 0 mod pp
    for (std::int64_t base = 0; base < steps; base += pp) {
      at(base);
      if (shift > 0 && base + shift < steps) at(base + shift);
    }
    at(steps - 1);
  }
};

}  // namespace

void peak_chunk_copies(const layout& l, int stage, std::int64_t microbatches,
                       std::span<const std::int64_t> chunk_bytes, std::span<std::int64_t> copies) {
  const auto v = static_cast<std::size_t>(l.vpp);
  std::fill_n(copies.begin(), v, 0);
  if (v <= 1) {
    copies[0] = chunks_in_flight(l, stage, microbatches);
    return;
  }
  const interleaved_order order(l, stage, microbatches);
  std::int64_t most = -1, at_most = 0;
  order.each_candidate([&](std::int64_t b) {
    std::int64_t bytes = 0;
    for (std::size_t c = 0; c < v; ++c) bytes += order.alive(b, static_cast<std::int64_t>(c)) * chunk_bytes[c];
    if (bytes > most) most = bytes, at_most = b;
  });
  for (std::size_t c = 0; c < v; ++c) copies[c] = order.alive(at_most, static_cast<std::int64_t>(c));
}

std::vector<std::int64_t> peak_chunk_copies(const layout& l, int stage, std::int64_t microbatches,
                                            const std::vector<std::int64_t>& chunk_bytes) {
  const auto v = static_cast<std::size_t>(std::max(1, l.vpp));
  std::vector<std::int64_t> copies(v, 0);
  peak_chunk_copies(l, stage, microbatches, chunk_bytes, copies);
  return copies;
}

std::int64_t embeddings_in_flight(const layout& l, std::int64_t microbatches) {
  if (l.vpp == 1) return chunks_in_flight(l, 0, microbatches);
  // Interleaved: the most chunk-0 forwards not yet matched by their chunk-0 backward.
  const interleaved_order order(l, 0, microbatches);
  std::int64_t most = 0;
  order.each_candidate([&](std::int64_t b) { most = std::max(most, order.alive(b, 0)); });
  return most;
}

}  // namespace headroom
