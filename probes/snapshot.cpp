// snapshot.cpp: reading, summarising and replaying PyTorch memory snapshots (see snapshot.hpp). Field
// names follow torch/cuda/memory.py's _snapshot() and c10/cuda/CUDACachingAllocator.h's TraceEntry.
#include "snapshot.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <unordered_map>

#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "sim_device.hpp"

namespace headroom::probes {

const char* to_string(snap_action a) {
  switch (a) {
    case snap_action::alloc:
      return "alloc";
    case snap_action::free_requested:
      return "free_requested";
    case snap_action::free_completed:
      return "free_completed";
    case snap_action::segment_alloc:
      return "segment_alloc";
    case snap_action::segment_free:
      return "segment_free";
    case snap_action::segment_map:
      return "segment_map";
    case snap_action::segment_unmap:
      return "segment_unmap";
    case snap_action::oom:
      return "oom";
    case snap_action::snapshot:
      return "snapshot";
    case snap_action::other:
      return "other";
  }
  return "?";
}

namespace {

constexpr std::int64_t mib = 1 << 20;

snap_action action_from(std::string_view s) {
  if (s == "alloc") return snap_action::alloc;
  if (s == "free_requested" || s == "free") return snap_action::free_requested;
  if (s == "free_completed") return snap_action::free_completed;
  if (s == "segment_alloc") return snap_action::segment_alloc;
  if (s == "segment_free") return snap_action::segment_free;
  if (s == "segment_map") return snap_action::segment_map;
  if (s == "segment_unmap") return snap_action::segment_unmap;
  if (s == "oom") return snap_action::oom;
  if (s == "snapshot") return snap_action::snapshot;
  return snap_action::other;
}

// Field readers that name the field and where it is when it is missing or mistyped.
struct fields {
  const pdoc& d;
  const std::string& origin;
  std::uint32_t node;
  std::string where;

  std::optional<std::int64_t> opt_int(std::string_view key) const {
    auto v = d.get(node, key);
    if (!v || d.at(*v).k == pnode::kind::none) return std::nullopt;
    auto i = d.integer(*v);
    if (!i) throw bad_input(origin, where + "." + std::string(key) + " is not an integer");
    return i;
  }
  std::int64_t integer(std::string_view key) const {
    auto i = opt_int(key);
    if (!i) throw bad_input(origin, where + "." + std::string(key) + " is missing");
    return *i;
  }
  std::int64_t size(std::string_view key) const {
    const auto v = integer(key);
    if (v < 0 || v > (std::int64_t{1} << 50))
      throw bad_input(origin, where + "." + std::string(key) + " is absurd (" + std::to_string(v) + ")");
    return v;
  }
  std::string str(std::string_view key, const std::string& fallback = "") const {
    auto v = d.get(node, key);
    if (!v) return fallback;
    auto s = d.string(*v);
    if (!s) throw bad_input(origin, where + "." + std::string(key) + " is not a string");
    return std::string(*s);
  }
  std::optional<std::uint32_t> list(std::string_view key) const {
    auto v = d.get(node, key);
    if (!v || d.at(*v).k == pnode::kind::none) return std::nullopt;
    const auto k = d.at(*v).k;
    if (k != pnode::kind::list && k != pnode::kind::tuple)
      throw bad_input(origin, where + "." + std::string(key) + " is not a list");
    return v;
  }
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw bad_input(path, "cannot be read (missing or not a file)");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw bad_input(path, "cannot be read");
  return ss.str();
}

}  // namespace

torch_snapshot parse_snapshot(std::string_view bytes, const std::string& origin) {
  torch_snapshot s;
  s.origin = origin;
  if (looks_like_pickle(bytes)) {
    s.doc = read_pickle(bytes, origin);
  } else {
    auto j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
    if (j.is_discarded())
      throw bad_input(origin, "neither a pickle (protocol 2-5) nor JSON: not a PyTorch memory snapshot");
    s.doc = pdoc_from_json(j);
  }
  const pdoc& d = s.doc;
  if (d.at(d.root).k != pnode::kind::dict)
    throw bad_input(origin, "the snapshot is not a dict (expected segments, device_traces)");
  const fields top{d, origin, d.root, "snapshot"};
  // Allocator settings, when recorded.
  if (auto st = d.get(d.root, "allocator_settings"); st && d.at(*st).k == pnode::kind::dict) {
    const fields f{d, origin, *st, "allocator_settings"};
    s.settings.recorded = true;
    s.settings.conf = f.str("PYTORCH_CUDA_ALLOC_CONF");
    if (auto ms = f.opt_int("max_split_size"); ms && *ms > 0 && *ms < (std::int64_t{1} << 60))
      s.settings.max_split_size = *ms;
    if (auto e = d.get(*st, "expandable_segments"))
      s.settings.expandable_segments = d.integer(*e).value_or(0);
    if (auto g = d.get(*st, "garbage_collection_threshold"); g && d.at(*g).k == pnode::kind::floating)
      s.settings.garbage_collection_threshold = d.at(*g).f;
  }
  if (auto cap = top.opt_int("total_memory"); cap && *cap > 0) s.capacity = *cap;
  // Segments.
  if (auto segs = top.list("segments")) {
    const auto& kids = d.at(*segs).kids;
    for (std::size_t i = 0; i < kids.size(); ++i) {
      const fields f{d, origin, kids[i], "segments[" + std::to_string(i) + "]"};
      if (d.at(kids[i]).k != pnode::kind::dict) throw bad_input(origin, f.where + " is not a dict");
      snap_segment g;
      g.device = f.opt_int("device").value_or(0);
      g.address = static_cast<std::uint64_t>(f.integer("address"));
      g.total_size = f.size("total_size");
      g.allocated_size = f.opt_int("allocated_size").value_or(0);
      g.requested_size = f.opt_int("requested_size").value_or(0);
      g.stream = f.opt_int("stream").value_or(0);
      g.small = f.str("segment_type", "large") == "small";
      if (auto e = d.get(kids[i], "is_expandable")) g.expandable = d.integer(*e).value_or(0);
      if (auto blocks = f.list("blocks")) {
        const auto& bk = d.at(*blocks).kids;
        for (std::size_t b = 0; b < bk.size(); ++b) {
          const fields x{d, origin, bk[b], f.where + ".blocks[" + std::to_string(b) + "]"};
          if (d.at(bk[b]).k != pnode::kind::dict) throw bad_input(origin, x.where + " is not a dict");
          snap_block blk;
          blk.size = x.size("size");
          blk.requested = x.opt_int("requested_size").value_or(blk.size);
          const std::string state = x.str("state");
          blk.allocated = state == "active_allocated" || state == "active_pending_free";
          blk.address = static_cast<std::uint64_t>(x.opt_int("address").value_or(0));
          if (auto fr = x.list("frames")) blk.frames = *fr;
          g.blocks.push_back(blk);
        }
      }
      s.segments.push_back(std::move(g));
    }
  }
  // Device traces.
  auto traces = top.list("device_traces");
  if (!traces)
    throw bad_input(origin, "snapshot.device_traces is missing: record with _record_memory_history()");
  const auto& devs = d.at(*traces).kids;
  if (devs.size() > 4096) throw bad_input(origin, "more than 4096 device traces");
  for (std::size_t dev = 0; dev < devs.size(); ++dev) {
    const auto k = d.at(devs[dev]).k;
    if (k != pnode::kind::list && k != pnode::kind::tuple)
      throw bad_input(origin, "device_traces[" + std::to_string(dev) + "] is not a list");
    std::vector<snap_event> events;
    const auto& ev = d.at(devs[dev]).kids;
    events.reserve(ev.size());
    for (std::size_t i = 0; i < ev.size(); ++i) {
      const fields f{d, origin, ev[i],
                     "device_traces[" + std::to_string(dev) + "][" + std::to_string(i) + "]"};
      if (d.at(ev[i]).k != pnode::kind::dict) throw bad_input(origin, f.where + " is not a dict");
      snap_event e;
      e.action = action_from(f.str("action"));
      e.addr = static_cast<std::uint64_t>(f.opt_int("addr").value_or(0));
      e.size = f.opt_int("size").value_or(0);
      if (e.size < 0 || e.size > (std::int64_t{1} << 50))
        throw bad_input(origin, f.where + ".size is absurd (" + std::to_string(e.size) + ")");
      e.stream = f.opt_int("stream").value_or(0);
      e.time_us = f.opt_int("time_us").value_or(0);
      e.device_free = f.opt_int("device_free").value_or(-1);
      if (auto fr = f.list("frames")) e.frames = *fr;
      events.push_back(e);
    }
    s.devices.push_back(std::move(events));
  }
  return s;
}

torch_snapshot load_snapshot(const std::string& path) {
  const std::string bytes = read_all(path);
  return parse_snapshot(bytes, path);
}

namespace {

// Names frames once: snapshot frame dicts are shared through the memo, so a trace of 20,000 events has a
// few thousand distinct frames behind a million references.
class frame_namer {
 public:
  explicit frame_namer(const pdoc& d) : m_doc(d), m_kind(d.nodes.size(), unknown) {}
  std::string top(std::uint32_t frames) {
    if (frames == UINT32_MAX) return "";
    const std::string* first_py = nullptr;
    for (std::uint32_t f : m_doc.at(frames).kids) {
      if (m_kind[f] == unknown) classify(f);
      if (m_kind[f] == user) return m_text[f];
      if (m_kind[f] == torch_py && !first_py) first_py = &m_text[f];
    }
    return first_py ? *first_py : "";
  }

 private:
  enum : std::uint8_t { unknown, other, torch_py, user };
  void classify(std::uint32_t f) {
    m_kind[f] = other;
    if (m_doc.at(f).k != pnode::kind::dict) return;
    auto file = m_doc.get(f, "filename");
    auto name = m_doc.get(f, "name");
    if (!file || !name) return;
    auto fs = m_doc.string(*file);
    auto ns = m_doc.string(*name);
    if (!fs || !ns || fs->size() < 3 || fs->substr(fs->size() - 3) != ".py") return;
    const auto line_node = m_doc.get(f, "line");
    const auto line = line_node ? m_doc.integer(*line_node).value_or(0) : 0;
    const auto slash = fs->rfind('/');
    m_text[f] = std::string(*ns) + " (" +
                std::string(slash == std::string_view::npos ? *fs : fs->substr(slash + 1)) + ":" +
                std::to_string(line) + ")";
    m_kind[f] = fs->find("/torch/") != std::string_view::npos ? torch_py : user;
  }
  const pdoc& m_doc;
  std::vector<std::uint8_t> m_kind;
  std::unordered_map<std::uint32_t, std::string> m_text;
};

}  // namespace

std::string top_user_frame(const pdoc& doc, std::uint32_t frames) {
  return frame_namer(doc).top(frames);
}

namespace {

std::string mib_text(std::int64_t b) {
  return trim(static_cast<double>(b) / static_cast<double>(mib), 2) + " MiB";
}

// Blocks alive before the window of a trace: (address -> requested bytes), from frees of blocks the window
// never allocated and from allocated blocks of the final segments the window never allocated.
std::map<std::uint64_t, std::int64_t> live_before_window(const torch_snapshot& s, int device) {
  std::map<std::uint64_t, std::int64_t> before;
  std::set<std::uint64_t> live;
  for (const auto& e : s.devices[static_cast<std::size_t>(device)]) {
    if (e.action == snap_action::alloc) {
      live.insert(e.addr);
    } else if (e.action == snap_action::free_completed || e.action == snap_action::free_requested) {
      if (!live.count(e.addr)) {
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
      if (b.allocated && !live.count(b.address) && !before.count(b.address)) before[b.address] = b.requested;
  }
  return before;
}

// What a device's trace window is: cold (the allocator's state at its start is empty) or warm and why,
// the blocks alive before it (address -> requested bytes), and the segment bytes held before it.
struct window {
  bool cold = false;
  std::string why;
  std::map<std::uint64_t, std::int64_t> before;
  bool segment_events = false;
  std::int64_t held_before = 0;  // final segments less the window's net segment bytes (0 when cold)
};

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

// Returns whether event i closes a run of segment frees (or expandable unmaps) that no segment_alloc (or
// map) follows: torch.cuda.empty_cache() (an allocation's out-of-memory retry frees and then allocates).
bool ends_empty_cache(const std::vector<snap_event>& ev, std::size_t i) {
  const auto a = ev[i].action;
  if (a != snap_action::segment_free && a != snap_action::segment_unmap) return false;
  if (i + 1 == ev.size()) return true;
  const auto next = ev[i + 1].action;
  return next != snap_action::segment_free && next != snap_action::segment_alloc &&
         next != snap_action::segment_unmap && next != snap_action::segment_map;
}

// Returns whether event i closes any run of segment frees or unmaps: empty_cache(), or an allocation's
// out-of-memory retry (which then maps). Replayed as empty_cache() either way: the retry releases the same
// cached memory before mapping, so the state after is the same, whatever capacity the replay is given.
// Not with max_split_size, whose retry first frees only enough oversize blocks (the replay's own retry
// does that).
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
    const auto& before = w.before;
    d.live_before = before.size();
    for (const auto& [a, b] : before) d.live_before_bytes += b;
    d.cold = w.cold;
    d.cold_why = w.why;
    if (!d.cold) {
      const auto start = reconstruct_start(s, d.device);
      d.start_reconstructed = start.reconstructed;
      d.start_why = start.why;
    }
    // Requested over the trace (alloc adds, the completed free subtracts), starting from what was alive.
    const bool completions = has_completions(ev);
    std::map<std::uint64_t, std::pair<std::int64_t, std::string>> live;
    std::int64_t requested = d.live_before_bytes;
    std::map<std::uint64_t, std::int64_t> live_bytes;  // address -> bytes, for the largest at the peak
    for (const auto& [a, b] : before) live_bytes[a] = b;
    d.peak_requested = requested;
    d.reserved_from_events = w.segment_events;
    std::int64_t reserved = w.held_before;
    d.peak_reserved = reserved;
    d.requested_at_reserved_peak = requested;
    const std::map<std::uint64_t, std::int64_t> at_start = live_bytes;
    for (std::size_t i = 0; i < ev.size(); ++i) {
      const auto& e = ev[i];
      switch (e.action) {
        case snap_action::alloc:
          requested += e.size;
          live_bytes[e.addr] = e.size;
          break;
        case snap_action::free_completed:
        case snap_action::free_requested:
          if ((e.action == snap_action::free_completed) == completions) {
            auto it = live_bytes.find(e.addr);
            if (it != live_bytes.end()) {
              requested -= it->second;
              live_bytes.erase(it);
            }
          }
          break;
        case snap_action::segment_alloc:
        case snap_action::segment_map:
          reserved += e.size;
          break;
        case snap_action::segment_free:
        case snap_action::segment_unmap:
          reserved -= e.size;
          break;
        case snap_action::oom:
          d.ooms.push_back({i, e.size, e.device_free, names.top(e.frames)});
          break;
        default:
          break;
      }
      if (requested > d.peak_requested) {
        d.peak_requested = requested;
        d.peak_requested_event = i;
      }
      if (reserved > d.peak_reserved) {
        d.peak_reserved = reserved;
        d.peak_reserved_event = i;
        d.requested_at_reserved_peak = requested;
      }
      d.empty_cache_calls += ends_empty_cache(ev, i);
    }
    if (d.peak_reserved > 0)
      d.fragmentation_at_reserved_peak =
          1.0 - static_cast<double>(d.requested_at_reserved_peak) / static_cast<double>(d.peak_reserved);
    // The largest live blocks at the requested peak, with who allocated them.
    // The live set at the peak: a second pass up to it (copying the set at every new peak is quadratic).
    std::map<std::uint64_t, std::int64_t> at_peak = at_start;
    std::map<std::uint64_t, std::uint32_t> frames_of;
    if (d.peak_requested > d.live_before_bytes)
      for (std::size_t i = 0; i <= d.peak_requested_event && i < ev.size(); ++i) {
        const auto& e = ev[i];
        if (e.action == snap_action::alloc) {
          at_peak[e.addr] = e.size;
          frames_of[e.addr] = e.frames;
        } else if ((e.action == snap_action::free_completed && completions) ||
                   (e.action == snap_action::free_requested && !completions)) {
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
      d.largest_at_peak.push_back(
          {bysize[k].second, bysize[k].first,
           fr == frames_of.end() ? "(alive before recording)" : names.top(fr->second)});
    }
    out.devices.push_back(std::move(d));
  }
  return out;
}

start_state reconstruct_start(const torch_snapshot& s, int device) {
  start_state out;
  if (device < 0 || static_cast<std::size_t>(device) >= s.devices.size()) {
    out.why = "no device " + std::to_string(device) + " in the snapshot";
    return out;
  }
  const auto& ev = s.devices[static_cast<std::size_t>(device)];
  auto fail = [&](const std::string& why) {
    out = start_state{};
    out.why = why;
    return out;
  };
  if (s.settings.expandable_segments)
    return fail("recorded with expandable segments (ranges are not undone)");
  struct seg {
    std::int64_t size = 0, stream = 0;
    bool small = false;
  };
  struct live {
    std::int64_t size = 0, requested = 0, stream = 0;
    bool inferred = false;
  };
  std::map<std::uint64_t, seg> segs;
  std::map<std::uint64_t, live> blocks;
  for (const auto& g : s.segments) {
    if (g.device != device) continue;
    if (g.expandable) return fail("the final segments include an expandable one");
    segs[g.address] = {g.total_size, g.stream, g.small};
    for (const auto& b : g.blocks)
      if (b.allocated) blocks[b.address] = {b.size, b.requested, g.stream, false};
  }
  const bool completions = has_completions(ev);
  auto at = [](std::size_t i) { return "event " + std::to_string(i) + ": "; };
  for (std::size_t k = ev.size(); k-- > 0;) {
    const auto& e = ev[k];
    switch (e.action) {
      case snap_action::alloc: {
        auto it = blocks.find(e.addr);
        if (it == blocks.end())
          return fail(at(k) + "allocates " + std::to_string(e.addr) + ", which is not alive after it");
        blocks.erase(it);
        break;
      }
      case snap_action::free_requested:
      case snap_action::free_completed:
        if ((e.action == snap_action::free_completed) != completions) break;
        if (blocks.count(e.addr))
          return fail(at(k) + "frees " + std::to_string(e.addr) + ", which is alive after it");
        if (e.size <= 0) return fail(at(k) + "frees a block of " + std::to_string(e.size) + " bytes");
        blocks[e.addr] = {caching_allocator::round_size(e.size), e.size, e.stream, true};
        break;
      case snap_action::segment_alloc: {
        auto it = segs.find(e.addr);
        if (it == segs.end() || it->second.size != e.size)
          return fail(at(k) + "allocates a segment at " + std::to_string(e.addr) +
                      " that is not held after it");
        auto b = blocks.lower_bound(e.addr);
        if (b != blocks.end() && b->first < e.addr + static_cast<std::uint64_t>(e.size))
          return fail(at(k) + "allocates a segment that holds a block alive before it");
        segs.erase(it);
        break;
      }
      case snap_action::segment_free:
        if (segs.count(e.addr)) return fail(at(k) + "frees a segment that is held after it");
        segs[e.addr] = {e.size, e.stream, e.size == caching_allocator::small_buffer};
        break;
      case snap_action::segment_map:
      case snap_action::segment_unmap:
        return fail(at(k) + "expandable segments (map / unmap) are not undone");
      default:
        break;
    }
  }
  // Lay the blocks alive at the start into the segments held then.
  auto b = blocks.begin();
  for (const auto& [addr, g] : segs) {
    start_segment out_seg;
    out_seg.address = addr;
    out_seg.size = g.size;
    out_seg.stream = g.stream;
    out_seg.small = g.small;
    if (g.size <= 0 || addr > UINT64_MAX - static_cast<std::uint64_t>(g.size))
      return fail("a segment at " + std::to_string(addr) + " of " + std::to_string(g.size) + " bytes");
    const std::uint64_t end = addr + static_cast<std::uint64_t>(g.size);
    if (b != blocks.end() && b->first < addr)
      return fail("block " + std::to_string(b->first) + " alive at the start lies in no segment held then");
    std::uint64_t cursor = addr;
    for (; b != blocks.end() && b->first < end; ++b) {
      live l = b->second;
      if (l.stream != g.stream)
        return fail("block " + std::to_string(b->first) + " was used on stream " + std::to_string(l.stream) +
                    ", its segment on " + std::to_string(g.stream));
      auto nb = std::next(b);
      const std::uint64_t limit = nb != blocks.end() && nb->first < end ? nb->first : end;
      if (l.size <= 0 || l.size > static_cast<std::int64_t>(limit - b->first))
        return fail("block " + std::to_string(b->first) + " of " + std::to_string(l.size) +
                    " bytes overlaps the next block or its segment's end");
      // A remainder PyTorch would not have split off belongs to the block.
      const auto gap = static_cast<std::int64_t>(limit - b->first) - l.size;
      if (l.inferred && !g.small && gap > 0 && gap <= caching_allocator::small_size) l.size += gap;
      if (b->first > cursor)
        out_seg.blocks.push_back({cursor, static_cast<std::int64_t>(b->first - cursor), false, 0, false});
      out_seg.blocks.push_back({b->first, l.size, true, l.requested, l.inferred});
      ++out.live_blocks;
      out.inferred_sizes += l.inferred;
      out.requested += l.requested;
      cursor = b->first + static_cast<std::uint64_t>(l.size);
    }
    if (cursor < end)
      out_seg.blocks.push_back({cursor, static_cast<std::int64_t>(end - cursor), false, 0, false});
    for (const auto& x : out_seg.blocks)
      if (x.size % caching_allocator::min_block != 0 || x.requested < 0 || x.requested > x.size)
        return fail("block " + std::to_string(x.address) + " of " + std::to_string(x.size) +
                    " bytes (requested " + std::to_string(x.requested) +
                    ") is not one the allocator makes (512-byte multiples, request within the block)");
    out.reserved += g.size;
    out.segments.push_back(std::move(out_seg));
  }
  if (b != blocks.end())
    return fail("block " + std::to_string(b->first) + " alive at the start lies in no segment held then");
  out.reconstructed = true;
  out.why = std::to_string(out.segments.size()) + " segments (" + mib_text(out.reserved) + ") and " +
            std::to_string(out.live_blocks) + " live blocks undone from the final segments" +
            (out.inferred_sizes ? ", " + std::to_string(out.inferred_sizes) +
                                      (out.inferred_sizes == 1 ? " block size" : " block sizes") +
                                      " taken from the request (placement unaffected)"
                                : std::string());
  return out;
}

snapshot_trace snapshot_to_trace(const torch_snapshot& s, int device) {
  if (device < 0 || static_cast<std::size_t>(device) >= s.devices.size())
    throw bad_input("device", "the snapshot has " + std::to_string(s.devices.size()) +
                                  " device trace(s), no device " + std::to_string(device));
  const auto& ev = s.devices[static_cast<std::size_t>(device)];
  snapshot_trace out;
  out.device = device;
  step_trace& t = out.trace;
  t.model = s.origin;
  t.layout_text = "PyTorch memory snapshot, device " + std::to_string(device);
  out.cold = window_of(s, device).cold;
  if (!out.cold) out.start = reconstruct_start(s, device);
  out.approximate = !out.cold && !out.start.reconstructed;
  std::map<std::uint64_t, std::int32_t> live;  // address -> tensor
  auto add_alloc = [&](std::uint64_t addr, std::int64_t bytes, std::int64_t stream, const std::string& name,
                       std::size_t source) {
    trace_tensor x;
    x.name = name.empty() ? "block@" + std::to_string(addr) : name;
    x.bytes = bytes;
    x.dtype_bytes = 1;
    x.shape = {bytes};
    t.tensors.push_back(std::move(x));
    const auto id = static_cast<std::int32_t>(t.tensors.size() - 1);
    trace_event e;
    e.kind = event_kind::alloc;
    e.tensor = id;
    e.stream = static_cast<std::int32_t>(stream);
    t.events.push_back(e);
    out.source_event.push_back(source);
    live[addr] = id;
  };
  // Warm: the blocks alive before the window first, in address order (a replay under the recorded
  // settings adopts the reconstructed state instead of running these).
  if (out.start.reconstructed) {
    for (const auto& g : out.start.segments)
      for (const auto& b : g.blocks)
        if (b.allocated) {
          add_alloc(b.address, b.requested, g.stream, "alive before recording @" + std::to_string(b.address),
                    SIZE_MAX);
          out.start_tensor.push_back(static_cast<std::int32_t>(t.tensors.size() - 1));
        }
  } else if (!out.cold) {
    for (const auto& [addr, bytes] : live_before_window(s, device))
      add_alloc(addr, bytes, 0, "alive before recording @" + std::to_string(addr), SIZE_MAX);
  }
  const bool completions = has_completions(ev);
  frame_namer names(s.doc);
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const auto& e = ev[i];
    if (e.action == snap_action::alloc) {
      if (live.count(e.addr))
        throw bad_input(s.origin, "device_traces[" + std::to_string(device) + "][" + std::to_string(i) +
                                      "] allocates address " + std::to_string(e.addr) + " twice");
      add_alloc(e.addr, e.size, e.stream, names.top(e.frames), i);
    } else if ((e.action == snap_action::free_completed && completions) ||
               (e.action == snap_action::free_requested && !completions)) {
      auto it = live.find(e.addr);
      if (it == live.end()) continue;  // a block of the window before this one: not allocated in the trace
      trace_event f;
      f.kind = event_kind::free;
      f.tensor = it->second;
      f.stream = static_cast<std::int32_t>(e.stream);
      t.events.push_back(f);
      out.source_event.push_back(i);
      live.erase(it);
    } else if (ends_release_run(ev, i, s.settings.max_split_size.has_value())) {
      trace_event c;
      c.kind = event_kind::empty_cache;
      c.tensor = -1;
      t.events.push_back(c);
      out.source_event.push_back(i);
    }
  }
  if (s.capacity) t.capacity = *s.capacity;
  return out;
}

caching_options recorded_options(const torch_snapshot& s) {
  caching_options o;
  o.max_split_size = s.settings.max_split_size;
  o.expandable_segments = s.settings.expandable_segments;
  return o;
}

namespace {

// A device that hands the emulation the real segment addresses, in the order the real trace allocated
// them, while the sizes agree; the bytes are accounted by a simulated device of the given capacity.
class replaying_device final : public device {
 public:
  // `real_maps`: the addresses of the real trace's segment_map events, in order. A range is reserved just
  // before its first page is mapped, so while the replay agrees its base is the next real map's address.
  replaying_device(std::int64_t capacity, std::vector<std::pair<std::uint64_t, std::int64_t>> real,
                   std::vector<std::uint64_t> real_maps = {})
      : m_sim(capacity, 2 * mib), m_real(std::move(real)), m_real_maps(std::move(real_maps)) {}
  std::optional<std::uint64_t> map(std::int64_t bytes) override {
    auto a = m_sim.map(bytes);
    if (!a) return std::nullopt;
    maps.push_back({*a, bytes});
    if (m_next < m_real.size() && m_real[m_next].second == bytes && m_in_step) {
      const auto r = m_real[m_next++].first;
      maps.back().first = r;
      return r;
    }
    if (m_next < m_real.size()) ++m_next;
    return a;
  }
  void unmap(std::uint64_t address, std::int64_t bytes) override {
    m_sim.unmap(address, bytes);
    unmaps.push_back({address, bytes});
  }
  std::optional<std::uint64_t> reserve_range(std::int64_t bytes) override {
    auto a = m_sim.reserve_range(bytes);
    if (!a || !m_in_step || m_next_map >= m_real_maps.size()) return a;
    return m_real_maps[m_next_map];
  }
  bool map_at(std::uint64_t base, std::int64_t offset, std::int64_t bytes, std::int64_t page) override {
    if (!m_sim.map_at(base, offset, bytes, page)) return false;
    ++m_next_map;
    maps.push_back({base + static_cast<std::uint64_t>(offset), bytes});
    return true;
  }
  void unmap_at(std::uint64_t base, std::int64_t offset, std::int64_t bytes, std::int64_t page) override {
    m_sim.unmap_at(base, offset, bytes, page);
    unmaps.push_back({base + static_cast<std::uint64_t>(offset), bytes});
  }
  void release_range(std::uint64_t base, std::int64_t bytes) override { m_sim.release_range(base, bytes); }
  std::int64_t capacity() const override { return m_sim.capacity(); }
  std::int64_t used() const override { return m_sim.used(); }
  std::int64_t granularity() const override { return m_sim.granularity(); }
  memory_info memory() const override { return m_sim.memory(); }
  std::string describe() const override { return "snapshot replay over " + m_sim.describe(); }

  // Stop handing out real addresses once the emulation has diverged.
  void diverged() { m_in_step = false; }

  std::vector<std::pair<std::uint64_t, std::int64_t>> maps, unmaps;

 private:
  sim_device m_sim;
  std::vector<std::pair<std::uint64_t, std::int64_t>> m_real;
  std::vector<std::uint64_t> m_real_maps;
  std::size_t m_next = 0, m_next_map = 0;
  bool m_in_step = true;
};

}  // namespace

snapshot_replay replay_snapshot(const torch_snapshot& s, const snapshot_trace& st,
                                const caching_options& options, std::int64_t capacity, bool compare) {
  static const std::vector<snap_event> none;
  const auto& ev = static_cast<std::size_t>(st.device) < s.devices.size()
                       ? s.devices[static_cast<std::size_t>(st.device)]
                       : none;
  // The real segment creations, in order, and, per snapshot event index, the segments created just before
  // an alloc (the allocation that needed them).
  std::vector<std::pair<std::uint64_t, std::int64_t>> real;
  std::map<std::size_t, std::vector<std::int64_t>> real_before_alloc;
  std::vector<std::int64_t> pending;
  // Expandable segments: each growth of a range is a segment_map.
  std::vector<std::uint64_t> real_maps;
  for (std::size_t i = 0; i < ev.size(); ++i) {
    if (ev[i].action == snap_action::segment_alloc) {
      real.push_back({ev[i].addr, ev[i].size});
      pending.push_back(ev[i].size);
    } else if (ev[i].action == snap_action::segment_map) {
      real_maps.push_back(ev[i].addr);
      pending.push_back(ev[i].size);
    } else if (ev[i].action == snap_action::alloc) {
      real_before_alloc[i] = pending;
      pending.clear();
    }
  }
  // A warm trace starts from its reconstructed state under the settings it was recorded with; event by
  // event comparison needs a known start (cold, or reconstructed).
  const bool adopt = !st.cold && st.start.reconstructed && options == recorded_options(s);
  const bool by_event = compare && (st.cold || adopt);
  std::vector<std::pair<std::uint64_t, std::int64_t>> handed;  // real addresses, in the order mapped
  if (adopt)
    for (const auto& g : st.start.segments) handed.push_back({g.address, g.size});
  if (by_event) handed.insert(handed.end(), real.begin(), real.end());
  replaying_device dev(capacity, handed, by_event ? real_maps : std::vector<std::uint64_t>{});
  snapshot_replay r;
  r.capacity = capacity;
  r.compared = compare;
  r.from_start_state = adopt;
  std::size_t adopted_maps = 0;
  {
    caching_allocator a(dev, options);
    r.settings = a.describe();
    const step_trace& t = st.trace;
    std::vector<std::int64_t> handle(t.tensors.size(), -1);
    std::size_t first = 0;
    if (adopt) {
      std::size_t next_tensor = 0;
      for (const auto& g : st.start.segments) {
        std::vector<caching_allocator::adopted_block> blocks;
        for (const auto& b : g.blocks) blocks.push_back({b.size, b.allocated, b.requested});
        const auto got = a.adopt_segment(g.small, g.stream, blocks);
        if (!got) {  // the state before the window does not fit this capacity
          r.oom_event = 0;
          r.oom_bytes = g.size;
          break;
        }
        for (const auto h : *got) handle[static_cast<std::size_t>(st.start_tensor[next_tensor++])] = h;
      }
      adopted_maps = dev.maps.size();
      // The leading allocs of the blocks alive before the window are the adopted state.
      while (first < t.events.size() && st.source_event[first] == SIZE_MAX) ++first;
      const auto& stats = a.stats();
      r.peak_reserved = stats.reserved;
      r.peak_allocated = stats.allocated;
      r.peak_requested = stats.requested;
    }
    for (std::size_t i = first; i < t.events.size() && !r.oom_event; ++i) {
      const auto& e = t.events[i];
      const std::size_t source = st.source_event[i];
      if (e.kind == event_kind::empty_cache) {
        a.empty_cache();
      } else if (e.kind == event_kind::alloc) {
        const std::size_t maps_before = dev.maps.size();
        auto h = a.allocate_on(t.tensors[static_cast<std::size_t>(e.tensor)].bytes, e.stream);
        if (!h) {
          r.oom_event = source;
          r.oom_bytes = t.tensors[static_cast<std::size_t>(e.tensor)].bytes;
          break;
        }
        handle[static_cast<std::size_t>(e.tensor)] = *h;
        if (by_event && !r.diverged_at && source != SIZE_MAX) {
          std::vector<std::int64_t> emulated;
          for (std::size_t k = maps_before; k < dev.maps.size(); ++k) emulated.push_back(dev.maps[k].second);
          const auto& want = real_before_alloc[source];
          const std::uint64_t got_addr = a.address_of(*h);
          if (emulated != want) {
            r.diverged_at = source;
            auto list = [](const std::vector<std::int64_t>& v) {
              if (v.empty()) return std::string("no new segment");
              std::string x;
              for (auto b : v) x += (x.empty() ? "" : " + ") + mib_text(b);
              return "a new segment of " + x;
            };
            r.divergence = "alloc of " + mib_text(ev[source].size) + ": the real allocator made " +
                           list(want) + ", the emulation " + list(emulated);
            dev.diverged();
          } else if (got_addr != ev[source].addr) {
            r.diverged_at = source;
            r.divergence = "alloc of " + mib_text(ev[source].size) + ": placed at " +
                           std::to_string(got_addr) + " by the emulation, at " +
                           std::to_string(ev[source].addr) + " by the real allocator";
            dev.diverged();
          }
        }
      } else {
        auto& h = handle[static_cast<std::size_t>(e.tensor)];
        if (h >= 0) a.release(h);
        h = -1;
      }
      const auto& stats = a.stats();
      r.peak_reserved = std::max(r.peak_reserved, stats.reserved);
      r.peak_allocated = std::max(r.peak_allocated, stats.allocated);
      r.peak_requested = std::max(r.peak_requested, stats.requested);
    }
    r.retries = a.stats().retries;
  }
  r.segments_created = static_cast<std::int64_t>(dev.maps.size() - adopted_maps);
  if (compare) {
    const auto sum = summarise(s);
    if (static_cast<std::size_t>(st.device) < sum.devices.size())
      r.real_peak_reserved = sum.devices[static_cast<std::size_t>(st.device)].peak_reserved;
    r.real_segments_created = static_cast<std::int64_t>(real.size() + real_maps.size());
    if (!st.cold && !adopt)
      r.divergence =
          "warm trace: compared at the reserved peak only (the segments made before recording are not "
          "in the trace; the blocks alive then are allocated first, in address order)";
    else if (!r.diverged_at && r.real_peak_reserved != r.peak_reserved && !r.oom_event)
      r.divergence = "the segments agree event by event but the reserved peaks differ";
  }
  return r;
}

std::vector<what_if_row> what_if(const torch_snapshot& s, const snapshot_trace& t, std::int64_t capacity) {
  struct setting {
    std::string name;
    caching_options o;
  };
  std::vector<setting> settings;
  settings.push_back({"default (no options)", {}});
  caching_options exp;
  exp.expandable_segments = true;
  settings.push_back({"expandable_segments:True", exp});
  for (std::int64_t ms : {128, 512}) {
    caching_options o;
    o.max_split_size = ms * mib;
    settings.push_back({"max_split_size_mb:" + std::to_string(ms), o});
  }
  std::vector<what_if_row> rows;
  for (const auto& st : settings) {
    what_if_row row;
    row.setting = st.name;
    row.replayed = replay_snapshot(s, t, st.o, capacity, false);
    // The least capacity that runs: bisection in 2 MiB steps between the requested peak and what the
    // replay reserved at the full capacity (retries can make it run below that).
    std::int64_t lo = std::max<std::int64_t>(1, row.replayed.peak_requested / (2 * mib)),
                 hi = row.replayed.oom_event ? capacity / (2 * mib)
                                             : (row.replayed.peak_reserved + 2 * mib - 1) / (2 * mib);
    if (row.replayed.oom_event) {
      row.least_capacity = 0;  // does not run at the given capacity
    } else {
      while (lo < hi) {
        const std::int64_t mid = lo + (hi - lo) / 2;
        const auto r = replay_snapshot(s, t, st.o, mid * 2 * mib, false);
        if (r.oom_event)
          lo = mid + 1;
        else
          hi = mid;
      }
      row.least_capacity = hi * 2 * mib;
    }
    rows.push_back(std::move(row));
  }
  return rows;
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
  return {{"schema", "headroom.measurement/1.2"},
          {"backend", "pytorch-snapshot"},
          {"measured", true},
          {"source", s.origin},
          {"capacity", s.capacity ? nlohmann::json(*s.capacity) : nlohmann::json(nullptr)},
          {"allocator_settings", settings},
          {"devices", devices},
          {"final_segments",
           {{"count", sum.final_segments},
            {"reserved", sum.final_reserved},
            {"allocated", sum.final_allocated},
            {"requested", sum.final_requested}}}};
}

}  // namespace headroom::probes
