// measurement.cpp: measurement records (see measurement.hpp).
#include "measurement.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <ctime>

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

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
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
  return m;
}

nlohmann::json measurement_to_json(const measurement& m, const nlohmann::json& inputs,
                                   const environment& env) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  utsname u{};
  uname(&u);
  const auto& p = m.predicted;
  const auto& r = m.replayed;
  nlohmann::json j;
  j["schema"] = measurement_schema;
  j["environment"] = {{"tool_version", env.tool_version},
                      {"git_revision", env.git_revision},
                      {"command_line", env.command_line},
                      {"host", host},
                      {"os", std::string(u.sysname) + " " + u.release + " " + u.machine},
                      {"compiler", __VERSION__},
                      {"date_utc", utc_now()}};
  j["inputs"] = inputs;
  j["backend"] = m.backend;
  j["measured"] = m.backend != "sim";  // a sim replay is an emulation, not a GPU measurement
  j["device"] = m.device;
  j["allocator"] = m.allocator;
  j["stage"] = p.stage;
  j["events"] = m.events;
  j["events_replayed"] = r.events_replayed;
  j["predicted"] = {{"persistent_bytes", p.persistent},     {"transient_bytes", p.transient},
                    {"activation_bytes", p.activations},    {"working_set_bytes", p.working_set},
                    {"output_phase_bytes", p.output_phase}, {"step_peak_bytes", p.step_peak},
                    {"reserve_bytes", p.reserve},           {"total_bytes", p.total},
                    {"capacity_bytes", p.capacity}};
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
  auto opt = [](const std::optional<std::int64_t>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  j["fixed_overheads"] = {
      {"context_bytes", opt(m.context_bytes)},
      {"nccl_bytes", opt(m.nccl_bytes)},
      {"source",
       m.context_bytes ? "calibration" : "not measured: the sim backend has no CUDA context or NCCL"}};
  return j;
}

}  // namespace headroom::probes
