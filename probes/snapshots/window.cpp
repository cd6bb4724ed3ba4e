// window.cpp: the trace window's shape (window.hpp).
#include "probes/snapshots/window.hpp"

#include <algorithm>

#include "probes/snapshots/address_map.hpp"

#include "planner/format.hpp"
#include "planner/units.hpp"

namespace headroom::probes::snapshot_window {

std::string mib_text(std::int64_t b) {
  return trim(to_mib(b), 2) + " MiB";
}

std::map<std::uint64_t, std::int64_t> live_before_window(const torch_snapshot& s, int device) {
  std::map<std::uint64_t, std::int64_t> before;
  address_map<bool> live;
  for (const auto& e : s.devices[static_cast<std::size_t>(device)]) {
    if (e.action == snap_action::alloc) {
      live.set(e.addr, true);
    } else if (e.action == snap_action::free_completed || e.action == snap_action::free_requested) {
      if (!live.contains(e.addr)) {
        if (e.action == snap_action::free_requested || !before.count(e.addr)) before[e.addr] = e.size;
      } else if (e.action == snap_action::free_completed) {
        live.erase(e.addr);
      }
    }
  }
  // Allocated blocks of the final segments that no alloc event made were alive before the window too.
  for (const auto& g : s.segments) {
    if (g.device != device) continue;
    for (const auto& b : g.blocks)
      if (b.allocated && !live.contains(b.address) && !before.count(b.address)) before[b.address] = b.requested;
  }
  return before;
}

window window_of(const torch_snapshot& s, int device) {
  const auto& ev = s.devices[static_cast<std::size_t>(device)];
  window w;
  // Every block lands in a segment allocated inside the trace?
  std::map<std::uint64_t, std::int64_t> segs;  // base -> size, segments made inside the window
  std::size_t allocs = 0, outside = 0;
  std::int64_t seg_delta = 0;
  for (const auto& e : ev) {
    if (e.action == snap_action::segment_alloc || e.action == snap_action::segment_map) {
      segs[e.addr] = std::max(segs[e.addr], e.size);
      seg_delta += e.size;
      w.segment_events = true;
    } else if (e.action == snap_action::segment_free || e.action == snap_action::segment_unmap) {
      if (e.action == snap_action::segment_free) segs.erase(e.addr);
      seg_delta -= e.size;
      w.segment_events = true;
    } else if (e.action == snap_action::alloc) {
      ++allocs;
      auto it = segs.upper_bound(e.addr);
      bool inside = false;
      if (it != segs.begin()) {
        --it;
        inside = e.addr < it->first + static_cast<std::uint64_t>(it->second);
      }
      outside += !inside;
    }
  }
  w.before = live_before_window(s, device);
  std::int64_t device_final = 0;
  for (const auto& g : s.segments)
    if (g.device == device) device_final += g.total_size;
  // Without segment events the final segments are all there is to go on.
  w.held_before = w.segment_events ? device_final - seg_delta : device_final;
  if (!w.segment_events) {
    w.why = "no segment events: recording began after the allocator had its segments";
  } else if (outside > 0) {
    w.why = std::to_string(outside) + " of " + std::to_string(allocs) +
            " blocks land in segments allocated before recording began";
  } else if (!w.before.empty()) {
    w.why = std::to_string(w.before.size()) + " blocks were alive before recording began";
  } else if (w.held_before != 0) {
    w.why = "the allocator held " + mib_text(w.held_before) +
            " of segments before recording began (final segments less the window's)";
  } else {
    w.cold = true;
    w.why = "every block lands in a segment allocated inside the trace";
  }
  return w;
}

bool ends_empty_cache(const std::vector<snap_event>& ev, std::size_t i) {
  const auto a = ev[i].action;
  if (a != snap_action::segment_free && a != snap_action::segment_unmap) return false;
  if (i + 1 == ev.size()) return true;
  const auto next = ev[i + 1].action;
  return next != snap_action::segment_free && next != snap_action::segment_alloc &&
         next != snap_action::segment_unmap && next != snap_action::segment_map;
}

bool ends_release_run(const std::vector<snap_event>& ev, std::size_t i, bool max_split) {
  const auto a = ev[i].action;
  if (a != snap_action::segment_free && a != snap_action::segment_unmap) return false;
  if (i + 1 == ev.size()) return true;
  const auto next = ev[i + 1].action;
  if (next == snap_action::segment_free || next == snap_action::segment_unmap) return false;
  return !max_split || ends_empty_cache(ev, i);
}

bool has_completions(const std::vector<snap_event>& ev) {
  return std::any_of(ev.begin(), ev.end(),
                     [](const snap_event& e) { return e.action == snap_action::free_completed; });
}

std::int64_t reserved_change(const snap_event& e) {
  switch (e.action) {
    case snap_action::segment_alloc:
    case snap_action::segment_map:
      return e.size;
    case snap_action::segment_free:
    case snap_action::segment_unmap:
      return -e.size;
    default:
      return 0;
  }
}

bool ends_life(const snap_event& e, bool completions) {
  return (e.action == snap_action::free_completed && completions) ||
         (e.action == snap_action::free_requested && !completions);
}

void tally_event(snap_event_tally& t, const snap_event& e, replayed_as as, bool completions) {
  ++t.events;
  switch (as) {
    case replayed_as::alloc: ++t.allocs; return;
    case replayed_as::free: ++t.frees; return;
    case replayed_as::release: ++t.releases; return;
    case replayed_as::none: break;
  }
  switch (e.action) {
    case snap_action::free_requested:
    case snap_action::free_completed:
      ++(ends_life(e, completions) ? t.unmatched_frees : t.requests);
      break;
    case snap_action::segment_alloc:
    case snap_action::segment_free:
    case snap_action::segment_map:
    case snap_action::segment_unmap:
      ++t.segment_events;
      break;
    case snap_action::oom:
      ++t.ooms;
      break;
    default:
      ++t.others;
      break;
  }
}

}  // namespace headroom::probes::snapshot_window
