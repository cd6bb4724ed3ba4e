// measurement_record.cpp: reading records back, and the environment and inputs blocks
// (measurement_record.hpp).
#include "probes/records/measurement_record.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include "planner/errors.hpp"
#include "probes/records/envelope.hpp"
#include "probes/records/schema.hpp"

namespace headroom::probes {

nlohmann::json environment_json(const environment& env) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  utsname u{};
  uname(&u);
  nlohmann::json j = {{"command_line", env.command_line},
                      {"host", host},
                      {"os", std::string(u.sysname) + " " + u.release + " " + u.machine},
                      {"compiler", __VERSION__},
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

nlohmann::json predicted_block(const stage_breakdown& w) {
  return {{"persistent_bytes", w.persistent},     {"transient_bytes", w.transient},
          {"activation_bytes", w.activations},    {"working_set_bytes", w.working_set},
          {"output_phase_bytes", w.output_phase}, {"step_peak_bytes", w.step_peak},
          {"reserve_bytes", w.reserve},           {"total_bytes", w.total},
          {"capacity_bytes", w.capacity}};
}

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

// Returns a memory figure, in bytes, when present: refused unless between 0 and max_record_bytes.
std::optional<std::int64_t> opt_bytes(const nlohmann::json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(max_record_bytes))
    throw bad_input(where, std::string("'") + key + "' is larger than any GPU's memory (16 TiB)");
  const auto v = opt_i64(j, key);
  if (!v) throw bad_input(where, std::string("'") + key + "' must be an integer number of bytes");
  if (*v < 0 || *v > max_record_bytes)
    throw bad_input(where, std::string("'") + key + "' = " + std::to_string(*v) +
                               " bytes is not a memory figure a GPU produces (0 to 16 TiB)");
  return v;
}

std::int64_t need_bytes(const nlohmann::json& j, const char* key, const std::string& where) {
  auto v = opt_bytes(j, key, where);
  if (!v) throw bad_input(where, std::string("missing integer field '") + key + "'");
  return *v;
}

// Returns a fraction in [0, 1] (0 when absent).
double fraction_or_zero(const nlohmann::json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return 0;
  if (!it->is_number()) throw bad_input(where, std::string("'") + key + "' must be a number");
  const double v = it->get<double>();
  if (!(v >= 0 && v <= 1)) throw bad_input(where, std::string("'") + key + "' must be a fraction in [0, 1]");
  return v;
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

// An observation (calibrate/observations.hpp): a figure a team measured, of one kind, on a stated case.
measurement_record read_observation(measurement_record& r, const nlohmann::json& j) {
  const std::string& origin = r.origin;
  r.kind = "observation";
  r.measured = true;
  const auto o = j.find("observation");
  if (o == j.end() || !o->is_object()) throw bad_input(origin, "an observation record needs \"observation\"");
  r.figure = str_or(*o, "figure");
  const std::int64_t bytes = need_bytes(*o, "bytes", origin + ": observation");
  if (r.figure == "device_used")
    r.device_used_at_peak = bytes;
  else if (r.figure == "reserved_peak")
    r.peak_reserved = bytes;
  else if (r.figure == "allocated_peak")
    r.peak_allocated = bytes;
  else
    throw bad_input(origin + ": observation.figure",
                    "must be device_used, reserved_peak or allocated_peak, got '" + r.figure.substr(0, 40) + "'");
  if (!j.contains("inputs") || !j.contains("predicted"))
    throw bad_input(origin, "an observation record needs inputs and predicted");
  read_case(r, j["inputs"], j["predicted"]);
  r.stage = static_cast<int>(opt_i64(j, "stage").value_or(0));
  r.raw["observation"] = *o;  // its source and the figure as given, for compare and report
  return r;
}

}  // namespace

measurement_record measurement_from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw bad_input(origin, "not a headroom record (expected a JSON object)");
  measurement_record r;
  r.origin = origin;
  // Only what compare reads (calibrate/compare.cpp): a record's whole document (its timeline, its inputs)
  // held for each of 10,000 records was 1.6 GB.
  r.raw = nlohmann::json::object();
  for (const char* k : {"module_loading", "source", "layers"})
    if (const auto it = j.find(k); it != j.end()) r.raw[k] = *it;
  if (const auto in = j.find("inputs"); in != j.end() && in->is_object())
    if (const auto l = in->find("layout"); l != in->end()) r.raw["inputs"]["layout"] = *l;
  r.schema = str_or(j, "schema");
  const auto version = records::parse(r.schema);
  const std::string family = version ? version->kind : "";
  if (const auto env = j.find("environment"); env != j.end() && env->is_object()) {
    r.gpu = str_or(*env, "gpu");
    r.driver = str_or(*env, "driver");
    r.cuda_runtime = str_or(*env, "cuda_runtime");
    r.nccl = str_or(*env, "nccl");
    r.raw["environment"] = *env;  // torch and PYTORCH_CUDA_ALLOC_CONF, which compare names when they changed
  }
  if (family == "measurement") {
    records::require(j, records::kind::measurement, origin);
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
      r.peak_reserved = need_bytes(*peak, "bytes", origin + ": devices[0].peak_reserved");
      r.fragmentation = fraction_or_zero(devs[0], "fragmentation_at_reserved_peak", origin + ": devices[0]");
      r.out_of_memory = devs[0].contains("ooms") && !devs[0]["ooms"].empty();
      if (const auto c = devs[0].find("counts"); c != devs[0].end() && c->is_object())
        r.raw["devices"] = nlohmann::json::array({{{"counts", *c}}});  // segments created, for compare
      if (j.contains("inputs") && j.contains("predicted")) read_case(r, j["inputs"], j["predicted"]);
      // The report's view of the snapshot: optional (absent or null), but one that is there and not an object
      // is a damaged record (every reader refuses it, not only the report that would draw it).
      if (const auto v = j.find("snapshot_view"); v != j.end() && !v->is_null()) {
        if (!v->is_object()) throw bad_input(origin + ": snapshot_view", "must be an object");
        r.snapshot_view = *v;
      }
      return r;
    }
    if (r.backend == "observation") return read_observation(r, j);
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
    if (!rep.is_object()) throw bad_input(origin + ": replayed", "must be an object");
    r.peak_reserved = need_bytes(rep, "peak_reserved_bytes", origin + ": replayed");
    r.peak_allocated = opt_bytes(rep, "peak_allocated_bytes", origin + ": replayed").value_or(0);
    if (r.peak_allocated > r.peak_reserved)
      throw bad_input(origin + ": replayed", "peak_allocated_bytes exceeds peak_reserved_bytes: the allocator "
                                             "cannot hand out more than it reserved");
    r.fragmentation = fraction_or_zero(rep, "fragmentation", origin + ": replayed");
    r.out_of_memory = rep.contains("out_of_memory") && !rep["out_of_memory"].is_null();
    if (const auto d = j.find("device_memory"); d != j.end() && d->is_object()) {
      const std::string w = origin + ": device_memory";
      r.device_used_at_peak = opt_bytes(*d, "used_at_reserved_peak_bytes", w);
      r.used_before_context = opt_bytes(*d, "nvml_used_before_context_bytes", w);
      r.used_after_context = opt_bytes(*d, "used_after_context_bytes", w);
    }
    if (const auto t = j.find("timeline"); t != j.end() && !t->is_null())
      r.timeline = records::timeline_from_json(*t, origin);
    return r;
  }
  if (family == "overheads") {
    records::require(j, records::kind::overheads, origin);
    r.kind = "overheads";
    r.backend = "cuda";
    r.measured = true;
    r.fixed_overhead_bytes = need_bytes(j, "fixed_overhead_bytes", origin);
    if (const auto l = j.find("layers"); l != j.end() && l->is_array() && !l->empty() && (*l)[0].is_object())
      r.context_bytes = opt_bytes((*l)[0], "bytes", origin + ": layers[0]");
    return r;
  }
  throw bad_input(origin, "not a headroom measurement record (schema '" + r.schema.substr(0, 80) + "')");
}

}  // namespace headroom::probes
