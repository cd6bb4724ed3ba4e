// emulated_peak.cpp: a stage's step replayed through the caching allocator on an unbounded sim device (see
// emulated_peak.hpp).
#include "probes/cases/emulated_peak.hpp"

#include "planner/units.hpp"
#include "probes/devices/sim_device.hpp"
#include "probes/trace/replay.hpp"
#include "probes/trace/step_trace.hpp"

namespace headroom::probes {

emulated_peak emulate_stage(const problem& p, const layout& l, int stage, const caching_options& options) {
  const step_trace t = build_trace(p, l, stage);
  // 1 PiB: no step this planner prices reaches it, so the replay never runs out of memory.
  sim_device dev(std::int64_t{1} << 50, 2 * mib);
  caching_allocator a(dev, options);
  replay_options o;
  o.release_live = true;
  const replay_result r = replay(t, a, o);
  return {r.requested.bytes, r.allocated.bytes, r.reserved.bytes};
}

}  // namespace headroom::probes
