// summary.cpp: what a snapshot measured (summary.hpp): one forward walk per device for the requested and
// reserved curves, a second walk up to the requested peak for the blocks alive there.
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
// what was alive and held before the window; fills the peaks, the out-of-memory events and the
// empty_cache count of `d`.
void walk_curves(const std::vector<snap_event>& ev, const window& w, frame_namer& names,
                 snap_device_summary& d) {
  const bool completions = has_completions(ev);
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
    switch (e.action) {
      case snap_action::alloc:
        requested += e.size;
        live_bytes.set(e.addr, e.size);
        break;
      case snap_action::free_completed:
      case snap_action::free_requested:
        if (ends_life(e, completions)) {
          if (const std::int64_t* bytes = live_bytes.find(e.addr)) {
            requested -= *bytes;
            live_bytes.erase(e.addr);
          }
        }
        break;
      case snap_action::oom:
        d.ooms.push_back({i, e.size, e.device_free, names.top(e.frames)});
        break;
      default:
        reserved += reserved_change(e);
        break;
    }
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

// The largest live blocks at the requested peak (at most 10), with who allocated them: a second walk up
// to the peak (copying the live set at every new peak would be quadratic).
void largest_at_peak(const std::vector<snap_event>& ev, const window& w, frame_namer& names,
                     snap_device_summary& d) {
  const bool completions = has_completions(ev);
  // address -> requested bytes and the frames list of its alloc (none_frames: alive before recording)
  constexpr std::uint32_t none_frames = UINT32_MAX - 1;
  address_map<std::pair<std::int64_t, std::uint32_t>> at_peak(w.before.size());
  for (const auto& [a, b] : w.before) at_peak.set(a, {b, none_frames});
  if (d.peak_requested > d.live_before_bytes)
    for (std::size_t i = 0; i <= d.peak_requested_event && i < ev.size(); ++i) {
      const auto& e = ev[i];
      if (e.action == snap_action::alloc)
        at_peak.set(e.addr, {e.size, e.frames});
      else if (ends_life(e, completions))
        at_peak.erase(e.addr);
    }
  std::vector<std::pair<std::int64_t, std::uint64_t>> bysize;
  bysize.reserve(at_peak.size());
  at_peak.for_each([&](std::uint64_t a, const auto& v) { bysize.push_back({v.first, a}); });
  const auto larger = [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  };
  const std::size_t shown = std::min<std::size_t>(bysize.size(), 10);
  std::partial_sort(bysize.begin(), bysize.begin() + static_cast<std::ptrdiff_t>(shown), bysize.end(), larger);
  for (std::size_t k = 0; k < shown; ++k) {
    const std::uint32_t frames = at_peak.find(bysize[k].second)->second;
    d.largest_at_peak.push_back({bysize[k].second, bysize[k].first,
                                 frames == none_frames ? "(alive before recording)" : names.top(frames)});
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
    walk_curves(ev, w, names, d);
    largest_at_peak(ev, w, names, d);
    out.devices.push_back(std::move(d));
  }
  return out;
}

}  // namespace headroom::probes
