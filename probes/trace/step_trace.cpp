// step_trace.cpp: building the step trace of one rank from the ledger (see step_trace.hpp).
//
// Order: persistent state (one flat buffer per recipe buffer, as ZeRO and Megatron's distributed optimizer
// keep them; a MoE model's in two, the dense part and the routed experts', each sharded over its own data-
// parallel group as buffer_bytes prices them); then the 1F1B schedule of this stage. A forward layer gathers
// its parameters (ZeRO-3, up to `units` layers in flight), allocates every tensor of its kind's ledger (dense
// or MoE, by the layer's global index), and frees what the recompute mode drops. A backward layer allocates
// its kind's working set (recomputed tensors, activation gradients, a MoE layer's dispatcher buffers,
// unsharded parameter gradients before reduce-scatter), then frees it and the layer's saved tensors. The last
// stage runs the output layer (fp32 logits, loss, logits gradient) at the start of each backward. DeepSpeed's
// buckets, where a config set them, are made when DeepSpeed makes them and sized as stage_transient prices
// them. Then the optimizer step.
#include "probes/trace/step_trace.hpp"

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

// Walks one stage's share of Megatron's schedule, emitting the trace's events: warm-up forwards, then one
// forward and one backward at a time, then the cool-down. Step i of m * vpp runs micro-batch
// (i / (pp*vpp)) * pp + i % pp on chunk (i / pp) % vpp (backward: the chunks in reverse); with vpp = 1 that
// is micro-batch i. A model chunk is virtual stage c * pp + stage: its layers and its first layer are
// schedule.hpp's chunk_layers and chunk_first_layer (chunks may differ in size: uneven_chunks); with
// vpp = 1, one chunk starting where the split puts this stage.
//
// One layer's tensors, by the layer's kind: what its forward keeps (the ledger) and its backward working set.
struct layer_kind {
  const std::vector<ledger_entry>* ledger = nullptr;
  std::vector<ledger_entry> working_set;
};

class schedule_walker {
 public:
  schedule_walker(const problem& p, const layout& l, int stage, const breakdown& b, std::int64_t traced,
                  trace_builder& tb)
      : m_p(p), m_l(l), m_b(b), m_tb(tb), m_m(traced), m_pp(l.pp), m_v(l.vpp) {
    for (std::int64_t c = 0; c < m_v; ++c) {
      m_chunk_layers.push_back(chunk_layers(p, l, stage, c));
      m_chunk_first.push_back(chunk_first_layer(p, l, stage, c));
    }
    m_layers = largest_chunk_layers(p, l, stage);
    // The working set of each kind, as estimate() builds the larger of the two (with the heaviest layer's
    // unsharded gradients under ZeRO >= 2).
    m_dense.ledger = &b.basis.ledger;
    m_dense.working_set = b.basis.working_set;
    if (p.model.moe.enabled()) {
      const ledger_shape shape = shape_of(p, l);
      const std::int64_t ugrad = unsharded_layer_grad_bytes(p, b.basis.params, l);
      m_dense.working_set = backward_working_set(p.model, shape, l.recompute, ugrad);
      m_moe.ledger = &b.basis.moe_ledger;
      m_moe.working_set = backward_working_set(p.model, shape, l.recompute, ugrad, true);
    }
    // stage_transient's terms: ZeRO-3 gathers whole layers; DeepSpeed adds its buckets (below).
    const bool sharded = l.zero > 0 && l.shard_degree() > 1;
    m_gathers = sharded && l.zero == 3;
    m_gather_bytes = m_gathers ? zero3_gather_bytes(p, b.basis.params, l) : 0;
    m_units = zero3_units(b.basis.params, l, m_layers);
    const std::int64_t param_bytes = p.precision.bytes_of(buffer_kind::params);
    m_gather_dtype = m_gather_bytes % param_bytes == 0 ? param_bytes : 1;
    m_grad_dtype = p.precision.bytes_of(buffer_kind::grads);
    if (sharded && l.zero < 3) m_reduce_bucket_bytes = saturating_mul(l.reduce_bucket, m_grad_dtype);
    if (m_gathers)
      m_prefetch_excess = std::max<std::int64_t>(
          0, saturating_mul(l.prefetch_bucket, p.precision.gathered_bytes_per_param()) -
                 m_units * m_gather_bytes);
    m_last = stage == l.pp - 1;
    m_embeds = stage == 0 && !b.basis.first_stage.empty();
    m_saved.assign(static_cast<std::size_t>(m_m * m_v),
                   std::vector<std::vector<std::int32_t>>(static_cast<std::size_t>(m_layers)));
    m_gathered.assign(static_cast<std::size_t>(m_layers), -1);
    m_embedded.resize(static_cast<std::size_t>(m_m));
    m_mtp_saved.resize(static_cast<std::size_t>(m_m));
  }

  // Runs the stage's forwards and backwards for the traced micro-batches.
  void run(std::int64_t warmup_steps) {
    const std::int64_t total = m_m * m_v;
    const std::int64_t warmup = std::min<std::int64_t>(warmup_steps, total);
    std::int64_t next_f = 0, next_b = 0;
    for (; next_f < warmup; ++next_f) forward(mb_of(next_f), chunk_of(next_f, true));
    while (next_f < total) {
      forward(mb_of(next_f), chunk_of(next_f, true));
      ++next_f;
      backward(mb_of(next_b), chunk_of(next_b, false));
      ++next_b;
    }
    for (; next_b < total; ++next_b) backward(mb_of(next_b), chunk_of(next_b, false));
    // DeepSpeed ZeRO-1/2 drops the last reduce bucket when the step reduces (_release_ipg_buffers).
    if (m_bucket >= 0) m_tb.free(m_bucket, phase::backward);
  }

 private:
  std::int64_t mb_of(std::int64_t i) const { return m_v == 1 ? i : (i / (m_pp * m_v)) * m_pp + i % m_pp; }
  std::int64_t chunk_of(std::int64_t i, bool fwd) const {
    const std::int64_t c = m_v == 1 ? 0 : (i % (m_pp * m_v)) / m_pp;
    return fwd ? c : m_v - 1 - c;
  }
  // The first layer of chunk `chunk` of this stage (schedule.hpp chunk_first_layer, as estimate() places it).
  std::int64_t first_layer(std::int64_t chunk) const { return m_chunk_first[static_cast<std::size_t>(chunk)]; }
  // The layers of chunk `chunk` of this stage (schedule.hpp chunk_layers).
  std::int64_t layers_in(std::int64_t chunk) const { return m_chunk_layers[static_cast<std::size_t>(chunk)]; }
  // Returns the tensors of layer j of a chunk: the MoE kind's where the model says so.
  const layer_kind& kind_of(std::int64_t chunk, std::int64_t j) const {
    return m_p.model.is_moe_layer(first_layer(chunk) + j) ? m_moe : m_dense;
  }
  std::vector<std::int32_t>& saved(std::int64_t mb, std::int64_t chunk, std::int64_t j) {
    return m_saved[static_cast<std::size_t>(mb * m_v + chunk)][static_cast<std::size_t>(j)];
  }
  std::string prefix(std::int64_t mb, std::int64_t chunk, std::int64_t j) const {
    return "mb" + std::to_string(mb) + ".layer" + std::to_string(first_layer(chunk) + j) + ".";
  }

  // ZeRO-3: gathers layer j of the chunk unless it is alive; every pass frees its own.
  void gather(std::int64_t chunk, std::int64_t j, phase when) {
    if (!m_gathers || j < 0 || j >= layers_in(chunk) || m_gathered[static_cast<std::size_t>(j)] >= 0) return;
    m_gathered[static_cast<std::size_t>(j)] =
        m_tb.alloc("layer" + std::to_string(first_layer(chunk) + j) + ".params.gathered",
                   {m_gather_bytes / m_gather_dtype}, m_gather_dtype, m_gather_bytes, when);
  }
  void release(std::int64_t j, phase when) {
    if (!m_gathers || m_gathered[static_cast<std::size_t>(j)] < 0) return;
    m_tb.free(m_gathered[static_cast<std::size_t>(j)], when);
    m_gathered[static_cast<std::size_t>(j)] = -1;
  }

  // A forward layer gathers its parameters, allocates every ledger tensor and frees what the recompute
  // mode drops. The first stage's embedding output (its dropout mask) is made before the model's first
  // chunk runs forward and freed after that chunk's backward.
  void forward(std::int64_t mb, std::int64_t chunk) {
    const auto prefetched = prefetch(mb, phase::forward);
    if (m_embeds && chunk == 0)
      for (const auto& e : m_b.basis.first_stage)
        m_embedded[static_cast<std::size_t>(mb)].push_back(
            m_tb.alloc("mb" + std::to_string(mb) + ".", e, phase::forward));
    for (std::int64_t j = 0; j < layers_in(chunk); ++j) {
      for (std::int64_t u = 0; u < m_units; ++u) gather(chunk, j + u, phase::forward);
      const std::string name = prefix(mb, chunk, j);
      std::vector<std::int32_t> dropped;
      for (const auto& e : *kind_of(chunk, j).ledger) {
        const auto id = m_tb.alloc(name, e, phase::forward);
        // torchtitan's layer policy recomputes every Nth layer of the chunk, as the planner counts it
        // (planner/layout.hpp, mode_of_layer); the other modes are the same on every layer.
        (kept_for_backward(e, mode_of_layer(m_l.recompute, j), m_p.training.recompute_modules) ? saved(mb, chunk, j)
                                                                                                : dropped)
            .push_back(id);
      }
      for (auto id : dropped) m_tb.free(id, phase::forward);
      release(j, phase::forward);
    }
    if (m_last && chunk == m_v - 1) mtp_forward(mb);
    if (prefetched >= 0) m_tb.free(prefetched, phase::forward);
  }

  // The MTP modules after the decoder's last layer (Megatron's MultiTokenPredictionBlock, on the last stage):
  // each a layer of the last layer's kind and the module's own tensors (mtp_module_tensors), kept by the
  // recompute mode's rule as the planner counts them (estimate.cpp mtp_bytes_per_microbatch).
  const layer_kind& mtp_kind() const { return m_p.model.mtp_layer_is_moe() ? m_moe : m_dense; }
  void mtp_forward(std::int64_t mb) {
    for (int k = 0; k < m_p.model.moe.mtp_layers; ++k) {
      const std::string name = "mb" + std::to_string(mb) + ".mtp" + std::to_string(k) + ".";
      std::vector<std::int32_t> dropped;
      for (const auto* entries : {mtp_kind().ledger, &m_b.basis.mtp_module})
        for (const auto& e : *entries) {
          const auto id = m_tb.alloc(name, e, phase::forward);
          (kept_for_backward(e, m_l.recompute, m_p.training.recompute_modules) ? m_mtp_saved[static_cast<std::size_t>(mb)]
                                                                                : dropped)
              .push_back(id);
        }
      for (auto id : dropped) m_tb.free(id, phase::forward);
    }
  }
  // Their backward, after the loss and before the decoder's layers: a working set each, then their tensors.
  void mtp_backward(std::int64_t mb) {
    auto& kept = m_mtp_saved[static_cast<std::size_t>(mb)];
    for (int k = 0; k < m_p.model.moe.mtp_layers; ++k) {
      const std::string name = "mb" + std::to_string(mb) + ".mtp" + std::to_string(k) + ".";
      std::vector<std::int32_t> ids;
      for (const auto& e : mtp_kind().working_set) ids.push_back(m_tb.alloc(name, e, phase::backward));
      for (auto id : ids) m_tb.free(id, phase::backward);
    }
    for (auto id : kept) m_tb.free(id, phase::backward);
    kept.clear();
  }

  // The loss after the model's last chunk; then each layer's working set, allocated and freed, and the
  // layer's saved tensors freed.
  void backward(std::int64_t mb, std::int64_t chunk) {
    // DeepSpeed ZeRO-1/2 makes its reduce buckets (both copies under overlap_comm) as each backward starts,
    // dropping the previous ones first (stage_1_and_2.py backward(): `self.ipg_buffer = []`, then
    // torch.empty(reduce_bucket_size) per copy). Its pipeline engine makes one only when the step reduces
    // (reduce_gradients(pipeline_parallel=True)); the planner prices it alive at the peak either way.
    if (m_reduce_bucket_bytes > 0) {
      if (m_bucket >= 0) m_tb.free(m_bucket, phase::backward);
      m_bucket = m_tb.alloc("mb" + std::to_string(mb) + ".zero.reduce_bucket",
                            {m_reduce_bucket_bytes / m_grad_dtype}, m_grad_dtype, m_reduce_bucket_bytes,
                            phase::backward);
    }
    const auto prefetched = prefetch(mb, phase::backward);
    for (std::int64_t u = 0; u < m_units; ++u) gather(chunk, layers_in(chunk) - 1 - u, phase::backward);
    if (m_last && chunk == m_v - 1) {
      const std::string name = "mb" + std::to_string(mb) + ".";
      // The loss in its order, as output_phase_peak counts it (walk_output_phase).
      const auto& loss = m_b.basis.output_phase;
      std::vector<std::int32_t> ids(loss.size(), -1);
      walk_output_phase(
          loss, [&](std::size_t i) { ids[i] = m_tb.alloc(name, loss[i], phase::output); },
          [&](std::size_t i) { m_tb.free(ids[i], phase::output); });
      mtp_backward(mb);
    }
    for (std::int64_t j = layers_in(chunk) - 1; j >= 0; --j) {
      for (std::int64_t u = 0; u < m_units; ++u) gather(chunk, j - u, phase::backward);
      const std::string name = prefix(mb, chunk, j);
      std::vector<std::int32_t> ids;
      for (const auto& e : kind_of(chunk, j).working_set) ids.push_back(m_tb.alloc(name, e, phase::backward));
      for (auto id : ids) m_tb.free(id, phase::backward);
      for (auto id : saved(mb, chunk, j)) m_tb.free(id, phase::backward);
      release(j, phase::backward);
    }
    if (m_embeds && chunk == 0)
      for (auto id : m_embedded[static_cast<std::size_t>(mb)]) m_tb.free(id, phase::backward);
    if (prefetched >= 0) m_tb.free(prefetched, phase::backward);
  }

  // DeepSpeed ZeRO-3 prefetches parameters up to its prefetch bucket ahead of use; the planner prices the
  // larger of that bucket and the whole layers in flight (stage_transient). Where the bucket holds more, the
  // part beyond the layers in flight is one tensor alive through the pass. Returns its id, or -1.
  std::int32_t prefetch(std::int64_t mb, phase when) {
    if (m_prefetch_excess <= 0) return -1;
    return m_tb.alloc("mb" + std::to_string(mb) + ".zero3.prefetch_bucket", {m_prefetch_excess}, 1,
                      m_prefetch_excess, when);
  }

  const problem& m_p;
  const layout& m_l;
  const breakdown& m_b;
  layer_kind m_dense, m_moe;
  trace_builder& m_tb;
  std::int64_t m_m, m_pp, m_v;
  std::vector<std::int64_t> m_chunk_layers, m_chunk_first;  // per model chunk of this stage
  std::int64_t m_layers = 0, m_gather_bytes = 0, m_gather_dtype = 1, m_units = 0;
  std::int64_t m_grad_dtype = 2, m_reduce_bucket_bytes = 0, m_prefetch_excess = 0;
  std::int32_t m_bucket = -1;  // the ZeRO-1/2 reduce bucket alive, or -1
  bool m_gathers = false, m_last = false, m_embeds = false;
  std::vector<std::vector<std::vector<std::int32_t>>> m_saved;  // per (micro-batch, chunk), per layer
  std::vector<std::int32_t> m_gathered;                         // ZeRO-3 gathers alive, per layer; -1: none
  std::vector<std::vector<std::int32_t>> m_embedded;            // per micro-batch
  std::vector<std::vector<std::int32_t>> m_mtp_saved;           // per micro-batch: the MTP modules' kept tensors
};

// Persistent state: the rank's shard of every recipe buffer that lives on the GPU. A MoE model's buffer is
// two tensors, as Megatron-Core keeps the dense and the expert parameters in separate buffers (its
// DistributedDataParallel's `buffers` and `expert_parallel_buffers`, distributed_data_parallel.py), each
// sharded over its own group: the dense part over dp * cp, the experts' over the expert data-parallel ranks
// (buffer_bytes rounds each part on its own, so the experts' part priced alone and the rest sum to the
// planner's figure).
void allocate_state(const problem& p, const layout& l, const stage_breakdown& sb, trace_builder& tb) {
  rank_params experts_only;
  experts_only.expert = sb.expert_params_on_rank;
  for (std::size_t i = 0; i < p.precision.buffers.size() && i < max_recipe_buffers; ++i) {
    if (sb.buffer_bytes[i] == 0) continue;
    const auto& buf = p.precision.buffers[i];
    auto add = [&](const std::string& name, std::int64_t bytes) {
      if (bytes == 0) return;
      const std::int64_t dtype = bytes % buf.bytes == 0 ? buf.bytes : 1;
      tb.alloc(name, {bytes / dtype}, dtype, bytes, phase::state);
    };
    if (sb.expert_params_on_rank == 0) {
      add("state." + buf.name, sb.buffer_bytes[i]);
      continue;
    }
    const std::int64_t expert_bytes = buffer_bytes(p.precision, i, l, experts_only);
    add("state." + buf.name + ".dense", sb.buffer_bytes[i] - expert_bytes);
    add("state." + buf.name + ".experts", expert_bytes);
  }
}

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

  step_trace t;
  t.model = p.model.name;
  t.layout_text = trace_layout_text(l);
  t.stage = stage;
  t.stages = l.pp;
  // Micro-batches to trace: enough to reach the schedule's steady state (one forward after the warm-up).
  // Megatron's interleaved schedule runs pp micro-batches per round, so it needs M divisible by pp: the
  // planner's schedule_error() (estimate() above refuses by it too).
  if (auto e = schedule_error(p, l)) throw *e;
  const std::int64_t M = b.basis.microbatches, pp = l.pp, v = l.vpp;
  const std::int64_t warmup_steps = warmup_chunks(l, stage);
  std::int64_t m = std::min<std::int64_t>(M, pp - stage + 1);
  if (v > 1) m = std::min<std::int64_t>(M, pp * ((warmup_steps + 2 + pp * v - 1) / (pp * v)));
  // Chunks that differ in bytes (sizes, or dense and MoE layers) may peak later in the steady state, where
  // the planner looks over two rounds (schedule.hpp peak_chunk_copies): trace those forwards too.
  if (v > 1 && (uneven_chunks(p, l) || p.model.moe.enabled()))
    m = std::min<std::int64_t>(M, pp * ((warmup_steps + 2 * pp * v + 1 + pp * v - 1) / (pp * v)));
  t.microbatches_per_step = M;
  t.microbatches_traced = m;
  trace_builder tb(t);

  // The library workspaces (cuBLAS, TransformerEngine) come first: the first GEMM allocates them through the
  // caching allocator and they stay (device_spec::allocator_workspaces, planner/workspaces.hpp).
  if (p.device.allocator_workspaces > 0)
    tb.alloc("library_workspaces", {p.device.allocator_workspaces}, 1, p.device.allocator_workspaces,
             phase::state);
  allocate_state(p, l, sb, tb);
  // DeepSpeed ZeRO-3 makes its one reduce bucket with the optimizer and keeps it (stage3.py __init__:
  // __ipg_bucket_flat_buffer = torch.empty(reduce_bucket_size) under contiguous_gradients).
  if (l.zero == 3 && l.shard_degree() > 1 && l.reduce_bucket > 0) {
    const std::int64_t dtype = p.precision.bytes_of(buffer_kind::grads);
    const std::int64_t bytes = saturating_mul(l.reduce_bucket, dtype);
    tb.alloc("state.zero3.reduce_bucket", {bytes / dtype}, dtype, bytes, phase::state);
  }
  // The same tensor lists the planner summed, ordered in time by the schedule.
  schedule_walker(p, l, stage, b, m, tb).run(warmup_steps);

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
