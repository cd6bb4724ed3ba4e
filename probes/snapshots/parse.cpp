// parse.cpp: reading a PyTorch memory snapshot (pickle or JSON) into snapshot.hpp's types. Field names
// follow torch/cuda/memory.py's _snapshot() and c10/cuda/CUDACachingAllocator.h's TraceEntry.
#include <array>
#include <nlohmann/json.hpp>

#include "planner/errors.hpp"
#include "planner/large_buffers.hpp"
#include "planner/model_files.hpp"
#include "probes/snapshots/file_bytes.hpp"
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

// The fields the parser reads. A dict is scanned once into slots (the last occurrence wins, as when
// Python builds the dict), so every lookup costs the same whatever else the dict holds, and the scan is the
// one cost the budget below charges.
constexpr std::string_view known[] = {"action",
                                      "addr",
                                      "size",
                                      "stream",
                                      "time_us",
                                      "device_free",
                                      "frames",
                                      "device",
                                      "address",
                                      "total_size",
                                      "allocated_size",
                                      "requested_size",
                                      "segment_type",
                                      "is_expandable",
                                      "blocks",
                                      "state",
                                      "PYTORCH_CUDA_ALLOC_CONF",
                                      "max_split_size",
                                      "expandable_segments",
                                      "garbage_collection_threshold",
                                      "total_memory",
                                      "segments",
                                      "device_traces",
                                      "allocator_settings"};
constexpr std::size_t n_known = std::size(known);
// A record (event, segment, block) of a real snapshot has about ten fields; one with thousands is not one.
constexpr std::size_t max_record_fields = 256;

// Returns the slot of `name` (at compile time: an unknown name does not compile).
consteval std::size_t slot(std::string_view name) {
  for (std::size_t i = 0; i < n_known; ++i)
    if (known[i] == name) return i;
  throw "not a field the parser knows";
}

// The slots whose names have each length, as bits: a key is compared with at most a few names.
constexpr std::array<std::uint32_t, 32> slots_by_length = [] {
  std::array<std::uint32_t, 32> a{};
  for (std::size_t i = 0; i < n_known; ++i) a[known[i].size()] |= std::uint32_t{1} << i;
  return a;
}();

// The slot of a key node's string (n_known when the parser does not read it), remembered by node: the
// keys of a real snapshot's records are a handful of strings the pickle's memo shares, so a million
// records cost a million lookups here instead of a million string comparisons. Direct-mapped: a node
// id shown twice in a row at one entry is a hit, anything else is compared once more.
class key_slots {
 public:
  std::size_t of(const pdoc& d, std::uint32_t key) {
    entry& e = m_entries[key % m_entries.size()];
    if (e.node != key) e = {key, static_cast<std::uint8_t>(compute(d, key))};
    return e.slot;
  }

 private:
  static std::size_t compute(const pdoc& d, std::uint32_t key) {
    const auto k = d.string(key);
    if (!k || k->size() >= slots_by_length.size()) return n_known;
    for (std::uint32_t bits = slots_by_length[k->size()]; bits; bits &= bits - 1) {
      const auto at = static_cast<std::size_t>(__builtin_ctz(bits));
      if (known[at] == *k) return at;
    }
    return n_known;
  }
  struct entry {
    std::uint32_t node = UINT32_MAX;
    std::uint8_t slot = 0;
  };
  std::array<entry, 256> m_entries{};
};
static_assert(n_known < 256);

// Field readers that name the field and where it is when it is missing or mistyped. Where a record is
// ("device_traces[0][12]") is written out only for a message: `base` and `index` hold it until then.
struct fields {
  static constexpr std::size_t no_index = SIZE_MAX;
  const pdoc& d;
  const std::string& origin;
  std::string_view base;  // the caller keeps it alive
  std::size_t index = no_index;
  std::array<std::uint32_t, n_known> slots;  // the value's node, or UINT32_MAX when absent

  fields(const pdoc& doc, const std::string& o, std::uint32_t node, std::string_view b,
         std::size_t idx = no_index, key_slots* keys = nullptr)
      : d(doc), origin(o), base(b), index(idx) {
    slots.fill(UINT32_MAX);
    const pnode n = d.at(node);
    if (n.k != pnode::kind::dict) return;
    key_slots local;
    key_slots& k = keys ? *keys : local;
    for (std::size_t i = 0; i + 1 < n.kids.size(); i += 2)
      if (const std::size_t at = k.of(d, n.kids[i]); at < n_known) slots[at] = n.kids[i + 1];
  }
  std::string where() const {
    return index == no_index ? std::string(base) : std::string(base) + "[" + std::to_string(index) + "]";
  }
  std::optional<std::uint32_t> get(std::size_t at) const {
    if (slots[at] == UINT32_MAX) return std::nullopt;
    return slots[at];
  }
  std::string name(std::size_t at) const { return where() + "." + std::string(known[at]); }
  std::optional<std::int64_t> opt_int(std::size_t at) const {
    auto v = get(at);
    if (!v || d.nodes[*v].k == pnode::kind::none) return std::nullopt;
    auto i = d.integer(*v);
    if (!i) throw bad_input(origin, name(at) + " is not an integer");
    return i;
  }
  std::int64_t integer(std::size_t at) const {
    auto i = opt_int(at);
    if (!i) throw bad_input(origin, name(at) + " is missing");
    return *i;
  }
  std::int64_t size(std::size_t at) const {
    const auto v = integer(at);
    if (v < 0 || v > (std::int64_t{1} << 50))
      throw bad_input(origin, name(at) + " is absurd (" + std::to_string(v) + ")");
    return v;
  }
  // Returns the string under `at` (a view into the document), `fallback` when absent.
  std::string_view str(std::size_t at, std::string_view fallback = "") const {
    auto v = get(at);
    if (!v) return fallback;
    auto s = d.string(*v);
    if (!s) throw bad_input(origin, name(at) + " is not a string");
    return *s;
  }
  std::optional<std::uint32_t> list(std::size_t at) const {
    auto v = get(at);
    if (!v || d.nodes[*v].k == pnode::kind::none) return std::nullopt;
    const auto k = d.nodes[*v].k;
    if (k != pnode::kind::list && k != pnode::kind::tuple)
      throw bad_input(origin, name(at) + " is not a list");
    return v;
  }
};

// Counts what the parser materialises against snapshot_limits: records, and the dict entries of each
// (the one scan a record costs, fields above). A list's records and their entries are charged before it
// is expanded, so a memo reference that repeats a list or a dict thousands of times is refused at once.
class budget {
 public:
  budget(const snapshot_limits& l, const std::string& origin) : m_limits(l), m_origin(origin) {}
  // Charges the records of list `list` and their dict entries.
  void list(const pdoc& d, std::uint32_t list, const std::string& where) {
    const auto kids = d.at(list).kids;
    m_records += kids.size();
    if (m_records > m_limits.max_records)
      throw bad_input(m_origin, "the snapshot expands to more than " + std::to_string(m_limits.max_records) +
                                    " records (events, segments, blocks; each reference to a shared list "
                                    "counts) at " +
                                    where + ": refused");
    for (std::size_t i = 0; i < kids.size(); ++i) {
      const auto& kid = d.nodes[kids[i]];
      const std::size_t n =
          kid.k == pnode::kind::dict || kid.k == pnode::kind::list || kid.k == pnode::kind::tuple ? kid.n / 2
                                                                                                  : 0;
      if (n > max_record_fields)
        throw bad_input(m_origin, where + "[" + std::to_string(i) + "] has " + std::to_string(n) +
                                      " fields: a snapshot record has at most " +
                                      std::to_string(max_record_fields));
      m_fields += n;
      if (m_fields > m_limits.max_fields)
        throw bad_input(m_origin, "the snapshot expands to more than " + std::to_string(m_limits.max_fields) +
                                      " record fields (each reference to a shared dict counts) at " + where +
                                      ": refused");
    }
  }
  // Returns the fields of record `base`[`index`] (node `node`) of a charged list; refuses one that is not
  // a dict.
  fields record(const pdoc& d, std::uint32_t node, std::string_view base, std::size_t index) {
    fields f(d, m_origin, node, base, index, &m_keys);
    if (d.nodes[node].k != pnode::kind::dict) throw bad_input(m_origin, f.where() + " is not a dict");
    return f;
  }

 private:
  const snapshot_limits& m_limits;
  const std::string& m_origin;
  std::size_t m_records = 0, m_fields = 0;
  key_slots m_keys;
};

void read_settings(torch_snapshot& s, const fields& top) {
  const pdoc& d = s.doc;
  auto st = top.get(slot("allocator_settings"));
  if (!st || d.at(*st).k != pnode::kind::dict) return;
  const fields f{d, s.origin, *st, "allocator_settings"};
  s.settings.recorded = true;
  s.settings.conf = std::string(f.str(slot("PYTORCH_CUDA_ALLOC_CONF")));
  if (auto ms = f.opt_int(slot("max_split_size")); ms && *ms > 0 && *ms < (std::int64_t{1} << 60))
    s.settings.max_split_size = *ms;
  if (auto e = f.get(slot("expandable_segments"))) s.settings.expandable_segments = d.integer(*e).value_or(0);
  if (auto g = f.get(slot("garbage_collection_threshold")); g && d.nodes[*g].k == pnode::kind::floating)
    s.settings.garbage_collection_threshold = d.at(*g).f;
}

snap_block read_block(const fields& x) {
  snap_block blk;
  blk.size = x.size(slot("size"));
  blk.requested = x.opt_int(slot("requested_size")).value_or(blk.size);
  const std::string_view state = x.str(slot("state"));
  blk.allocated = state == "active_allocated" || state == "active_pending_free";
  blk.address = static_cast<std::uint64_t>(x.opt_int(slot("address")).value_or(0));
  if (auto fr = x.list(slot("frames"))) blk.frames = *fr;
  return blk;
}

// The sizes of one device's events, or of all final segments, added up: no real trace comes near it, and
// below it no sum of sizes the summary and the replay keep can overflow.
constexpr std::uint64_t max_trace_bytes = std::uint64_t{1} << 62;

snap_segment read_segment(const fields& f) {
  snap_segment g;
  g.device = f.opt_int(slot("device")).value_or(0);
  g.address = static_cast<std::uint64_t>(f.integer(slot("address")));
  g.total_size = f.size(slot("total_size"));
  g.allocated_size = f.opt_int(slot("allocated_size")).value_or(0);
  g.requested_size = f.opt_int(slot("requested_size")).value_or(0);
  g.stream = f.opt_int(slot("stream")).value_or(0);
  g.small = f.str(slot("segment_type"), "large") == "small";
  if (auto e = f.get(slot("is_expandable"))) g.expandable = f.d.integer(*e).value_or(0);
  return g;
}

void read_segments(torch_snapshot& s, const fields& top, budget& b) {
  const pdoc& d = s.doc;
  const auto segs = top.list(slot("segments"));
  if (!segs) return;
  const auto kids = d.at(*segs).kids;
  b.list(d, *segs, "snapshot.segments");
  // Every segment's block list is charged before any block is expanded.
  for (std::size_t i = 0; i < kids.size(); ++i) {
    const fields f = b.record(d, kids[i], "segments", i);
    if (auto blocks = f.list(slot("blocks"))) b.list(d, *blocks, f.where() + ".blocks");
  }
  std::uint64_t total = 0;
  s.segments.reserve(kids.size());
  for (std::size_t i = 0; i < kids.size(); ++i) {
    const fields f = b.record(d, kids[i], "segments", i);
    snap_segment g = read_segment(f);
    total += static_cast<std::uint64_t>(g.total_size);
    if (total > max_trace_bytes)
      throw bad_input(s.origin, f.where() + ": the segments' sizes add up past 2^62 bytes: absurd");
    if (auto blocks = f.list(slot("blocks"))) {
      const auto bk = d.at(*blocks).kids;
      const std::string base = f.where() + ".blocks";
      g.blocks.reserve(bk.size());
      for (std::size_t k = 0; k < bk.size(); ++k) g.blocks.push_back(read_block(b.record(d, bk[k], base, k)));
    }
    s.segments.push_back(std::move(g));
  }
}

snap_event read_event(const fields& f) {
  snap_event e;
  e.action = action_from(f.str(slot("action")));
  e.addr = static_cast<std::uint64_t>(f.opt_int(slot("addr")).value_or(0));
  e.size = f.opt_int(slot("size")).value_or(0);
  if (e.size < 0 || e.size > (std::int64_t{1} << 50))
    throw bad_input(f.origin, f.where() + ".size is absurd (" + std::to_string(e.size) + ")");
  e.stream = f.opt_int(slot("stream")).value_or(0);
  e.time_us = f.opt_int(slot("time_us")).value_or(0);
  e.device_free = f.opt_int(slot("device_free")).value_or(-1);
  if (auto fr = f.list(slot("frames"))) e.frames = *fr;
  return e;
}

// An event read in one pass over its dict, without the checked path's slot table: a million-event trace
// spends most of its field reading there. Returns false, with `e` unspecified, for anything the checked
// path (read_event) must look at to name it: a record that is not a dict, or a field of another type than
// read_event takes. Both read the same fields with the same defaults, the last occurrence of a key winning.
class fast_events {
 public:
  bool read(const pdoc& d, std::uint32_t node, snap_event& e) {
    const pdoc::slot& n = d.nodes[node];
    if (n.k != pnode::kind::dict) return false;
    e = snap_event{};
    const std::uint32_t* kid = d.items.data() + static_cast<std::uint32_t>(n.v);
    for (std::uint32_t i = 0; i + 1 < n.n; i += 2) {
      const std::size_t at = m_keys.of(d, kid[i]);
      if (at >= n_known) continue;
      const pdoc::slot& v = d.nodes[kid[i + 1]];
      if (at == slot("action")) {
        if (v.k != pnode::kind::string) return false;
        e.action = action_of(d, kid[i + 1]);
      } else if (at == slot("frames")) {
        if (v.k == pnode::kind::none) {
          e.frames = UINT32_MAX;
        } else {
          if (v.k != pnode::kind::list && v.k != pnode::kind::tuple) return false;
          e.frames = kid[i + 1];
        }
      } else if (at == slot("addr") || at == slot("size") || at == slot("stream") || at == slot("time_us") ||
                 at == slot("device_free")) {
        std::int64_t x = at == slot("device_free") ? -1 : 0;  // None: as absent
        if (v.k != pnode::kind::none) {
          if ((v.k != pnode::kind::integer || v.wide) && v.k != pnode::kind::boolean) return false;
          x = static_cast<std::int64_t>(v.v);
        }
        set_integer(e, at, x);
      }
    }
    return true;
  }

 private:
  static void set_integer(snap_event& e, std::size_t at, std::int64_t x) {
    if (at == slot("addr")) e.addr = static_cast<std::uint64_t>(x);
    if (at == slot("size")) e.size = x;
    if (at == slot("stream")) e.stream = x;
    if (at == slot("time_us")) e.time_us = x;
    if (at == slot("device_free")) e.device_free = x;
  }
  // The action of a string node, remembered by node: a trace's actions are a few strings the memo shares.
  snap_action action_of(const pdoc& d, std::uint32_t node) {
    auto& [id, a] = m_actions[node % m_actions.size()];
    if (id != node) {
      id = node;
      a = action_from(*d.string(node));
    }
    return a;
  }
  key_slots m_keys;
  std::array<std::pair<std::uint32_t, snap_action>, 64> m_actions = [] {
    std::array<std::pair<std::uint32_t, snap_action>, 64> a;
    a.fill({UINT32_MAX, snap_action::other});
    return a;
  }();
};

void read_traces(torch_snapshot& s, const fields& top, budget& b) {
  const pdoc& d = s.doc;
  auto traces = top.list(slot("device_traces"));
  if (!traces)
    throw bad_input(s.origin, "snapshot.device_traces is missing: record with _record_memory_history()");
  const auto devs = d.at(*traces).kids;
  if (devs.size() > 4096) throw bad_input(s.origin, "more than 4096 device traces");
  // Every device's list is charged before any is expanded.
  for (std::size_t dev = 0; dev < devs.size(); ++dev) {
    const auto k = d.nodes[devs[dev]].k;
    if (k != pnode::kind::list && k != pnode::kind::tuple)
      throw bad_input(s.origin, "device_traces[" + std::to_string(dev) + "] is not a list");
    b.list(d, devs[dev], "device_traces[" + std::to_string(dev) + "]");
  }
  s.devices.reserve(devs.size());
  for (std::size_t dev = 0; dev < devs.size(); ++dev) {
    std::vector<snap_event> events;
    const auto ev = d.at(devs[dev]).kids;
    reserve_large(events, ev.size());
    const std::string base = "device_traces[" + std::to_string(dev) + "]";
    std::uint64_t bytes = 0;  // every running sum of the trace's sizes (summary.cpp) stays below this
    fast_events fast;
    for (std::size_t i = 0; i < ev.size(); ++i) {
      snap_event e;
      if (!fast.read(d, ev[i], e) || e.size < 0 || e.size > (std::int64_t{1} << 50))
        e = read_event(b.record(d, ev[i], base, i));  // names what is wrong
      events.push_back(e);
      bytes += static_cast<std::uint64_t>(e.size);
      if (bytes > max_trace_bytes)
        throw bad_input(s.origin, fields(d, s.origin, ev[i], base, i).where() +
                                      ": the trace's sizes add up past 2^62 bytes: absurd");
    }
    s.devices.push_back(std::move(events));
  }
}

// Returns the document in `bytes` (a pickle, or JSON).
pdoc read_document(std::string_view bytes, const std::string& origin, const snapshot_limits& limits) {
  if (looks_like_pickle(bytes)) {
    if (bytes.size() > limits.max_pickle_bytes)
      throw bad_input(origin, "is larger than the " + std::to_string(limits.max_pickle_bytes >> 20) +
                                  " MiB a snapshot pickle may be");
    return read_pickle(bytes, origin);
  }
  const auto first = bytes.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || (bytes[first] != '{' && bytes[first] != '['))
    throw bad_input(origin, "neither a pickle (protocol 2-5) nor JSON: not a PyTorch memory snapshot");
  if (bytes.size() > limits.max_json_bytes)
    throw bad_input(origin, "is larger than the " + std::to_string(limits.max_json_bytes >> 20) +
                                " MiB a snapshot written as JSON may be");
  return pdoc_from_json(parse_json_text(std::string(bytes), origin));
}

// Returns the snapshot the document `doc` holds.
torch_snapshot from_document(pdoc doc, const std::string& origin, const snapshot_limits& limits) {
  torch_snapshot s;
  s.origin = origin;
  s.doc = std::move(doc);
  const pdoc& d = s.doc;
  if (d.nodes[d.root].k != pnode::kind::dict)
    throw bad_input(origin, "the snapshot is not a dict (expected segments, device_traces)");
  const fields top{d, origin, d.root, "snapshot"};
  budget b(limits, origin);
  read_settings(s, top);
  if (auto cap = top.opt_int(slot("total_memory")); cap && *cap > 0) s.capacity = *cap;
  read_segments(s, top, b);
  read_traces(s, top, b);
  check_consistent(s);
  return s;
}

}  // namespace

torch_snapshot parse_snapshot(std::string_view bytes, const std::string& origin,
                              const snapshot_limits& limits) {
  return from_document(read_document(bytes, origin, limits), origin, limits);
}

torch_snapshot load_snapshot(const std::string& path, const snapshot_limits& limits) {
  file_bytes bytes(path, limits.max_pickle_bytes, "a snapshot");
  const std::string origin = shown_name(path);
  pdoc doc = read_document(bytes.view(), origin, limits);
  // The document holds its own copy of every string: the file's bytes are given back before the records
  // are read (80 MB of a million-event capture's peak resident memory).
  bytes.release();
  return from_document(std::move(doc), origin, limits);
}

}  // namespace headroom::probes
