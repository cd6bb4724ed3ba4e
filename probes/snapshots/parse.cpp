// parse.cpp: reading a PyTorch memory snapshot (pickle or JSON) into snapshot.hpp's types. Field names
// follow torch/cuda/memory.py's _snapshot() and c10/cuda/CUDACachingAllocator.h's TraceEntry.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "planner/errors.hpp"
#include "probes/snapshots/snapshot.hpp"

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

}  // namespace headroom::probes
