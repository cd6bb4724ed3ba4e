// emulated_peak.hpp: the reserved peak a stage's step reaches through PyTorch's caching-allocator rules,
// replayed on an unbounded simulated device: the uncalibrated prediction of a measured reserved peak
// (`headroom validate`, calibrate/validation.cpp), where the planner's step peak counts requested bytes and
// leaves the allocator's slack to the reserve. The same trace and allocator as `headroom probe replay`
// (probes/trace/step_trace.cpp, probes/allocators/caching_allocator.cpp).
#pragma once

#include <cstdint>

#include "planner/layout.hpp"
#include "probes/allocators/caching_allocator.hpp"

namespace headroom::probes {

struct emulated_peak {
  std::int64_t requested = 0;  // bytes: the most the trace holds at once (the planner's step peak)
  std::int64_t allocated = 0;  // bytes: after the allocator's 512 B and page rounding
  std::int64_t reserved = 0;   // bytes: the most the allocator held from the device
};

// Returns the peaks of stage `stage`'s step trace replayed through the caching allocator with `options`
// on a simulated device with 2 MiB pages and no capacity limit (so a case above its GPU still gets its
// figure), in bytes. Throws bad_input for a case the planner refuses, a stage outside the pipeline, or a step
// that does not fit even that device (no complete figure).
emulated_peak emulate_stage(const problem& p, const layout& l, int stage, const caching_options& options = {});

}  // namespace headroom::probes
