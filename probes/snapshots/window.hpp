// window.hpp: what a device's trace window is, shared by the summary, the warm start and the conversion
// (internal to probes/snapshots/): the blocks alive before it, cold or warm and why, and where the runs of
// segment releases end.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "probes/snapshots/snapshot.hpp"

namespace headroom::probes::snapshot_window {

// Returns `bytes` as "N.NN MiB".
std::string mib_text(std::int64_t bytes);

// Blocks alive before the window of a trace: (address -> requested bytes), from frees of blocks the window
// never allocated and from allocated blocks of the final segments the window never allocated.
std::map<std::uint64_t, std::int64_t> live_before_window(const torch_snapshot& s, int device);

// What a device's trace window is: cold (the allocator's state at its start is empty) or warm and why,
// the blocks alive before it (address -> requested bytes), and the segment bytes held before it.
struct window {
  bool cold = false;
  std::string why;
  std::map<std::uint64_t, std::int64_t> before;
  bool segment_events = false;
  std::int64_t held_before = 0;  // final segments less the window's net segment bytes (0 when cold)
};
window window_of(const torch_snapshot& s, int device);

// Returns whether event i closes a run of segment frees (or expandable unmaps) that no segment_alloc (or
// map) follows: torch.cuda.empty_cache() (an allocation's out-of-memory retry frees and then allocates).
bool ends_empty_cache(const std::vector<snap_event>& ev, std::size_t i);

// Returns whether event i closes any run of segment frees or unmaps: empty_cache(), or an allocation's
// out-of-memory retry (which then maps). Replayed as empty_cache() either way: the retry releases the same
// cached memory before mapping, so the state after is the same, whatever capacity the replay is given.
// Not with max_split_size, whose retry first frees only enough oversize blocks (the replay's own retry
// does that).
bool ends_release_run(const std::vector<snap_event>& ev, std::size_t i, bool max_split);

// Returns whether the trace records free_completed events (frees then complete there, not at the request).
bool has_completions(const std::vector<snap_event>& ev);

// Returns whether event `e` is the free that ends a block's life in a trace that does (`completions`) or does
// not record free_completed: the completion when it is recorded, else the request. Every walk of a trace
// (summary, conversion, the report's view, the warm start's undo) ends lives by this one rule.
bool ends_life(const snap_event& e, bool completions);

// Returns what event `e` does to the reserved bytes: + its size for a segment allocated or mapped, - for one
// freed or unmapped, 0 for any other event.
std::int64_t reserved_change(const snap_event& e);

// How an event is replayed: as an alloc, as the free that ends a block's life, as the empty_cache of a run of
// segment releases, or not at all.
enum class replayed_as : std::uint8_t { none, alloc, free, release };
// Adds event `e` to `t` (snapshot.hpp, snap_event_tally): under `as` when replayed, else under why not (a
// free_requested of a trace that records completions, a free of no live block, a segment event, an oom).
void tally_event(snap_event_tally& t, const snap_event& e, replayed_as as, bool completions);

}  // namespace headroom::probes::snapshot_window
