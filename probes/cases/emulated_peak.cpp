// emulated_peak.cpp: a stage's step replayed through the caching allocator on an unbounded sim device (see
// emulated_peak.hpp).
#include "probes/cases/emulated_peak.hpp"

#include "planner/errors.hpp"
#include "planner/units.hpp"
#include "probes/devices/sim_device.hpp"
#include "probes/trace/replay.hpp"
#include "probes/trace/step_trace.hpp"

namespace headroom::probes {

emulated_peak emulate_stage(const problem& p, const layout& l, int stage, const caching_options& options) {
  const step_trace t = build_trace(p, l, stage);
  // 1 PiB: far above any GPU, so a case above its own GPU still gets its figure.
  sim_device dev(std::int64_t{1} << 50, 2 * mib);
  caching_allocator a(dev, options);
  replay_options o;
  o.release_live = true;
  const replay_result r = replay(t, a, o);
  // A step past even this device (a hostile case) has no complete figure: refused, never cut short.
  if (r.oom_event)
    throw bad_input("emulation", "the step needs more than the simulated device's 1 PiB: no allocator figure");
  return {r.requested.bytes, r.allocated.bytes, r.reserved.bytes};
}

}  // namespace headroom::probes
