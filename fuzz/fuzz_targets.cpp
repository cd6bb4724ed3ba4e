// fuzz_targets.cpp: the body of every fuzz target, one per reader (see fuzz_targets.hpp). Each input goes
// through the depth- and size-capped parser (or the snapshot reader, under small limits so that a pickle
// expanding through its memo meets them at once) and then the target's reader; whatever it accepts is used,
// and invariants beyond "no crash" are checked: a plan's total is the sum of its terms, "fits" means the
// decisive total is within the capacity, no byte count is negative, a replay's reserved bytes cover its
// allocated ones, a snapshot holds no more records than its limit. The targets over the launcher's
// variables, printable strings and output files are in launcher_target.cpp, printable_target.cpp and
// outputs_target.cpp; those over the launch importers in imports_target.cpp. A violation aborts (a finding).
#include "fuzz_targets.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "calibrate/calibration.hpp"
#include "fuzz_internal.hpp"
#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "planner/model_files.hpp"
#include "planner/problem_json.hpp"
#include "probes/allocators/caching_allocator.hpp"
#include "probes/cases/measurement.hpp"
#include "probes/devices/sim_device.hpp"
#include "probes/snapshots/snapshot.hpp"
#include "probes/snapshots/snapshot_record.hpp"
#include "probes/snapshots/what_if.hpp"
#include "probes/trace/replay.hpp"
#include "probes/trace/trace_io.hpp"

namespace headroom::fuzz {
namespace {

void check_plan(const problem& p, const layout& l) {
  const breakdown b = estimate(p, l);
  for (const auto& s : b.stages) {
    for (std::int64_t v : {s.params, s.grads, s.master, s.optimizer, s.transient, s.activations, s.reserve,
                           s.working_set, s.output_phase})
      require(v >= 0);
    require(s.total == s.state + s.activations + s.reserve);
    require(s.state == s.persistent + s.transient);
    require(s.fits == (s.decisive_total() <= s.capacity));
  }
}

template <class F>
void attempt(F&& f) {
  try {
    f();
  } catch (const bad_input&) {
  } catch (const nlohmann::json::exception&) {
    // Type errors inside a reader are reported as bad input by the CLI's one handler.
  }
}

// Small limits: a memo-expanding pickle in the corpus meets them in microseconds, and what is accepted
// stays cheap to replay.
probes::snapshot_limits small_limits() {
  probes::snapshot_limits l;
  l.max_pickle_bytes = l.max_json_bytes = std::uintmax_t{1} << 20;
  l.max_records = 4096;
  l.max_fields = 65536;
  return l;
}

void fuzz_snapshot(std::string_view bytes) {
  using namespace probes;
  try {
    static const snapshot_limits limits = small_limits();
    const torch_snapshot s = parse_snapshot(bytes, "fuzz", limits);
    std::size_t records = s.segments.size();
    for (const auto& g : s.segments) records += g.blocks.size();
    for (const auto& d : s.devices) records += d.size();
    require(records <= limits.max_records);
    const snap_summary sum = summarise(s);
    (void)sum;
    for (int d = 0; d < static_cast<int>(s.devices.size()) && d < 2; ++d) {
      const snapshot_trace t = snapshot_to_trace(s, d);
      if (t.trace.events.size() < 20000) {
        const snapshot_replay r = replay_snapshot(s, t, recorded_options(s), std::int64_t{1} << 34, true);
        require(r.peak_reserved >= r.peak_allocated && r.peak_allocated >= r.peak_requested &&
                r.peak_requested >= 0);
        caching_options exp;
        exp.expandable_segments = true;
        const snapshot_replay e = replay_snapshot(s, t, exp, std::int64_t{64} << 20, false);
        require(e.peak_reserved >= e.peak_allocated && e.peak_allocated >= e.peak_requested);
      }
    }
  } catch (const bad_input&) {
  }
}

}  // namespace

const std::vector<std::string>& fuzz_target_names() {
  static const std::vector<std::string> names = {
      "model",       "hf_config",     "recipe",           "problem",          "trace",
      "measurement", "calibration",   "snapshot",         "launcher",         "printable",
      "outputs",     "megatron_args", "deepspeed_config", "torchtitan_config", "observations",
      "sidecar"};
  return names;
}

int fuzz_one(std::string_view target, const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The targets that read the bytes themselves; the others read them as JSON first.
  static const std::map<std::string_view, void (*)(std::string_view)> byte_targets = {
      {"snapshot", fuzz_snapshot},
      {"launcher", fuzz_launcher},
      {"printable", fuzz_printable},
      {"outputs", fuzz_outputs},
      {"megatron_args", fuzz_megatron_args},
      {"deepspeed_config", fuzz_deepspeed_config},
      {"torchtitan_config", fuzz_torchtitan_config},
      {"observations", fuzz_observations},
      {"sidecar", fuzz_sidecar}};
  if (const auto it = byte_targets.find(target); it != byte_targets.end()) {
    it->second(bytes);
    return 0;
  }
  const std::string text(bytes);
  nlohmann::json j;
  try {
    j = parse_json_text(text, "fuzz");
  } catch (const bad_input&) {
    return 0;
  }
  if (target == "model")
    attempt([&] {
      problem p = default_problem(model_from_json(j, "fuzz"));
      layout l;
      l.gpus = 8;
      l.zero = 3;
      if (!layout_error(p, l)) check_plan(p, l);
    });
  if (target == "recipe") attempt([&] { recipe_from_json(j, "fuzz"); });
  if (target == "hf_config") attempt([&] { model_from_hf_config(j, "fuzz"); });
  if (target == "problem")
    attempt([&] {
      if (!j.is_object() || !j.contains("problem") || !j.contains("layout")) return;
      const problem p = problem_from_json(j["problem"], "fuzz.problem");
      const layout l = layout_from_json(j["layout"], "fuzz.layout");
      if (!layout_error(p, l)) check_plan(p, l);
    });
  if (target == "trace")
    attempt([&] {
      const probes::step_trace t = probes::trace_from_json(j, "fuzz");
      if (t.events.size() > 100000) return;
      // Both caching policies, on an ample device and on a tight one (the out-of-memory retry, and with
      // expandable segments the unmapping of free pages, run there).
      for (const bool expandable : {false, true})
        for (const std::int64_t capacity : {std::int64_t{1} << 40, std::int64_t{256} << 20}) {
          probes::sim_device dev(capacity, 2 << 20);
          probes::caching_options o;
          o.expandable_segments = expandable;
          probes::caching_allocator a(dev, o);
          const auto r = probes::replay(t, a, false);
          require(r.requested.bytes >= 0 && r.reserved.bytes >= r.allocated.bytes);
          require(a.stats().reserved == dev.used());
        }
    });
  if (target == "measurement") attempt([&] { probes::measurement_from_json(j, "fuzz"); });
  if (target == "calibration") attempt([&] { calibrate::calibration_from_json(j, "fuzz"); });
  return 0;
}

}  // namespace headroom::fuzz
