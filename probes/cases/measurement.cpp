// measurement.cpp: measurement records (see measurement.hpp).
#include "probes/cases/measurement.hpp"

#include "planner/errors.hpp"
#include "probes/records/envelope.hpp"
#include "probes/trace/timeline_svg.hpp"

namespace headroom::probes {

namespace {
event_ref ref_of(const step_trace& t, std::size_t i) {
  const auto& e = t.events[i];
  const auto& x = t.tensors[static_cast<std::size_t>(e.tensor)];
  return {i, x.name, to_string(e.when), x.bytes};
}

nlohmann::json ref_json(const event_ref& r) {
  return {{"event", r.index}, {"tensor", r.tensor}, {"phase", r.phase}, {"bytes", r.bytes}};
}

}  // namespace

measurement measure(const step_trace& t, const stage_breakdown& predicted, const replay_result& r,
                    const std::string& backend, const std::string& device, const std::string& allocator) {
  measurement m;
  m.backend = backend;
  m.device = device;
  m.allocator = allocator;
  m.predicted = predicted;
  m.replayed = r;
  m.events = t.events.size();
  if (r.events_replayed > 0) {
    m.peak_reserved_at = ref_of(t, r.reserved.event);
    m.peak_allocated_at = ref_of(t, r.allocated.event);
  }
  if (r.oom_event) m.oom_at = ref_of(t, *r.oom_event);
  // The record carries what the report draws: the timeline in at most 400 columns.
  if (!r.timeline.empty()) m.timeline = reduce_timeline(t, r, 400);
  if (r.verified && r.verified->first_mismatch &&
      static_cast<std::size_t>(*r.verified->first_mismatch) < t.tensors.size())
    m.first_mismatch_tensor = t.tensors[static_cast<std::size_t>(*r.verified->first_mismatch)].name;
  return m;
}

namespace {
nlohmann::json opt(const std::optional<std::int64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
}  // namespace

nlohmann::json measurement_to_json(const measurement& m, const nlohmann::json& inputs,
                                   const environment& env) {
  const auto& p = m.predicted;
  const auto& r = m.replayed;
  nlohmann::json j = records::envelope(records::kind::measurement);
  j["environment"] = environment_json(env);
  j["inputs"] = inputs;
  j["backend"] = m.backend;
  j["measured"] = m.backend != "sim";  // a sim replay is an emulation, not a GPU measurement
  j["device"] = m.device;
  j["allocator"] = m.allocator;
  j["stage"] = p.stage;
  j["events"] = m.events;
  j["events_replayed"] = r.events_replayed;
  j["predicted"] = predicted_block(p);
  j["replayed"] = {{"peak_requested_bytes", r.requested.bytes},
                   {"peak_allocated_bytes", r.allocated.bytes},
                   {"peak_reserved_bytes", r.reserved.bytes},
                   {"device_peak_bytes", r.device_peak},
                   {"fragmentation", r.fragmentation()},
                   {"alloc_retries", r.retries},
                   {"implied_reserve_bytes", m.implied_reserve()},
                   {"peak_reserved_at", ref_json(m.peak_reserved_at)},
                   {"peak_allocated_at", ref_json(m.peak_allocated_at)},
                   {"out_of_memory", m.oom_at ? ref_json(*m.oom_at) : nlohmann::json(nullptr)}};
  j["fixed_overheads"] = {
      {"context_bytes", opt(m.context_bytes)},
      {"nccl_bytes", opt(m.nccl_bytes)},
      {"source", m.context_bytes ? "calibration"
                                 : (m.backend == "sim"
                                        ? "not measured: the sim backend has no CUDA context or NCCL"
                                        : "not measured here: `headroom probe overheads` measures them")}};
  if (m.truth) {
    const auto& t = *m.truth;
    nlohmann::json d = {{"nvml_used_before_context_bytes", opt(t.before_context)},
                        {"used_after_context_bytes", t.after_context},
                        {"card_total_bytes", t.card_total},
                        {"cap_bytes", opt(t.cap)},
                        {"used_at_reserved_peak_bytes", opt(r.device_used_at_peak)},
                        {"used_max_sampled_bytes", opt(r.device_used_max)},
                        {"used_minus_reserved_at_peak_bytes", nullptr}};
    if (r.device_used_at_peak)
      d["used_minus_reserved_at_peak_bytes"] = *r.device_used_at_peak - r.reserved.bytes;
    j["device_memory"] = d;
  } else {
    j["device_memory"] = nullptr;
  }
  if (r.verified) {
    const auto& v = *r.verified;
    j["verification"] = {{"blocks_filled", v.blocks_filled},       {"blocks_verified", v.blocks_verified},
                         {"bytes_filled", v.bytes_filled},         {"bytes_verified", v.bytes_verified},
                         {"mismatched_words", v.mismatched_words}, {"first_mismatch_tensor", nullptr}};
    if (m.first_mismatch_tensor) j["verification"]["first_mismatch_tensor"] = *m.first_mismatch_tensor;
  } else {
    j["verification"] = nullptr;
  }
  if (m.throughput)
    j["throughput"] = {{"fill_verify_gbs", m.throughput->fill_verify_gbs},
                       {"copy_gbs", m.throughput->copy_gbs},
                       {"ratio", m.throughput->ratio()},
                       {"buffer_bytes", m.throughput->bytes}};
  else
    j["throughput"] = nullptr;
  if (m.cleanup)
    j["cleanup"] = {{"free_before_bytes", m.cleanup->before.free},
                    {"free_after_bytes", m.cleanup->after.free},
                    {"missing_bytes", m.cleanup->missing()},
                    {"returned", m.cleanup->returned()}};
  else
    j["cleanup"] = nullptr;
  if (m.pool)
    j["driver_pool"] = {{"reserved_high_bytes", m.pool->reserved_high},
                        {"used_high_bytes", m.pool->used_high}};
  else
    j["driver_pool"] = nullptr;
  j["timeline"] = m.timeline ? records::timeline_to_json(*m.timeline) : nlohmann::json(nullptr);
  return j;
}

nlohmann::json overheads_to_json(const overheads& o, const nlohmann::json& inputs, const environment& env) {
  nlohmann::json j = records::envelope(records::kind::overheads);
  j["environment"] = environment_json(env);
  j["inputs"] = inputs;
  j["backend"] = "cuda";
  j["measured"] = true;
  j["module_loading"] = o.module_loading;
  j["gemm"] = {{"m", o.shapes.m}, {"n", o.shapes.n}, {"k", o.shapes.k}, {"origin", o.shapes.gemm_origin}};
  j["bucket_bytes"] = o.shapes.bucket_bytes;
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : o.layers)
    layers.push_back({{"name", l.name},
                      {"bytes", opt(l.bytes)},
                      {"device_used_after_bytes", l.used_after},
                      {"overhead", l.library},
                      {"note", l.note}});
  j["layers"] = layers;
  nlohmann::json by_mode = {
      {o.module_loading, opt(o.layers.empty() ? std::nullopt : o.layers.front().bytes)}};
  if (!o.other_module_loading.empty())
    by_mode[o.other_module_loading] =
        o.context_other_mode ? opt(o.context_other_mode->bytes) : nlohmann::json(nullptr);
  j["context_bytes_by_module_loading"] = by_mode;
  j["context_other_mode_note"] =
      o.context_other_mode ? nlohmann::json(o.context_other_mode->note) : nlohmann::json(nullptr);
  j["fixed_overhead_bytes"] = o.fixed_bytes();
  return j;
}

}  // namespace headroom::probes
