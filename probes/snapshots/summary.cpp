// summary.cpp: what a snapshot measured (summary.hpp): one forward walk per device for the requested and
// reserved curves, a second walk up to the requested peak for the blocks alive there.
#include "probes/snapshots/summary.hpp"

#include <algorithm>
#include <set>

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
  std::map<std::uint64_t, std::int64_t> live_bytes = w.before;  // address -> requested bytes
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
        live_bytes[e.addr] = e.size;
        break;
      case snap_action::free_completed:
      case snap_action::free_requested:
        if (ends_life(e, completions)) {
          auto it = live_bytes.find(e.addr);
          if (it != live_bytes.end()) {
            requested -= it->second;
            live_bytes.erase(it);
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
  std::map<std::uint64_t, std::int64_t> at_peak = w.before;
  std::map<std::uint64_t, std::uint32_t> frames_of;
  if (d.peak_requested > d.live_before_bytes)
    for (std::size_t i = 0; i <= d.peak_requested_event && i < ev.size(); ++i) {
      const auto& e = ev[i];
      if (e.action == snap_action::alloc) {
        at_peak[e.addr] = e.size;
        frames_of[e.addr] = e.frames;
      } else if (ends_life(e, completions)) {
        at_peak.erase(e.addr);
      }
    }
  std::vector<std::pair<std::int64_t, std::uint64_t>> bysize;
  for (const auto& [a, b] : at_peak) bysize.push_back({b, a});
  std::sort(bysize.begin(), bysize.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  });
  for (std::size_t k = 0; k < bysize.size() && k < 10; ++k) {
    auto fr = frames_of.find(bysize[k].second);
    d.largest_at_peak.push_back({bysize[k].second, bysize[k].first,
                                 fr == frames_of.end() ? "(alive before recording)" : names.top(fr->second)});
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
    for (const auto& e : ev) {
      ++d.counts[to_string(e.action)];
      streams.insert(e.stream);
    }
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
