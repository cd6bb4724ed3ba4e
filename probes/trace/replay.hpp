// replay.hpp: replaying a step trace through an allocator policy over a device, recording requested,
// allocated and reserved bytes after every event, the peaks, where an out-of-memory happened, and, on a
// real GPU, the driver's device-used memory at the reserved peak and the fill / verify of every block.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "probes/allocators/allocator.hpp"
#include "probes/trace/block_check.hpp"
#include "probes/trace/step_trace.hpp"

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
  // The driver's device-used bytes (cudaMemGetInfo) sampled when reserved reached its peak, and the most
  // seen over every new reserved high; nullopt unless a device was given to sample (replay_options::truth).
  std::optional<std::int64_t> device_used_at_peak, device_used_max;
  std::optional<verification> verified;  // when a block_checker was given
  std::size_t released_at_end = 0;       // live tensors freed after the last event (release_live)
  std::int64_t reserved_at_end = 0;      // reserved after the last event replayed (at an OOM: what was held)

  // Returns 1 - peak allocated / peak reserved (GMLake's fragmentation), 0 when nothing was reserved.
  double fragmentation() const {
    return reserved.bytes ? 1.0 - static_cast<double>(allocated.bytes) / static_cast<double>(reserved.bytes)
                          : 0.0;
  }
};

struct replay_options {
  bool record_timeline = false;
  block_checker* checker = nullptr;  // fill each block on allocation, verify it before its free
  const device* truth = nullptr;     // sample memory() at every new reserved high
  bool release_live = false;         // after the last event (or the out-of-memory), free every live tensor
};

// Replays `t` through `a`. Stops at the first allocation the device cannot serve (oom_event). Throws
// bad_input when the trace frees a tensor that is not allocated or allocates one twice; device_error
// passes through from the device or checker.
replay_result replay(const step_trace& t, allocator& a, const replay_options& options);
inline replay_result replay(const step_trace& t, allocator& a, bool record_timeline) {
  replay_options o;
  o.record_timeline = record_timeline;
  return replay(t, a, o);
}

}  // namespace headroom::probes
