// snapshot_record.cpp: the measurement record of a snapshot (snapshot_record.hpp), with the view the
// report draws ("snapshot_view").
#include "probes/snapshots/snapshot_record.hpp"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "probes/records/envelope.hpp"
#include "probes/snapshots/address_map.hpp"
#include "probes/snapshots/frames.hpp"
#include "probes/snapshots/window.hpp"

namespace headroom::probes {

namespace {

using namespace snapshot_window;

const char* const alive_before = "(alive before recording)";
const char* const no_frames = "(no frames recorded)";

// Returns up to `most` frames of stack `frames`, innermost first, as "name (file:line)" (the whole path's
// last component, as frames.hpp names them); empty when none were recorded.
nlohmann::json stack_of(const pdoc& doc, std::uint32_t frames, std::size_t most) {
  nlohmann::json out = nlohmann::json::array();
  if (frames == UINT32_MAX || frames >= doc.nodes.size()) return out;
  for (std::uint32_t f : doc.at(frames).kids) {
    if (out.size() == most) break;
    const auto file = doc.get(f, "filename");
    const auto name = doc.get(f, "name");
    if (!file || !name) continue;
    const auto fs = doc.string(*file);
    const auto ns = doc.string(*name);
    if (!fs || !ns) continue;
    const auto line = doc.get(f, "line");
    const auto slash = fs->rfind('/');
    out.push_back(std::string(*ns) + " (" +
                  std::string(slash == std::string_view::npos ? *fs : fs->substr(slash + 1)) + ":" +
                  std::to_string(line ? doc.integer(*line).value_or(0) : 0) + ")");
  }
  return out;
}

// One walk's state: the live blocks (address -> bytes, frame id), the bytes live per top frame, the
// requested and reserved totals.
struct view_walk {
  struct live_block {
    std::int64_t bytes = 0;
    std::size_t frame = 0;  // index into names
    std::uint32_t stack = UINT32_MAX;
  };
  address_map<live_block> live;
  std::vector<std::string> names;
  std::unordered_map<std::string, std::size_t> index;
  // The frame id of each top-frame string the namer handed out (its strings live as long as it does): a
  // million allocations hash a handful of pointers, not a million strings.
  std::unordered_map<const std::string*, std::size_t> by_name;
  std::vector<std::int64_t> per_frame;
  std::int64_t requested = 0, reserved = 0;

  std::size_t frame_id(const std::string& n) {
    auto [it, added] = index.try_emplace(n, names.size());
    if (added) {
      names.push_back(n);
      per_frame.push_back(0);
    }
    return it->second;
  }
  void add(std::uint64_t addr, std::int64_t bytes, std::size_t frame, std::uint32_t stack) {
    drop(addr);
    live.set(addr, {bytes, frame, stack});
    per_frame[frame] += bytes;
    requested += bytes;
  }
  // Ends the life of the block at `addr`, if one is live there.
  void drop(std::uint64_t addr) {
    const live_block* b = live.find(addr);
    if (!b) return;
    per_frame[b->frame] -= b->bytes;
    requested -= b->bytes;
    live.erase(addr);
  }
  // Applies event `e` (frees end a life at completion when the trace records completions). Returns the
  // frame whose live bytes grew, or SIZE_MAX.
  std::size_t step(const snap_event& e, bool completions, frame_namer& namer) {
    switch (e.action) {
      case snap_action::alloc: {
        const std::string& top = namer.top(e.frames);
        auto [known, added] = by_name.try_emplace(&top, 0);
        if (added) known->second = frame_id(top.empty() ? no_frames : top);
        const std::size_t f = known->second;
        add(e.addr, e.size, f, e.frames);
        return f;
      }
      case snap_action::free_completed:
      case snap_action::free_requested:
        if (ends_life(e, completions)) drop(e.addr);
        break;
      default:
        reserved += reserved_change(e);
        break;
    }
    return SIZE_MAX;
  }
};

// Starts a walk of device `dev` at the window's start: the blocks alive before it, the segments held.
view_walk start_walk(const window& w) {
  view_walk v;
  const std::size_t before = v.frame_id(alive_before);
  for (const auto& [a, b] : w.before) v.add(a, b, before, UINT32_MAX);
  v.reserved = w.held_before;
  return v;
}

// The segments of device `dev` at event `at`: the final segments with the later segment events undone
// (a freed segment put back, an allocated one taken away), as (address -> bytes, stream).
std::map<std::uint64_t, std::pair<std::int64_t, std::int64_t>> segments_at(const torch_snapshot& s, int dev,
                                                                           std::size_t at) {
  std::map<std::uint64_t, std::pair<std::int64_t, std::int64_t>> segs;
  for (const auto& g : s.segments)
    if (g.device == dev) segs[g.address] = {g.total_size, g.stream};
  const auto& ev = s.devices[static_cast<std::size_t>(dev)];
  for (std::size_t i = ev.size(); i > at + 1; --i) {
    const auto& e = ev[i - 1];
    if (e.action == snap_action::segment_alloc || e.action == snap_action::segment_map)
      segs.erase(e.addr);
    else if (e.action == snap_action::segment_free || e.action == snap_action::segment_unmap)
      segs[e.addr] = {e.size, e.stream};
  }
  return segs;
}

// The largest live blocks of walk `v` (at most `most`), with their stacks.
nlohmann::json largest_of(const view_walk& v, const pdoc& doc, std::size_t most) {
  std::vector<std::pair<std::int64_t, std::uint64_t>> bysize;
  v.live.for_each([&](std::uint64_t a, const view_walk::live_block& b) { bysize.push_back({b.bytes, a}); });
  std::sort(bysize.begin(), bysize.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  });
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t k = 0; k < bysize.size() && k < most; ++k) {
    const auto& b = *v.live.find(bysize[k].second);
    out.push_back({{"address", bysize[k].second},
                   {"bytes", b.bytes},
                   {"frame", v.names[b.frame]},
                   {"stack", stack_of(doc, b.stack, snapshot_view_limits::stack_frames)}});
  }
  return out;
}

// The segments at the peak with the requested bytes of the blocks alive in each (at most `most`, largest
// first; the rest counted).
nlohmann::json segments_of(const torch_snapshot& s, int dev, std::size_t at, const view_walk& v) {
  const auto segs = segments_at(s, dev, at);
  std::vector<std::pair<std::uint64_t, std::int64_t>> live;  // address, bytes: in address order
  live.reserve(v.live.size());
  v.live.for_each([&](std::uint64_t a, const view_walk::live_block& b) { live.push_back({a, b.bytes}); });
  std::sort(live.begin(), live.end());
  std::vector<std::tuple<std::int64_t, std::uint64_t, std::int64_t, std::int64_t>> rows;  // size, addr, live
  for (const auto& [addr, sz] : segs) {
    std::int64_t used = 0, blocks = 0;
    const std::uint64_t end = addr + static_cast<std::uint64_t>(std::max<std::int64_t>(0, sz.first));
    const std::pair<std::uint64_t, std::int64_t> first{addr, INT64_MIN};
    for (auto it = std::lower_bound(live.begin(), live.end(), first); it != live.end() && it->first < end; ++it) {
      used += it->second;
      ++blocks;
    }
    rows.emplace_back(sz.first, addr, used, blocks);
  }
  std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x > y; });
  nlohmann::json list = nlohmann::json::array();
  std::int64_t total = 0;
  for (const auto& [size, addr, used, blocks] : rows) {
    total += size;
    if (list.size() < snapshot_view_limits::segments)
      list.push_back({{"address", addr}, {"bytes", size}, {"live_bytes", used}, {"live_blocks", blocks}});
  }
  return {{"count", rows.size()}, {"bytes", total}, {"list", list}};
}

// The view of device `dev`: the curves downsampled to at most snapshot_view_limits::columns columns (each
// the largest value of its events, so no peak is lost; the stack is the one at the column's largest
// requested), the largest blocks and the segments at the requested peak (exact).
nlohmann::json device_view(const torch_snapshot& s, int dev) {
  const auto& ev = s.devices[static_cast<std::size_t>(dev)];
  const window w = window_of(s, dev);
  const bool completions = has_completions(ev);
  frame_namer namer(s.doc);
  const std::size_t n = ev.size();
  const std::size_t width =
      std::max<std::size_t>(1, (n + snapshot_view_limits::columns - 1) / snapshot_view_limits::columns);
  const std::size_t cols = n == 0 ? 0 : (n + width - 1) / width;
  // Walk 1: the columns' largest requested (and where) and reserved; each frame's largest live bytes.
  view_walk v = start_walk(w);
  std::vector<std::int64_t> col_req(cols, 0), col_res(cols, 0), most(1, v.per_frame[0]);
  std::vector<std::size_t> col_at(cols, 0);
  std::int64_t peak = v.requested;
  std::size_t peak_at = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t grew = v.step(ev[i], completions, namer);
    most.resize(v.per_frame.size(), 0);
    if (grew != SIZE_MAX) most[grew] = std::max(most[grew], v.per_frame[grew]);
    const std::size_t c = i / width;
    if (i % width == 0 || v.requested > col_req[c]) {
      col_req[c] = v.requested;
      col_at[c] = i;
    }
    col_res[c] = i % width == 0 ? v.reserved : std::max(col_res[c], v.reserved);
    if (v.requested > peak) {
      peak = v.requested;
      peak_at = i;
    }
  }
  // The frames drawn: the largest by their own largest live bytes; the rest are "other".
  std::vector<std::size_t> order(most.size());
  for (std::size_t f = 0; f < order.size(); ++f) order[f] = f;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return most[a] != most[b] ? most[a] > most[b] : a < b; });
  if (order.size() > snapshot_view_limits::frames) order.resize(snapshot_view_limits::frames);
  // Walk 2: the stacks at each column's largest requested, and the live set at the peak.
  view_walk v2 = start_walk(w);
  nlohmann::json stacks = nlohmann::json::array(), largest, segs;
  std::int64_t reserved_at_peak = v2.reserved;
  auto stack_now = [&] {
    nlohmann::json row = nlohmann::json::array();
    std::int64_t shown = 0;
    for (std::size_t f : order) {
      const std::int64_t b = f < v2.per_frame.size() ? v2.per_frame[f] : 0;
      row.push_back(b);
      shown += b;
    }
    row.push_back(v2.requested - shown);
    return row;
  };
  for (std::size_t i = 0; i < n; ++i) {
    // The frame ids of walk 2 are assigned in the same order as walk 1's: both walk the same events.
    v2.step(ev[i], completions, namer);
    if (col_at[i / width] == i) stacks.push_back(stack_now());
    if (i == peak_at) {
      largest = largest_of(v2, s.doc, snapshot_view_limits::largest);
      segs = segments_of(s, dev, i, v2);
      reserved_at_peak = v2.reserved;
    }
  }
  if (segs.is_null()) {  // no events
    largest = largest_of(v2, s.doc, snapshot_view_limits::largest);
    segs = segments_of(s, dev, 0, v2);
  }
  nlohmann::json frames = nlohmann::json::array();
  for (std::size_t f : order) frames.push_back(v.names[f]);
  frames.push_back("other frames");
  nlohmann::json columns = nlohmann::json::array();
  for (std::size_t c = 0; c < cols; ++c)
    columns.push_back({c * width, std::min(n, (c + 1) * width), col_req[c], col_res[c]});
  return {{"device", dev},
          {"events", n},
          {"reserved_from", w.segment_events ? "segment events"
                                             : "the final segments (no segment events: flat over the trace)"},
          {"columns", columns},
          {"frames", frames},
          {"stacks", stacks},
          {"peak", {{"event", peak_at}, {"requested", peak}, {"reserved", reserved_at_peak}}},
          {"largest_at_peak", largest},
          {"segments_at_peak", segs},
          {"segments_from", w.segment_events ? "the final segments with the later segment events undone"
                                             : "the final segments (no segment events in the trace)"}};
}

}  // namespace

nlohmann::json tally_json(const snap_event_tally& t) {
  return {{"total", t.events},
          {"replayed", t.replayed()},
          {"allocs", t.allocs},
          {"frees", t.frees},
          {"releases", t.releases},
          {"not_replayed", t.not_replayed()},
          {"free_requested", t.requests},
          {"unmatched_frees", t.unmatched_frees},
          {"segment_events", t.segment_events},
          {"ooms", t.ooms},
          {"others", t.others}};
}

nlohmann::json peak_breakdown_json(const snap_peak_breakdown& b) {
  nlohmann::json phases = nlohmann::json::object(), kinds = nlohmann::json::object();
  for (std::size_t p = 0; p < snap_phases; ++p) phases[to_string(static_cast<snap_phase>(p))] = b.by_phase[p];
  for (std::size_t k = 0; k < snap_kinds; ++k) kinds[to_string(static_cast<snap_kind>(k))] = b.by_kind[k];
  nlohmann::json sites = nlohmann::json::array();
  std::size_t rest = 0, rest_blocks = 0;
  std::int64_t rest_bytes = 0;
  for (const auto& x : b.sites) {
    if (sites.size() < snapshot_view_limits::sites) {
      sites.push_back({{"site", x.site}, {"blocks", x.blocks}, {"bytes", x.bytes}, {"largest", x.largest}});
      continue;
    }
    ++rest;
    rest_blocks += x.blocks;
    rest_bytes += x.bytes;
  }
  return {{"inferred", true},
          {"rules", "docs/snapshots.md, \"Phases and kinds\" (probes/snapshots/peak_breakdown.hpp)"},
          {"bytes", b.total},
          {"peak_phase", to_string(b.peak_phase)},
          {"peak_phase_how", b.peak_phase_how},
          {"frames_recorded", b.frames_recorded},
          {"by_phase", phases},
          {"by_kind", kinds},
          {"by_site", sites},
          {"other_sites", {{"sites", rest}, {"blocks", rest_blocks}, {"bytes", rest_bytes}}}};
}

nlohmann::json snapshot_view(const torch_snapshot& s) {
  // The device with the most events (a one-GPU capture records one).
  std::size_t dev = 0;
  for (std::size_t d = 1; d < s.devices.size(); ++d)
    if (s.devices[d].size() > s.devices[dev].size()) dev = d;
  if (s.devices.empty()) return nullptr;
  nlohmann::json v = device_view(s, static_cast<int>(dev));
  v["version"] = 1;
  v["note"] =
      "columns: [first event, end event, requested bytes, reserved bytes], each the largest over its "
      "events; stacks: the requested bytes per top user frame (frames, last: the rest) at each column's "
      "largest requested; largest_at_peak and segments_at_peak at the requested peak, exact";
  return v;
}

nlohmann::json snapshot_record(const torch_snapshot& s, const snap_summary& sum) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : sum.devices) {
    nlohmann::json largest = nlohmann::json::array();
    for (const auto& b : d.largest_at_peak)
      largest.push_back({{"address", b.addr}, {"bytes", b.size}, {"frame", b.frame}});
    nlohmann::json ooms = nlohmann::json::array();
    for (const auto& o : d.ooms)
      ooms.push_back(
          {{"event", o.event}, {"bytes", o.size}, {"device_free", o.device_free}, {"frame", o.frame}});
    devices.push_back({{"device", d.device},
                       {"events", d.events},
                       {"counts", d.counts},
                       {"streams", d.streams},
                       {"cold", d.cold},
                       {"cold_why", d.cold_why},
                       {"live_before_window", {{"blocks", d.live_before}, {"bytes", d.live_before_bytes}}},
                       {"start_state", d.cold ? nlohmann::json(nullptr)
                                              : nlohmann::json{{"reconstructed", d.start_reconstructed},
                                                               {"how", d.start_why}}},
                       {"peak_requested", {{"bytes", d.peak_requested}, {"event", d.peak_requested_event}}},
                       {"peak_reserved",
                        {{"bytes", d.peak_reserved},
                         {"event", d.peak_reserved_event},
                         {"from_segment_events", d.reserved_from_events}}},
                       {"requested_at_reserved_peak", d.requested_at_reserved_peak},
                       {"fragmentation_at_reserved_peak", d.fragmentation_at_reserved_peak},
                       {"largest_live_at_peak", largest},
                       {"events_replayed", tally_json(d.tally)},
                       {"at_peak", peak_breakdown_json(d.at_peak)},
                       {"ooms", ooms},
                       {"empty_cache_calls", d.empty_cache_calls}});
  }
  nlohmann::json settings = nullptr;
  if (s.settings.recorded)
    settings = {{"PYTORCH_CUDA_ALLOC_CONF", s.settings.conf},
                {"max_split_size", s.settings.max_split_size ? nlohmann::json(*s.settings.max_split_size)
                                                             : nlohmann::json(nullptr)},
                {"expandable_segments", s.settings.expandable_segments},
                {"garbage_collection_threshold", s.settings.garbage_collection_threshold}};
  return records::enveloped(records::kind::measurement,
                            {{"backend", "pytorch-snapshot"},
                             {"measured", true},
                             {"source", s.origin},
                             {"capacity", s.capacity ? nlohmann::json(*s.capacity) : nlohmann::json(nullptr)},
                             {"allocator_settings", settings},
                             {"devices", devices},
                             {"final_segments",
                              {{"count", sum.final_segments},
                               {"reserved", sum.final_reserved},
                               {"allocated", sum.final_allocated},
                               {"requested", sum.final_requested}}},
                             {"snapshot_view", snapshot_view(s)}});
}

}  // namespace headroom::probes
