// convert.hpp: one device of a snapshot as a step trace, with the snapshot event each trace event came from.
#pragma once

#include <cstdint>
#include <vector>

#include "probes/snapshots/snapshot.hpp"
#include "probes/snapshots/warm_start.hpp"
#include "probes/trace/step_trace.hpp"

namespace headroom::probes {

// One device's trace as a step trace: an alloc per alloc event (named by its top user frame), a free at
// free_completed (free_requested when the trace has no completions), an empty_cache after each run of
// segment frees or unmaps (empty_cache(), or an out-of-memory retry: the same release either way; not a
// retry's partial release under max_split_size), the stream of each event, and, for a warm trace, the
// blocks alive before the window allocated first (a replay under the recorded settings adopts the
// reconstructed start instead). Also returns, per trace event, the index of the snapshot event it came
// from.
struct snapshot_trace {
  int device = 0;
  step_trace trace;
  std::vector<std::size_t> source_event;  // per trace event; SIZE_MAX for reconstructed warm-up allocs
  bool cold = false;
  std::int64_t held_before =
      0;  // segment bytes held when recording began (window.hpp), where reserved starts
  // Warm: the state undone from the final segments. When reconstructed, a replay under the recorded
  // settings adopts it instead of running the leading allocs of the blocks alive before the window; then
  // `start_tensor` names, per allocated block of `start` in segment and address order, its trace tensor.
  start_state start;
  std::vector<std::int32_t> start_tensor;
  bool approximate = false;  // warm and not reconstructed: the blocks alive before are allocated first
  // The device trace's events as replayed or not (snapshot.hpp): trace.events holds tally.replayed() events
  // from the snapshot, after `leading_allocs` allocs of the blocks alive before recording (warm traces).
  snap_event_tally tally;
  std::size_t leading_allocs = 0;
};
snapshot_trace snapshot_to_trace(const torch_snapshot& s, int device);

}  // namespace headroom::probes
