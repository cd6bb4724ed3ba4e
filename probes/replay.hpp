// replay.hpp: replaying a step trace through an allocator policy over a device, recording requested,
// allocated and reserved bytes after every event, the peaks, and where an out-of-memory happened.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "allocator.hpp"
#include "step_trace.hpp"

namespace headroom::probes {

struct replay_point {
  std::int64_t requested, allocated, reserved;
};

struct replay_peak {
  std::int64_t bytes = 0;
  std::size_t event = 0;  // the event that first reached it
};

struct replay_result {
  replay_peak requested, allocated, reserved;
  std::int64_t device_peak = 0;  // most bytes the device had mapped for this replay
  std::int64_t retries = 0;  // cache flushes before a device allocation succeeded (PyTorch num_alloc_retries)
  std::optional<std::size_t> oom_event;  // the allocation the device could not serve; replay stops there
  std::size_t events_replayed = 0;
  std::vector<replay_point> timeline;  // one point per event replayed, when asked for

  // Returns 1 - peak allocated / peak reserved (GMLake's fragmentation), 0 when nothing was reserved.
  double fragmentation() const {
    return reserved.bytes ? 1.0 - static_cast<double>(allocated.bytes) / static_cast<double>(reserved.bytes)
                          : 0.0;
  }
};

// Replays `t` through `a`. Stops at the first allocation the device cannot serve (oom_event). Throws
// bad_input when the trace frees a tensor that is not allocated or allocates one twice.
replay_result replay(const step_trace& t, allocator& a, bool record_timeline);

}  // namespace headroom::probes
