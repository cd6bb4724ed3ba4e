// step_trace.cpp: building the step trace of one rank from the ledger (see step_trace.hpp).
//
// Order: persistent state (one flat buffer per recipe buffer, as ZeRO and Megatron's distributed optimizer
// keep them); then the 1F1B schedule of this stage. A forward layer gathers its parameters (ZeRO-3, up to
// `units` layers in flight), allocates every ledger tensor, and frees what the recompute mode drops. A
// backward layer allocates its working set (recomputed tensors, activation gradients, unsharded parameter
// gradients before reduce-scatter), then frees it and the layer's saved tensors. The last stage runs the
// output layer (fp32 logits, loss, logits gradient) at the start of each backward. Then the optimizer step.
#include "step_trace.hpp"

#include <algorithm>

#include "planner/errors.hpp"
#include "planner/ledger.hpp"
#include "planner/schedule.hpp"

namespace headroom::probes {

const char* to_string(phase p) {
  switch (p) {
    case phase::state:
      return "state";
    case phase::forward:
      return "forward";
    case phase::output:
      return "output";
    case phase::backward:
      return "backward";
    case phase::optimizer:
      return "optimizer";
  }
  return "?";
}

const char* to_string(event_kind k) {
  return k == event_kind::alloc ? "alloc" : k == event_kind::free ? "free" : "empty_cache";
}

namespace {

class trace_builder {
 public:
  explicit trace_builder(step_trace& t) : m_t(t) {}

  std::int32_t alloc(std::string name, std::vector<std::int64_t> shape, std::int64_t dtype,
                     std::int64_t bytes, phase when) {
    m_t.tensors.push_back({std::move(name), std::move(shape), dtype, bytes});
    const auto id = static_cast<std::int32_t>(m_t.tensors.size() - 1);
    m_t.events.push_back({event_kind::alloc, when, id});
    return id;
  }
  std::int32_t alloc(const std::string& prefix, const ledger_entry& e, phase when) {
    return alloc(prefix + e.name, e.shape, e.dtype_bytes, e.bytes, when);
  }
  void free(std::int32_t id, phase when) { m_t.events.push_back({event_kind::free, when, id}); }

 private:
  step_trace& m_t;
};

}  // namespace

step_trace build_trace(const problem& p, const layout& l, int stage) {
  const breakdown b = estimate(p, l);
  if (l.zero == 3 && !l.reshard_after_forward)
    throw bad_input("reshard-after-forward",
                    "the trace does not model FSDP without resharding yet (the "
                    "planner does)");
  if (stage < 0 || stage >= l.pp)
    throw bad_input("stage",
                    "must be between 0 and " + std::to_string(l.pp - 1) + ", got " + std::to_string(stage));
  const stage_breakdown& sb = b.stages[static_cast<std::size_t>(stage)];
  // The same tensor lists the planner summed: the trace only orders them in time.
  const auto& ledger = b.basis.ledger;
  const auto& working = b.basis.working_set;
  const auto& output = b.basis.output_phase;

  step_trace t;
  t.model = p.model.name;
  t.layout_text = trace_layout_text(l);
  t.stage = stage;
  t.stages = l.pp;
  // Micro-batches to trace: enough to reach the schedule's steady state (one forward after the warm-up).
  // Megatron's interleaved schedule runs pp micro-batches per round, so it needs M divisible by pp.
  const std::int64_t M = b.basis.microbatches, pp = l.pp, v = l.vpp;
  const std::int64_t warmup_steps = warmup_chunks(l, stage);
  std::int64_t m = std::min<std::int64_t>(M, pp - stage + 1);
  if (v > 1) {
    if (M % pp != 0)
      throw bad_input("vpp", "the interleaved schedule needs micro-batches per step (" + std::to_string(M) +
                                 ") divisible by pp=" + std::to_string(pp));
    m = std::min<std::int64_t>(M, pp * ((warmup_steps + 2 + pp * v - 1) / (pp * v)));
  }
  t.microbatches_per_step = M;
  t.microbatches_traced = m;
  trace_builder tb(t);

  // Persistent state: the rank's shard of every recipe buffer that lives on the GPU.
  for (std::size_t i = 0; i < p.precision.buffers.size(); ++i) {
    const auto bytes = sb.buffer_bytes[i];
    if (bytes == 0) continue;
    const auto& buf = p.precision.buffers[i];
    const std::int64_t dtype = bytes % buf.bytes == 0 ? buf.bytes : 1;
    tb.alloc("state." + buf.name, {bytes / dtype}, dtype, bytes, phase::state);
  }

  // A model chunk is the stage's layers / vpp consecutive layers; chunk c of this stage starts at layer
  // (c * pp + stage) * chunk_layers (every stage holds the same layers when vpp > 1); with vpp = 1, one
  // chunk starting where the split puts this stage.
  const std::int64_t layers = sb.layers / v;
  const std::int64_t stage_first = first_layer_of(p, l, stage);
  const bool gathers = sb.transient > 0;
  const std::int64_t gather_bytes = gathers ? zero3_gather_bytes(p, b.basis.params, l) : 0;
  const std::int64_t units = zero3_units(b.basis.params, l, layers);
  const std::int64_t param_bytes = p.precision.bytes_of(buffer_kind::params);
  const std::int64_t gather_dtype = gather_bytes % param_bytes == 0 ? param_bytes : 1;
  const bool last = stage == l.pp - 1;
  auto first_layer = [&](std::int64_t chunk) { return v == 1 ? stage_first : (chunk * pp + stage) * layers; };
  auto slot = [&](std::int64_t v_mb, std::int64_t chunk) {
    return static_cast<std::size_t>(v_mb * v + chunk);
  };

  // Saved tensors per (micro-batch, chunk) and layer, freed by that layer's backward.
  std::vector<std::vector<std::vector<std::int32_t>>> saved(
      static_cast<std::size_t>(m * v),
      std::vector<std::vector<std::int32_t>>(static_cast<std::size_t>(layers)));
  // ZeRO-3 gathers alive, by layer of the chunk being run (-1: none); every pass frees its own.
  std::vector<std::int32_t> gathered(static_cast<std::size_t>(layers), -1);
  auto gather = [&](std::int64_t chunk, std::int64_t j, phase when) {
    if (!gathers || j < 0 || j >= layers || gathered[static_cast<std::size_t>(j)] >= 0) return;
    gathered[static_cast<std::size_t>(j)] =
        tb.alloc("layer" + std::to_string(first_layer(chunk) + j) + ".params.gathered",
                 {gather_bytes / gather_dtype}, gather_dtype, gather_bytes, when);
  };
  auto release = [&](std::int64_t j, phase when) {
    if (!gathers || gathered[static_cast<std::size_t>(j)] < 0) return;
    tb.free(gathered[static_cast<std::size_t>(j)], when);
    gathered[static_cast<std::size_t>(j)] = -1;
  };

  // The first stage's embedding output (its dropout mask), per micro-batch: made before the model's first
  // chunk runs forward, freed after that chunk's backward.
  const bool embeds = stage == 0 && !b.basis.first_stage.empty();
  std::vector<std::vector<std::int32_t>> embedded(static_cast<std::size_t>(m));
  auto forward = [&](std::int64_t mb, std::int64_t chunk) {
    if (embeds && chunk == 0)
      for (const auto& e : b.basis.first_stage)
        embedded[static_cast<std::size_t>(mb)].push_back(
            tb.alloc("mb" + std::to_string(mb) + ".", e, phase::forward));
    for (std::int64_t j = 0; j < layers; ++j) {
      for (std::int64_t u = 0; u < units; ++u) gather(chunk, j + u, phase::forward);
      const std::string prefix =
          "mb" + std::to_string(mb) + ".layer" + std::to_string(first_layer(chunk) + j) + ".";
      std::vector<std::int32_t> dropped;
      for (const auto& e : ledger) {
        const auto id = tb.alloc(prefix, e, phase::forward);
        (kept_for_backward(e.role, l.recompute) ? saved[slot(mb, chunk)][static_cast<std::size_t>(j)]
                                                : dropped)
            .push_back(id);
      }
      for (auto id : dropped) tb.free(id, phase::forward);
      release(j, phase::forward);
    }
  };
  auto backward = [&](std::int64_t mb, std::int64_t chunk) {
    for (std::int64_t u = 0; u < units; ++u) gather(chunk, layers - 1 - u, phase::backward);
    if (last && chunk == v - 1) {  // the loss is computed after the model's last chunk
      const std::string prefix = "mb" + std::to_string(mb) + ".";
      std::vector<std::int32_t> ids;
      for (const auto& e : output) ids.push_back(tb.alloc(prefix, e, phase::output));
      for (auto id : ids) tb.free(id, phase::output);
    }
    for (std::int64_t j = layers - 1; j >= 0; --j) {
      for (std::int64_t u = 0; u < units; ++u) gather(chunk, j - u, phase::backward);
      const std::string prefix =
          "mb" + std::to_string(mb) + ".layer" + std::to_string(first_layer(chunk) + j) + ".";
      std::vector<std::int32_t> ids;
      for (const auto& e : working) ids.push_back(tb.alloc(prefix, e, phase::backward));
      for (auto id : ids) tb.free(id, phase::backward);
      for (auto id : saved[slot(mb, chunk)][static_cast<std::size_t>(j)]) tb.free(id, phase::backward);
      release(j, phase::backward);
    }
    if (embeds && chunk == 0)
      for (auto id : embedded[static_cast<std::size_t>(mb)]) tb.free(id, phase::backward);
  };

  // Megatron's schedules: warm-up forwards, then one forward and one backward at a time, then the
  // cool-down. Step i of m * vpp runs micro-batch (i / (pp*vpp)) * pp + i % pp on chunk (i / pp) % vpp
  // (backward: the chunks in reverse); with vpp = 1 that is micro-batch i.
  const std::int64_t total = m * v;
  const std::int64_t warmup = std::min<std::int64_t>(warmup_steps, total);
  auto mb_of = [&](std::int64_t i) { return v == 1 ? i : (i / (pp * v)) * pp + i % pp; };
  auto chunk_of = [&](std::int64_t i, bool fwd) {
    const std::int64_t c = v == 1 ? 0 : (i % (pp * v)) / pp;
    return fwd ? c : v - 1 - c;
  };
  std::int64_t next_f = 0, next_b = 0;
  for (; next_f < warmup; ++next_f) forward(mb_of(next_f), chunk_of(next_f, true));
  while (next_f < total) {
    forward(mb_of(next_f), chunk_of(next_f, true));
    ++next_f;
    backward(mb_of(next_b), chunk_of(next_b, false));
    ++next_b;
  }
  for (; next_b < total; ++next_b) backward(mb_of(next_b), chunk_of(next_b, false));

  // Optimizer step: the gradient norm's partial sums (fused multi-tensor Adam needs no per-parameter
  // temporaries; PyTorch's foreach Adam does, and is not modelled).
  const auto scratch = tb.alloc("optimizer.grad_norm.partials", {2048}, 4, 8192, phase::optimizer);
  tb.free(scratch, phase::optimizer);
  return t;
}

std::string trace_layout_text(const layout& l) {
  return zero_name(l) + ", recompute " + to_string(l.recompute) + ", " + axes_string(l);
}

live_peak trace_peak(const step_trace& t) {
  live_peak peak;
  std::int64_t live = 0;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const auto& e = t.events[i];
    if (e.kind == event_kind::empty_cache) continue;
    const auto bytes = t.tensors[static_cast<std::size_t>(e.tensor)].bytes;
    live += e.kind == event_kind::alloc ? bytes : -bytes;
    if (live > peak.bytes) peak = {live, i};
  }
  return peak;
}

}  // namespace headroom::probes
