// replay.hpp: a snapshot's trace replayed through the caching-allocator emulation and compared with the
// real allocator segment by segment and address by address.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "probes/allocators/caching_allocator.hpp"
#include "probes/snapshots/convert.hpp"

namespace headroom::probes {

// The emulation against the real allocator: the same trace through the caching policy, with the real
// segment addresses handed back in order so best-fit ties break as they did.
struct snapshot_replay {
  std::string settings;  // the policy's describe()
  std::int64_t capacity = 0;
  std::int64_t peak_reserved = 0, peak_allocated = 0, peak_requested = 0;
  std::int64_t segments_created = 0;  // device mappings: segments, or growths of an expandable range
  std::int64_t retries = 0;
  std::optional<std::size_t> oom_event;  // snapshot event index where the emulation ran out of memory
  std::int64_t oom_bytes = 0;
  // Against the real trace (compared only under the recorded settings):
  bool compared = false;
  std::optional<std::size_t> diverged_at;  // the snapshot event where the emulated segments first differ
  std::string divergence;                  // what differed there
  std::int64_t real_peak_reserved = 0, real_segments_created = 0;
  bool from_start_state = false;  // began from the reconstructed warm state (segments_created excludes it)
};

// Replays device `device` of `s` through a caching allocator with `options` on a device of `capacity`
// bytes; compares segment by segment with the real trace when `compare`. A warm trace whose start was
// reconstructed begins from that state when `options` are the recorded ones (another policy would have
// left other segments), and is then compared event by event as a cold one is.
snapshot_replay replay_snapshot(const torch_snapshot& s, const snapshot_trace& t,
                                const caching_options& options, std::int64_t capacity, bool compare);

// The caching options the snapshot was recorded with.
caching_options recorded_options(const torch_snapshot& s);

}  // namespace headroom::probes
