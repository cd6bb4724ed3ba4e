// replay.cpp: a snapshot's trace through the caching-allocator emulation, compared with the real
// allocator (replay.hpp): the real segment creations are collected first, a warm start is adopted when it
// was undone, then every allocation's new segments and address are checked against the real ones.
#include "probes/snapshots/replay.hpp"

#include <algorithm>
#include <span>

#include "probes/snapshots/replaying_device.hpp"
#include "probes/snapshots/window.hpp"

namespace headroom::probes {

caching_options recorded_options(const torch_snapshot& s) {
  caching_options o;
  o.max_split_size = s.settings.max_split_size;
  o.expandable_segments = s.settings.expandable_segments;
  return o;
}

namespace {

using snapshot_window::mib_text;

// The real allocator's segment creations, in order, and, per snapshot event index of an alloc, the segment
// sizes created just before it (the allocation that needed them). Expandable ranges: each growth is a map.
// Flat: one run of `sizes` per alloc that created segments, found by binary search (a million-event trace
// has a few hundred).
struct real_segments {
  std::vector<std::pair<std::uint64_t, std::int64_t>> created;  // segment_alloc: address, bytes
  std::vector<std::uint64_t> maps;                              // segment_map addresses
  struct run {
    std::size_t event;
    std::size_t begin, end;  // in `sizes`
  };
  std::vector<std::int64_t> sizes;  // segment bytes created, in order
  std::vector<run> runs;            // by event
  // The real reserved peak: the summary's (summary.hpp), walked here from the bytes held before the window
  // instead of summarising the whole snapshot again.
  std::int64_t peak_reserved = 0;

  real_segments(const std::vector<snap_event>& ev, std::int64_t held_before) {
    std::size_t pending = 0;  // where the sizes not yet claimed by an alloc begin
    std::int64_t reserved = held_before;
    peak_reserved = reserved;
    for (std::size_t i = 0; i < ev.size(); ++i) {
      reserved += snapshot_window::reserved_change(ev[i]);
      peak_reserved = std::max(peak_reserved, reserved);
      if (ev[i].action == snap_action::segment_alloc) {
        created.push_back({ev[i].addr, ev[i].size});
        sizes.push_back(ev[i].size);
      } else if (ev[i].action == snap_action::segment_map) {
        maps.push_back(ev[i].addr);
        sizes.push_back(ev[i].size);
      } else if (ev[i].action == snap_action::alloc) {
        if (sizes.size() > pending) runs.push_back({i, pending, sizes.size()});
        pending = sizes.size();
      }
    }
  }
  // Returns the segment sizes the real allocator created for the alloc at snapshot event `event`.
  std::span<const std::int64_t> before_alloc(std::size_t event) const {
    const auto it = std::lower_bound(runs.begin(), runs.end(), event,
                                     [](const run& r, std::size_t e) { return r.event < e; });
    if (it == runs.end() || it->event != event) return {};
    return std::span<const std::int64_t>(sizes).subspan(it->begin, it->end - it->begin);
  }
};

// Adopts the reconstructed warm start into `a`, recording each live block's handle under its trace
// tensor. Returns false (with the out-of-memory in `r`) when the start does not fit the capacity.
bool adopt_start(const snapshot_trace& st, caching_allocator& a, std::vector<std::int64_t>& handle,
                 snapshot_replay& r) {
  std::size_t next_tensor = 0;
  for (const auto& g : st.start.segments) {
    std::vector<caching_allocator::adopted_block> blocks;
    for (const auto& b : g.blocks) blocks.push_back({b.size, b.allocated, b.requested});
    const auto got = a.adopt_segment(g.small, g.stream, blocks);
    if (!got) {
      r.oom_event = 0;
      r.oom_bytes = g.size;
      return false;
    }
    for (const auto h : *got) handle[static_cast<std::size_t>(st.start_tensor[next_tensor++])] = h;
  }
  return true;
}

std::string new_segments_text(std::span<const std::int64_t> v) {
  if (v.empty()) return "no new segment";
  std::string x;
  for (auto b : v) x += (x.empty() ? "" : " + ") + mib_text(b);
  return "a new segment of " + x;
}

// Compares the allocation of snapshot event `source` (handle `h`, which mapped `dev.maps` from
// `maps_before` on) with what the real allocator did; the first difference is recorded in `r` and stops
// `dev` handing out real addresses.
void compare_alloc(const snap_event& real_event, std::size_t source, const real_segments& real,
                   replaying_device& dev, std::size_t maps_before, std::uint64_t got_addr,
                   snapshot_replay& r) {
  const auto want = real.before_alloc(source);
  bool same = dev.maps.size() - maps_before == want.size();
  for (std::size_t k = 0; same && k < want.size(); ++k) same = dev.maps[maps_before + k].second == want[k];
  if (!same) {
    std::vector<std::int64_t> emulated;
    for (std::size_t k = maps_before; k < dev.maps.size(); ++k) emulated.push_back(dev.maps[k].second);
    r.diverged_at = source;
    r.divergence = "alloc of " + mib_text(real_event.size) + ": the real allocator made " +
                   new_segments_text(want) + ", the emulation " + new_segments_text(emulated);
    dev.diverged();
  } else if (got_addr != real_event.addr) {
    r.diverged_at = source;
    r.divergence = "alloc of " + mib_text(real_event.size) + ": placed at " + std::to_string(got_addr) +
                   " by the emulation, at " + std::to_string(real_event.addr) + " by the real allocator";
    dev.diverged();
  }
}

void note_peaks(const caching_allocator& a, snapshot_replay& r) {
  const auto& stats = a.stats();
  r.peak_reserved = std::max(r.peak_reserved, stats.reserved);
  r.peak_allocated = std::max(r.peak_allocated, stats.allocated);
  r.peak_requested = std::max(r.peak_requested, stats.requested);
}

// Runs the trace's events from `first` through `a`, comparing allocations when `by_event`.
void run_events(const snapshot_trace& st, const std::vector<snap_event>& ev, const real_segments& real,
                bool by_event, std::size_t first, caching_allocator& a, replaying_device& dev,
                std::vector<std::int64_t>& handle, snapshot_replay& r) {
  const step_trace& t = st.trace;
  for (std::size_t i = first; i < t.events.size() && !r.oom_event; ++i) {
    const auto& e = t.events[i];
    const std::size_t source = st.source_event[i];
    if (e.kind == event_kind::empty_cache) {
      a.empty_cache();
    } else if (e.kind == event_kind::alloc) {
      const std::size_t maps_before = dev.maps.size();
      const auto bytes = t.tensors[static_cast<std::size_t>(e.tensor)].bytes;
      auto h = a.allocate_on(bytes, e.stream);
      if (!h) {
        r.oom_event = source;
        r.oom_bytes = bytes;
        break;
      }
      handle[static_cast<std::size_t>(e.tensor)] = *h;
      if (by_event && !r.diverged_at && source != SIZE_MAX)
        compare_alloc(ev[source], source, real, dev, maps_before, a.address_of(*h), r);
    } else {
      auto& h = handle[static_cast<std::size_t>(e.tensor)];
      if (h >= 0) a.release(h);
      h = -1;
    }
    note_peaks(a, r);
  }
}

}  // namespace

snapshot_replay replay_snapshot(const torch_snapshot& s, const snapshot_trace& st,
                                const caching_options& options, std::int64_t capacity, bool compare) {
  static const std::vector<snap_event> none;
  const auto& ev = static_cast<std::size_t>(st.device) < s.devices.size()
                       ? s.devices[static_cast<std::size_t>(st.device)]
                       : none;
  const real_segments real(ev, st.held_before);
  // A warm trace starts from its reconstructed state under the settings it was recorded with; event by
  // event comparison needs a known start (cold, or reconstructed).
  const bool adopt = !st.cold && st.start.reconstructed && options == recorded_options(s);
  const bool by_event = compare && (st.cold || adopt);
  std::vector<std::pair<std::uint64_t, std::int64_t>> handed;  // real addresses, in the order mapped
  if (adopt)
    for (const auto& g : st.start.segments) handed.push_back({g.address, g.size});
  if (by_event) handed.insert(handed.end(), real.created.begin(), real.created.end());
  replaying_device dev(capacity, handed, by_event ? real.maps : std::vector<std::uint64_t>{});
  snapshot_replay r;
  r.capacity = capacity;
  r.compared = compare;
  r.from_start_state = adopt;
  std::size_t adopted_maps = 0;
  {
    caching_allocator a(dev, options);
    r.settings = a.describe();
    std::vector<std::int64_t> handle(st.trace.tensors.size(), -1);
    std::size_t first = 0;
    if (adopt) {
      adopt_start(st, a, handle, r);
      adopted_maps = dev.maps.size();
      // The leading allocs of the blocks alive before the window are the adopted state.
      while (first < st.trace.events.size() && st.source_event[first] == SIZE_MAX) ++first;
      const auto& stats = a.stats();
      r.peak_reserved = stats.reserved;
      r.peak_allocated = stats.allocated;
      r.peak_requested = stats.requested;
    }
    run_events(st, ev, real, by_event, first, a, dev, handle, r);
    r.retries = a.stats().retries;
  }
  r.segments_created = static_cast<std::int64_t>(dev.maps.size() - adopted_maps);
  if (compare) {
    if (static_cast<std::size_t>(st.device) < s.devices.size()) r.real_peak_reserved = real.peak_reserved;
    r.real_segments_created = static_cast<std::int64_t>(real.created.size() + real.maps.size());
    if (!st.cold && !adopt)
      r.divergence =
          "warm trace: compared at the reserved peak only (the segments made before recording are not "
          "in the trace; the blocks alive then are allocated first, in address order)";
    else if (!r.diverged_at && r.real_peak_reserved != r.peak_reserved && !r.oom_event)
      r.divergence = "the segments agree event by event but the reserved peaks differ";
  }
  return r;
}

}  // namespace headroom::probes
