// consistency.cpp: check_consistent (snapshot.hpp): a snapshot that contradicts itself is refused, naming
// the first contradiction, instead of being summarised, replayed and "compared". Only what PyTorch cannot
// have written is refused (by PyTorch's caching-allocator rules, as snapshot.hpp's fields record them): a
// warm trace, a trace cut by max_entries and unmaps of expandable pages in any grouping all pass.
#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "planner/errors.hpp"
#include "probes/allocators/caching_allocator.hpp"
#include "probes/snapshots/snapshot.hpp"
#include "probes/snapshots/window.hpp"

namespace headroom::probes {

namespace {

using snapshot_window::mib_text;

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

[[noreturn]] void contradiction(const torch_snapshot& s, const std::string& what) {
  throw bad_input(s.origin, "inconsistent snapshot: " + what);
}

// Returns the end of [at, at + size), or refuses a range that runs past the address space.
std::uint64_t end_of(const torch_snapshot& s, std::uint64_t at, std::int64_t size, const std::string& where) {
  const auto n = static_cast<std::uint64_t>(size);
  if (at > UINT64_MAX - n) contradiction(s, where + " runs past the end of the address space");
  return at + n;
}

// The final segments of one device, as address ranges in order, adjacent ones merged (an expandable
// range's mapped pages may be listed as several segments).
using ranges = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

// Checks the final segments and their blocks; returns each device's segment ranges.
std::map<std::int64_t, ranges> check_segments(const torch_snapshot& s) {
  std::map<std::int64_t, ranges> by_device;
  for (std::size_t i = 0; i < s.segments.size(); ++i) {
    const auto& g = s.segments[i];
    const std::string where = "segments[" + std::to_string(i) + "]";
    const std::uint64_t end = end_of(s, g.address, g.total_size, where);
    std::int64_t sum = 0;
    for (std::size_t k = 0; k < g.blocks.size(); ++k) {
      const auto& b = g.blocks[k];
      const std::string bw = where + ".blocks[" + std::to_string(k) + "]";
      sum += b.size;  // each at most 2^50 (parse.cpp), and the sum is refused once past the segment's
      if (b.size > g.total_size || sum > g.total_size)
        contradiction(s, bw + " makes the blocks " + mib_text(sum) + ", larger than their segment (" +
                             mib_text(g.total_size) + ")");
      if (b.address == 0) continue;  // no address recorded
      if (b.address < g.address || end_of(s, b.address, b.size, bw) > end)
        contradiction(s, bw + " (" + mib_text(b.size) + " at " + hex(b.address) +
                             ") lies outside its segment (" + mib_text(g.total_size) + " at " +
                             hex(g.address) + ")");
      if (k > 0 && g.blocks[k - 1].address != 0 &&
          b.address < g.blocks[k - 1].address + static_cast<std::uint64_t>(g.blocks[k - 1].size))
        contradiction(s, bw + " at " + hex(b.address) + " overlaps the block before it");
    }
    by_device[g.device].push_back({g.address, end});
  }
  for (auto& [device, rs] : by_device) {
    std::sort(rs.begin(), rs.end());
    ranges merged;
    for (const auto& r : rs) {
      if (!merged.empty() && r.first < merged.back().second)
        contradiction(
            s, "two final segments of device " + std::to_string(device) + " overlap at " + hex(r.first));
      if (!merged.empty() && r.first == merged.back().second)
        merged.back().second = r.second;
      else
        merged.push_back(r);
    }
    rs = std::move(merged);
  }
  return by_device;
}

// What the segment events say of each byte range they touched: mapped or unmapped, and by which event.
class mapping {
 public:
  struct piece {
    std::uint64_t end;
    bool mapped;
    std::size_t event;
  };
  // Returns the first known piece overlapping [a, b) whose state is `mapped`, or nullptr.
  const std::pair<const std::uint64_t, piece>* find(std::uint64_t a, std::uint64_t b, bool mapped) const {
    auto it = m_pieces.upper_bound(a);
    if (it != m_pieces.begin()) --it;
    for (; it != m_pieces.end() && it->first < b; ++it)
      if (it->second.end > a && it->second.mapped == mapped) return &*it;
    return nullptr;
  }
  // Records [a, b) as `mapped` by `event`, splitting the pieces it cuts.
  void set(std::uint64_t a, std::uint64_t b, bool mapped, std::size_t event) {
    cut(a);
    cut(b);
    m_pieces.erase(m_pieces.lower_bound(a), m_pieces.lower_bound(b));
    m_pieces[a] = {b, mapped, event};
  }
  const std::map<std::uint64_t, piece>& pieces() const { return m_pieces; }

 private:
  void cut(std::uint64_t at) {
    auto it = m_pieces.upper_bound(at);
    if (it == m_pieces.begin()) return;
    --it;
    if (it->first < at && it->second.end > at) {
      m_pieces[at] = {it->second.end, it->second.mapped, it->second.event};
      it->second.end = at;
    }
  }
  std::map<std::uint64_t, piece> m_pieces;
};

bool covered(const ranges& rs, std::uint64_t a, std::uint64_t b) {
  auto it = std::upper_bound(rs.begin(), rs.end(), std::make_pair(a, UINT64_MAX));
  if (it == rs.begin()) return false;
  --it;
  return it->first <= a && b <= it->second;
}

bool overlaps(const ranges& rs, std::uint64_t a, std::uint64_t b) {
  auto it = std::lower_bound(rs.begin(), rs.end(), std::make_pair(b, std::uint64_t{0}));
  if (it == rs.begin()) return false;
  --it;
  return it->second > a;
}

// Checks one device's segment events against each other and against its final segments.
void check_events(const torch_snapshot& s, std::size_t device, const ranges& final_segments) {
  const auto& ev = s.devices[device];
  const std::string trace = "device_traces[" + std::to_string(device) + "]";
  auto name = [&](std::size_t i) {
    return trace + "[" + std::to_string(i) + "] (" + to_string(ev[i].action) + " of " + mib_text(ev[i].size) +
           " at " + hex(ev[i].addr) + ")";
  };
  mapping m;
  std::map<std::uint64_t, std::size_t> allocated;  // segment_alloc base -> event, while not freed
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const auto a = ev[i].action;
    const bool maps = a == snap_action::segment_alloc || a == snap_action::segment_map;
    const bool unmaps = a == snap_action::segment_free || a == snap_action::segment_unmap;
    if (!maps && !unmaps) continue;
    const std::uint64_t lo = ev[i].addr, hi = end_of(s, lo, ev[i].size, name(i));
    if (lo == hi) continue;  // an empty range maps nothing (and must not shadow the piece at `lo`)
    if (const auto* p = m.find(lo, hi, maps))
      contradiction(s, name(i) + (maps ? " maps bytes event " : " unmaps bytes event ") +
                           std::to_string(p->second.event) + (maps ? " mapped" : " unmapped") + " (at " +
                           hex(std::max(lo, p->first)) + "), with no " + (maps ? "unmap" : "map") +
                           " between");
    if (a == snap_action::segment_alloc) allocated[lo] = i;
    if (a == snap_action::segment_free) {
      if (auto it = allocated.find(lo); it != allocated.end()) {
        if (ev[it->second].size != ev[i].size)
          contradiction(s, name(i) + " frees a segment event " + std::to_string(it->second) +
                               " allocated with " + mib_text(ev[it->second].size));
        allocated.erase(it);
      }
    }
    m.set(lo, hi, maps, i);
  }
  // The trace ends where the snapshot was taken: the bytes it leaves mapped are the final segments' bytes.
  for (const auto& [lo, p] : m.pieces()) {
    if (p.mapped && !covered(final_segments, lo, p.end))
      contradiction(s, name(p.event) + " leaves " + mib_text(static_cast<std::int64_t>(p.end - lo)) + " at " +
                           hex(lo) + " mapped, which no final segment holds");
    if (!p.mapped && overlaps(final_segments, lo, p.end))
      contradiction(
          s, name(p.event) + " leaves bytes at " + hex(lo) + " unmapped, but a final segment holds them");
  }
}

}  // namespace

void check_consistent(const torch_snapshot& s) {
  if (s.settings.max_split_size && *s.settings.max_split_size < caching_allocator::large_buffer)
    contradiction(s,
                  "the snapshot's allocator_settings.max_split_size is " +
                      std::to_string(*s.settings.max_split_size) +
                      " bytes, below the 20 MiB PyTorch accepts (max_split_size_mb > 20): not a setting it "
                      "could have run with");
  const auto segments = check_segments(s);
  static const ranges none;
  for (std::size_t d = 0; d < s.devices.size(); ++d) {
    const auto it = segments.find(static_cast<std::int64_t>(d));
    check_events(s, d, it == segments.end() ? none : it->second);
  }
}

}  // namespace headroom::probes
