// summary.cpp: what a snapshot measured (summary.hpp): one forward walk per device for the requested and
// reserved curves and the event tally, a second (peak_breakdown.hpp) for the blocks alive at the peak.
#include "probes/snapshots/summary.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <set>

#include "probes/snapshots/address_map.hpp"
#include "probes/snapshots/frames.hpp"
#include "probes/snapshots/warm_start.hpp"
#include "probes/snapshots/window.hpp"

namespace headroom::probes {

namespace {

using namespace snapshot_window;

// The requested and reserved curves over the trace (alloc adds, the ending free subtracts), starting from
// what was alive and held before the window; fills the peaks, the out-of-memory events, the empty_cache
// count and the event tally (as convert.cpp replays each event) of `d`.
void walk_curves(const std::vector<snap_event>& ev, const window& w, frame_namer& names,
                 const std::optional<std::int64_t>& max_split_size, snap_device_summary& d) {
  const bool completions = has_completions(ev);
  const bool max_split = max_split_size.has_value();
  address_map<std::int64_t> live_bytes(w.before.size());  // address -> requested bytes
  for (const auto& [a, b] : w.before) live_bytes.set(a, b);
  std::int64_t requested = d.live_before_bytes, reserved = w.held_before;
  d.peak_requested = requested;
  d.reserved_from_events = w.segment_events;
  d.peak_reserved = reserved;
  d.requested_at_reserved_peak = requested;
  bool rose = false;  // reserved memory rose above what was held before the window
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const auto& e = ev[i];
    replayed_as as = replayed_as::none;  // as the conversion replays it (convert.cpp)
    switch (e.action) {
      case snap_action::alloc:
        requested += e.size;
        live_bytes.set(e.addr, e.size);
        as = replayed_as::alloc;
        break;
      case snap_action::free_completed:
      case snap_action::free_requested:
        if (ends_life(e, completions)) {
          if (const std::int64_t* bytes = live_bytes.find(e.addr)) {
            requested -= *bytes;
            live_bytes.erase(e.addr);
            as = replayed_as::free;
          }
        }
        break;
      case snap_action::oom:
        d.ooms.push_back({i, e.size, e.device_free, names.top(e.frames)});
        break;
      default:
        reserved += reserved_change(e);
        if (ends_release_run(ev, i, max_split)) as = replayed_as::release;
        break;
    }
    tally_event(d.tally, e, as, completions);
    if (requested > d.peak_requested) {
      d.peak_requested = requested;
      d.peak_requested_event = i;
    }
    if (reserved > d.peak_reserved) {
      rose = true;
      d.peak_reserved = reserved;
      d.peak_reserved_event = i;
      d.requested_at_reserved_peak = requested;
    }
    d.empty_cache_calls += ends_empty_cache(ev, i);
  }
  if (d.peak_reserved > 0)
    d.fragmentation_at_reserved_peak =
        1.0 - static_cast<double>(d.requested_at_reserved_peak) / static_cast<double>(d.peak_reserved);
  if (d.cold) {
    d.fragmentation_why = "at event " + std::to_string(d.peak_reserved_event) + ", inside the recorded window";
  } else if (!w.segment_events) {
    d.fragmentation_measured = false;
    d.fragmentation_why = "no segment events: the reserved figure is the final segments' total, not a peak";
  } else if (!rose) {
    d.fragmentation_measured = false;
    d.fragmentation_why = "reserved memory never rose above the " + mib_text(w.held_before) +
                          " held when recording began: the peak is the warm-up's, before the window";
  } else {
    d.fragmentation_why = "at event " + std::to_string(d.peak_reserved_event) +
                          ", where reserved memory first rose to its peak inside the recorded window";
  }
}

// The blocks alive at the requested peak (peak_breakdown.hpp), and the largest of them (at most 10) with
// who allocated them.
void blocks_at_peak(const torch_snapshot& s, const window& w, frame_namer& names, snap_device_summary& d) {
  const bool at_start = d.peak_requested <= d.live_before_bytes;
  d.at_peak = peak_breakdown(s, d.device, w.before, d.peak_requested_event, at_start);
  std::vector<std::size_t> order(d.at_peak.blocks.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  const auto& b = d.at_peak.blocks;
  const auto larger = [&](std::size_t x, std::size_t y) {
    return b[x].size != b[y].size ? b[x].size > b[y].size : b[x].addr < b[y].addr;
  };
  const std::size_t shown = std::min<std::size_t>(order.size(), 10);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shown), order.end(), larger);
  for (std::size_t k = 0; k < shown; ++k) {
    const auto& x = b[order[k]];
    const std::string frame = x.before ? "(alive before recording)" : names.top(x.frames);
    d.largest_at_peak.push_back({x.addr, x.size, frame});
  }
}

}  // namespace

snap_summary summarise(const torch_snapshot& s) {
  snap_summary out;
  frame_namer names(s.doc);
  for (const auto& g : s.segments) {
    ++out.final_segments;
    out.final_reserved += g.total_size;
    out.final_allocated += g.allocated_size;
    out.final_requested += g.requested_size;
  }
  for (std::size_t dev = 0; dev < s.devices.size(); ++dev) {
    const auto& ev = s.devices[dev];
    snap_device_summary d;
    d.device = static_cast<int>(dev);
    d.events = ev.size();
    std::set<std::int64_t> streams;
    std::array<std::size_t, static_cast<std::size_t>(snap_action::other) + 1> per_action{};
    std::optional<std::int64_t> last_stream;  // runs of one stream insert once
    for (const auto& e : ev) {
      ++per_action[static_cast<std::size_t>(e.action)];
      if (last_stream != e.stream) streams.insert(e.stream), last_stream = e.stream;
    }
    for (std::size_t a = 0; a < per_action.size(); ++a)
      if (per_action[a]) d.counts[to_string(static_cast<snap_action>(a))] = per_action[a];
    d.streams.assign(streams.begin(), streams.end());
    const window w = window_of(s, d.device);
    d.live_before = w.before.size();
    for (const auto& [a, b] : w.before) d.live_before_bytes += b;
    d.cold = w.cold;
    d.cold_why = w.why;
    if (!d.cold) {
      const auto start = reconstruct_start(s, d.device);
      d.start_reconstructed = start.reconstructed;
      d.start_why = start.why;
    }
    walk_curves(ev, w, names, s.settings.max_split_size, d);
    blocks_at_peak(s, w, names, d);
    out.devices.push_back(std::move(d));
  }
  return out;
}

}  // namespace headroom::probes
