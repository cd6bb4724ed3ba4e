// summary.hpp: what a snapshot measured, device by device: events per action, streams, whether the
// trace is cold or warm, which events `probe snapshot` replays, the requested and reserved peaks,
// fragmentation at the reserved peak, the blocks live at the requested peak (the largest, and all of them by
// call site, by phase and by kind: peak_breakdown.hpp), and the out-of-memory events.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "probes/snapshots/peak_breakdown.hpp"
#include "probes/snapshots/snapshot.hpp"

namespace headroom::probes {

struct snap_live_block {
  std::uint64_t addr = 0;
  std::int64_t size = 0;
  std::string frame;
};

struct snap_oom {
  std::size_t event = 0;
  std::int64_t size = 0, device_free = -1;
  std::string frame;
};

// What one device's trace measured.
struct snap_device_summary {
  int device = 0;
  std::size_t events = 0;
  std::map<std::string, std::size_t> counts;  // per action
  snap_event_tally tally;                     // replayed by `probe snapshot` or not, and why (snapshot.hpp)
  std::vector<std::int64_t> streams;
  bool cold = false;
  std::string cold_why;  // why it is cold or warm
  // Blocks alive before the window (warm traces): freed in it without being allocated in it, or allocated
  // in the final segments without an alloc event; their requested bytes start the requested curve.
  std::size_t live_before = 0;
  std::int64_t live_before_bytes = 0;
  // Warm: whether the allocator's state at the start was undone from the final segments, and how (or
  // what could not be undone).
  bool start_reconstructed = false;
  std::string start_why;
  std::int64_t peak_requested = 0;
  std::size_t peak_requested_event = 0;
  std::vector<snap_live_block> largest_at_peak;  // at the requested peak, largest first (at most 10)
  snap_peak_breakdown at_peak;  // every block alive at the requested peak: by call site, phase and kind
  bool reserved_from_events = false;             // segment events present: reserved is known over the trace
  std::int64_t peak_reserved = 0;
  std::size_t peak_reserved_event = 0;
  std::int64_t requested_at_reserved_peak = 0;
  // 1 - requested / reserved at the reserved peak (the trace carries requested bytes, not block sizes).
  double fragmentation_at_reserved_peak = 0;
  // Whether that figure describes the recorded window: false for a warm trace whose reserved memory never
  // rose above what was held when recording began (the peak is then the warm-up's, before the window, or
  // the final segments' total when the trace has no segment events). `fragmentation_why` says which.
  bool fragmentation_measured = true;
  std::string fragmentation_why;
  std::vector<snap_oom> ooms;
  std::size_t empty_cache_calls = 0;  // runs of segment frees not followed by a segment_alloc
};

struct snap_summary {
  std::vector<snap_device_summary> devices;
  std::size_t final_segments = 0;
  std::int64_t final_reserved = 0, final_allocated = 0, final_requested = 0;
};

// Returns what the snapshot measured, device by device.
snap_summary summarise(const torch_snapshot& s);

}  // namespace headroom::probes
