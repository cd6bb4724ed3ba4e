// measurement.cpp: measurement records (see measurement.hpp).
#include "measurement.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <ctime>

#include "planner/errors.hpp"
#include "planner/problem_json.hpp"

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
  if (r.verified && r.verified->first_mismatch &&
      static_cast<std::size_t>(*r.verified->first_mismatch) < t.tensors.size())
    m.first_mismatch_tensor = t.tensors[static_cast<std::size_t>(*r.verified->first_mismatch)].name;
  return m;
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json environment_json(const environment& env) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  utsname u{};
  uname(&u);
  nlohmann::json j = {{"tool_version", env.tool_version},
                      {"git_revision", env.git_revision},
                      {"command_line", env.command_line},
                      {"host", host},
                      {"os", std::string(u.sysname) + " " + u.release + " " + u.machine},
                      {"compiler", __VERSION__},
                      {"date_utc", utc_now()},
                      {"gpu", nullptr},
                      {"pci_bus_id", nullptr},
                      {"driver", nullptr},
                      {"cuda_runtime", nullptr},
                      {"nccl", nullptr}};
  if (env.gpu) {
    j["gpu"] = env.gpu->gpu;
    j["pci_bus_id"] = env.gpu->pci_bus_id;
    j["driver"] = env.gpu->driver;
    j["cuda_runtime"] = env.gpu->cuda_runtime;
    if (env.gpu->nccl) j["nccl"] = *env.gpu->nccl;
  }
  return j;
}

namespace {
nlohmann::json opt(const std::optional<std::int64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
}  // namespace

nlohmann::json record_inputs(const problem& p, const layout& l) {
  nlohmann::json j = problem_to_json(p);
  j["tool"] = "headroom";
  j["predicted"] = true;
  j["layout"] = axes_string(l) + ", " + zero_name(l) + ", recompute " + to_string(l.recompute);
  j["layout_spec"] = layout_to_json(l);
  return j;
}

namespace {

std::optional<std::int64_t> opt_i64(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<std::int64_t>();
}

std::int64_t need_i64(const nlohmann::json& j, const char* key, const std::string& where) {
  auto v = opt_i64(j, key);
  if (!v) throw bad_input(where, std::string("missing integer field '") + key + "'");
  return *v;
}

std::string str_or(const nlohmann::json& j, const char* key, const std::string& fallback = "") {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

void read_case(measurement_record& r, const nlohmann::json& inputs, const nlohmann::json& predicted) {
  const std::string w = r.origin + ": inputs";
  r.inputs = problem_from_json(inputs, w);
  if (!inputs.contains("layout_spec"))
    throw bad_input(
        w, "no layout_spec: a record written before headroom.measurement/1.3 cannot be re-predicted");
  r.where = layout_from_json(inputs["layout_spec"], w + ".layout_spec");
  const std::string pw = r.origin + ": predicted";
  r.persistent = need_i64(predicted, "persistent_bytes", pw);
  r.transient = need_i64(predicted, "transient_bytes", pw);
  r.activations = need_i64(predicted, "activation_bytes", pw);
  r.working_set = opt_i64(predicted, "working_set_bytes").value_or(0);
  r.output_phase = opt_i64(predicted, "output_phase_bytes").value_or(0);
}

}  // namespace

measurement_record measurement_from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw bad_input(origin, "not a headroom record (expected a JSON object)");
  measurement_record r;
  r.origin = origin;
  r.raw = j;
  r.schema = str_or(j, "schema");
  const auto slash = r.schema.find('/');
  const std::string family = r.schema.substr(0, slash);
  const std::string major =
      slash == std::string::npos ? "" : r.schema.substr(slash + 1, r.schema.find('.', slash) - slash - 1);
  if (const auto env = j.find("environment"); env != j.end() && env->is_object()) {
    r.gpu = str_or(*env, "gpu");
    r.driver = str_or(*env, "driver");
    r.cuda_runtime = str_or(*env, "cuda_runtime");
    r.nccl = str_or(*env, "nccl");
  }
  if (family == "headroom.measurement") {
    if (major != "1")
      throw bad_input(origin,
                      "unsupported version '" + r.schema + "' (this build reads headroom.measurement/1)");
    r.backend = str_or(j, "backend");
    r.measured = j.value("measured", false);
    r.allocator = str_or(j, "allocator");
    if (r.backend == "pytorch-snapshot") {
      r.kind = "snapshot";
      r.allocator = "pytorch caching allocator (recorded)";
      const auto& devs = j.at("devices");
      if (!devs.is_array() || devs.empty()) throw bad_input(origin, "a snapshot record with no device");
      // find, not operator[]: a const JSON object's operator[] on a missing key reads past its end (a fuzz
      // input with the key misspelt found it).
      const auto peak = devs[0].is_object() ? devs[0].find("peak_reserved") : devs[0].end();
      if (!devs[0].is_object() || peak == devs[0].end())
        throw bad_input(origin + ": devices[0]", "missing peak_reserved");
      r.peak_reserved = need_i64(*peak, "bytes", origin + ": devices[0].peak_reserved");
      r.fragmentation = devs[0].value("fragmentation_at_reserved_peak", 0.0);
      r.out_of_memory = devs[0].contains("ooms") && !devs[0]["ooms"].empty();
      if (j.contains("inputs") && j.contains("predicted")) read_case(r, j["inputs"], j["predicted"]);
      return r;
    }
    if (r.backend != "sim" && r.backend != "cuda")
      throw bad_input(origin, "unknown backend '" + r.backend + "'");
    r.kind = "probe";
    if (!j.contains("inputs") || !j.contains("predicted") || !j.contains("replayed"))
      throw bad_input(origin, "a probe record needs inputs, predicted and replayed");
    read_case(r, j["inputs"], j["predicted"]);
    r.stage = static_cast<int>(opt_i64(j, "stage").value_or(0));
    if (const auto rk = j.find("rank"); rk != j.end() && rk->is_object()) {
      const std::int64_t rank = need_i64(*rk, "rank", origin + ": rank");
      const std::int64_t world = need_i64(*rk, "world_size", origin + ": rank");
      if (world < 1 || world > (1 << 24) || rank < 0 || rank >= world)
        throw bad_input(origin + ": rank", "rank " + std::to_string(rank) + " of world size " +
                                               std::to_string(world) + " is not a placement");
      r.rank = static_cast<int>(rank);
      r.world_size = static_cast<int>(world);
    }
    const auto& rep = j["replayed"];
    r.peak_reserved = need_i64(rep, "peak_reserved_bytes", origin + ": replayed");
    r.peak_allocated = opt_i64(rep, "peak_allocated_bytes").value_or(0);
    r.fragmentation = rep.value("fragmentation", 0.0);
    r.out_of_memory = rep.contains("out_of_memory") && !rep["out_of_memory"].is_null();
    if (const auto d = j.find("device_memory"); d != j.end() && d->is_object()) {
      r.device_used_at_peak = opt_i64(*d, "used_at_reserved_peak_bytes");
      r.used_before_context = opt_i64(*d, "nvml_used_before_context_bytes");
      r.used_after_context = opt_i64(*d, "used_after_context_bytes");
    }
    return r;
  }
  if (family == "headroom.overheads") {
    if (major != "1")
      throw bad_input(origin,
                      "unsupported version '" + r.schema + "' (this build reads headroom.overheads/1)");
    r.kind = "overheads";
    r.backend = "cuda";
    r.measured = true;
    r.fixed_overhead_bytes = need_i64(j, "fixed_overhead_bytes", origin);
    if (const auto l = j.find("layers"); l != j.end() && l->is_array() && !l->empty())
      r.context_bytes = opt_i64((*l)[0], "bytes");
    return r;
  }
  throw bad_input(origin, "not a headroom measurement record (schema '" + r.schema + "')");
}

nlohmann::json measurement_to_json(const measurement& m, const nlohmann::json& inputs,
                                   const environment& env) {
  const auto& p = m.predicted;
  const auto& r = m.replayed;
  nlohmann::json j;
  j["schema"] = measurement_schema;
  j["environment"] = environment_json(env);
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
  j["fixed_overheads"] = {
      {"context_bytes", opt(m.context_bytes)},
      {"nccl_bytes", opt(m.nccl_bytes)},
      {"source", m.context_bytes ? "calibration"
                                 : (m.backend == "sim"
                                        ? "not measured: the sim backend has no CUDA context or NCCL"
                                        : "not measured here: `headroom probe --overheads` measures them")}};
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
  return j;
}

nlohmann::json overheads_to_json(const overheads& o, const nlohmann::json& inputs, const environment& env) {
  nlohmann::json j;
  j["schema"] = overheads_schema;
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
