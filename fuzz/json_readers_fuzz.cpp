// json_readers_fuzz.cpp: libFuzzer target for every JSON reader (model preset / model file, HuggingFace
// config, recipe, problem and layout, step trace, measurement record, calibration file). Each input goes
// through the depth- and size-capped parser and then each reader; whatever a reader accepts is used, and
// invariants beyond "no crash" are checked: a plan's total is the sum of its terms, "fits" means the
// decisive total is within the capacity, and no byte count is negative. A violation aborts (a finding).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "calibrate/calibration.hpp"
#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "planner/model_files.hpp"
#include "planner/problem_json.hpp"
#include "probes/caching_allocator.hpp"
#include "probes/measurement.hpp"
#include "probes/replay.hpp"
#include "probes/sim_device.hpp"
#include "probes/trace_io.hpp"

namespace {

using namespace headroom;

void require(bool ok) {
  if (!ok) std::abort();
}

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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::json j;
  try {
    j = parse_json_text(text, "fuzz");
  } catch (const bad_input&) {
    return 0;
  }
  attempt([&] {
    problem p = default_problem(model_from_json(j, "fuzz"));
    layout l;
    l.gpus = 8;
    l.zero = 3;
    if (!layout_error(p, l)) check_plan(p, l);
  });
  attempt([&] { recipe_from_json(j, "fuzz"); });
  attempt([&] { model_from_hf_config(j, "fuzz"); });
  attempt([&] {
    if (!j.is_object() || !j.contains("problem") || !j.contains("layout")) return;
    const problem p = problem_from_json(j["problem"], "fuzz.problem");
    const layout l = layout_from_json(j["layout"], "fuzz.layout");
    if (!layout_error(p, l)) check_plan(p, l);
  });
  attempt([&] {
    const probes::step_trace t = probes::trace_from_json(j, "fuzz");
    if (t.events.size() > 100000) return;
    probes::sim_device dev(std::int64_t{1} << 40, 2 << 20);
    probes::caching_allocator a(dev, {});
    const auto r = probes::replay(t, a, false);
    require(r.requested.bytes >= 0 && r.reserved.bytes >= r.allocated.bytes - 0);
  });
  attempt([&] { probes::measurement_from_json(j, "fuzz"); });
  attempt([&] { calibrate::calibration_from_json(j, "fuzz"); });
  return 0;
}
