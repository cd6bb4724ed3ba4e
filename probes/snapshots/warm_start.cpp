// warm_start.cpp: the allocator's state when a warm trace began (warm_start.hpp): the window's events undone
// backwards from the final segments, then the blocks alive then laid into the segments held then.
#include "probes/snapshots/warm_start.hpp"

#include <map>

#include "probes/allocators/caching_allocator.hpp"
#include "probes/snapshots/window.hpp"

namespace headroom::probes {

namespace {

using namespace snapshot_window;

struct held_segment {
  std::int64_t size = 0, stream = 0;
  bool small = false;
};
struct live_block {
  std::int64_t size = 0, requested = 0, stream = 0;
  bool inferred = false;
};
using segment_map = std::map<std::uint64_t, held_segment>;
using block_map = std::map<std::uint64_t, live_block>;

// Undoes device `ev`'s events from the final state in `segs` and `blocks` (event k's effect removed, last
// first). Returns "" when every event undid cleanly, else why one could not.
std::string undo_window(const std::vector<snap_event>& ev, segment_map& segs, block_map& blocks) {
  const bool completions = has_completions(ev);
  auto at = [](std::size_t i) { return "event " + std::to_string(i) + ": "; };
  for (std::size_t k = ev.size(); k-- > 0;) {
    const auto& e = ev[k];
    switch (e.action) {
      case snap_action::alloc: {
        auto it = blocks.find(e.addr);
        if (it == blocks.end())
          return at(k) + "allocates " + std::to_string(e.addr) + ", which is not alive after it";
        blocks.erase(it);
        break;
      }
      case snap_action::free_requested:
      case snap_action::free_completed:
        if (!ends_life(e, completions)) break;
        if (blocks.count(e.addr))
          return at(k) + "frees " + std::to_string(e.addr) + ", which is alive after it";
        if (e.size <= 0) return at(k) + "frees a block of " + std::to_string(e.size) + " bytes";
        blocks[e.addr] = {caching_allocator::round_size(e.size), e.size, e.stream, true};
        break;
      case snap_action::segment_alloc: {
        auto it = segs.find(e.addr);
        if (it == segs.end() || it->second.size != e.size)
          return at(k) + "allocates a segment at " + std::to_string(e.addr) + " that is not held after it";
        auto b = blocks.lower_bound(e.addr);
        if (b != blocks.end() && b->first < e.addr + static_cast<std::uint64_t>(e.size))
          return at(k) + "allocates a segment that holds a block alive before it";
        segs.erase(it);
        break;
      }
      case snap_action::segment_free:
        if (segs.count(e.addr)) return at(k) + "frees a segment that is held after it";
        segs[e.addr] = {e.size, e.stream, e.size == caching_allocator::small_buffer};
        break;
      case snap_action::segment_map:
      case snap_action::segment_unmap:
        return at(k) + "expandable segments (map / unmap) are not undone";
      default:
        break;
    }
  }
  return "";
}

// Lays the blocks from `b` on that fall in segment [addr, addr + g.size) into `out_seg`, free gaps between
// them; advances `b` past them and counts them into `out`. Returns "" or why the layout is impossible.
std::string lay_segment(std::uint64_t addr, const held_segment& g, const block_map& blocks,
                        block_map::const_iterator& b, start_segment& out_seg, start_state& out) {
  out_seg.address = addr;
  out_seg.size = g.size;
  out_seg.stream = g.stream;
  out_seg.small = g.small;
  if (g.size <= 0 || addr > UINT64_MAX - static_cast<std::uint64_t>(g.size))
    return "a segment at " + std::to_string(addr) + " of " + std::to_string(g.size) + " bytes";
  const std::uint64_t end = addr + static_cast<std::uint64_t>(g.size);
  if (b != blocks.end() && b->first < addr)
    return "block " + std::to_string(b->first) + " alive at the start lies in no segment held then";
  std::uint64_t cursor = addr;
  for (; b != blocks.end() && b->first < end; ++b) {
    live_block l = b->second;
    if (l.stream != g.stream)
      return "block " + std::to_string(b->first) + " was used on stream " + std::to_string(l.stream) +
             ", its segment on " + std::to_string(g.stream);
    auto nb = std::next(b);
    const std::uint64_t limit = nb != blocks.end() && nb->first < end ? nb->first : end;
    if (l.size <= 0 || l.size > static_cast<std::int64_t>(limit - b->first))
      return "block " + std::to_string(b->first) + " of " + std::to_string(l.size) +
             " bytes overlaps the next block or its segment's end";
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
      return "block " + std::to_string(x.address) + " of " + std::to_string(x.size) + " bytes (requested " +
             std::to_string(x.requested) +
             ") is not one the allocator makes (512-byte multiples, request within the block)";
  return "";
}

}  // namespace

start_state reconstruct_start(const torch_snapshot& s, int device) {
  start_state out;
  auto fail = [&](const std::string& why) {
    out = start_state{};
    out.why = why;
    return out;
  };
  if (device < 0 || static_cast<std::size_t>(device) >= s.devices.size())
    return fail("no device " + std::to_string(device) + " in the snapshot");
  if (s.settings.expandable_segments)
    return fail("recorded with expandable segments (ranges are not undone)");
  segment_map segs;
  block_map blocks;
  for (const auto& g : s.segments) {
    if (g.device != device) continue;
    if (g.expandable) return fail("the final segments include an expandable one");
    segs[g.address] = {g.total_size, g.stream, g.small};
    for (const auto& b : g.blocks)
      if (b.allocated) blocks[b.address] = {b.size, b.requested, g.stream, false};
  }
  if (auto why = undo_window(s.devices[static_cast<std::size_t>(device)], segs, blocks); !why.empty())
    return fail(why);
  // Lay the blocks alive at the start into the segments held then.
  auto b = blocks.cbegin();
  for (const auto& [addr, g] : segs) {
    start_segment out_seg;
    if (auto why = lay_segment(addr, g, blocks, b, out_seg, out); !why.empty()) return fail(why);
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

}  // namespace headroom::probes
