// caching_allocator.cpp: PyTorch's caching allocator policy over a device (see caching_allocator.hpp).
// Expandable segments follow CUDACachingAllocator.cpp's find_expandable_block / map_block / unmap_block /
// release_blocks: a range per stream and pool, as large as 1.125 x the device's memory in whole pages.
#include "probes/allocators/caching_allocator.hpp"

#include <algorithm>

#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/units.hpp"

namespace headroom::probes {

std::int64_t caching_allocator::round_size(std::int64_t bytes) {
  if (bytes < min_block) return min_block;
  return (bytes + min_block - 1) / min_block * min_block;
}

std::int64_t caching_allocator::allocation_size(std::int64_t rounded) {
  if (rounded <= small_size) return small_buffer;
  if (rounded < min_large_alloc) return large_buffer;
  return round_up(rounded, round_large);
}

caching_allocator::caching_allocator(device& dev, caching_options options) : m_dev(dev), m_options(options) {
  if (m_options.max_split_size && *m_options.max_split_size < large_buffer)
    throw bad_input("max-split-size-mb", "must be at least 20 (PyTorch's lower limit)");
}

// Everything goes back to the device, live blocks too (an exception unwound past the replay); a failure
// to unmap cannot be reported from a destructor.
caching_allocator::~caching_allocator() {
  try {
    release_everything();
  } catch (...) {
  }
}

void caching_allocator::release_everything() {
  for (std::size_t i = 0; i < m_blocks.size(); ++i) {
    block& head = m_blocks[i];
    if (!head.live || head.prev >= 0 || head.range >= 0) continue;
    std::int64_t size = 0;
    for (auto id = static_cast<std::int32_t>(i); id >= 0; id = at(id).next) size += at(id).size;
    m_dev.unmap(head.address, size);
  }
  // Expandable ranges: each run of mapped pages goes back, then the address space.
  for (std::size_t i = 0; i < m_blocks.size(); ++i) {
    const block& head = m_blocks[i];
    if (!head.live || head.prev >= 0 || head.range < 0) continue;
    const expandable_range& r = m_ranges[static_cast<std::size_t>(head.range)];
    std::int64_t run_from = -1, run_to = -1;
    for (auto id = static_cast<std::int32_t>(i); id >= 0; id = at(id).next) {
      const block& b = at(id);
      const auto off = static_cast<std::int64_t>(b.address - r.base);
      if (b.mapped && run_to == off) {
        run_to += b.size;
        continue;
      }
      if (run_from >= 0) m_dev.unmap_at(r.base, run_from, run_to - run_from, r.page);
      run_from = b.mapped ? off : -1;
      run_to = b.mapped ? off + b.size : -1;
    }
    if (run_from >= 0) m_dev.unmap_at(r.base, run_from, run_to - run_from, r.page);
    m_dev.release_range(r.base, r.size);
  }
  m_blocks.clear();
  m_free_slots.clear();
  m_small.clear();
  m_large.clear();
  m_unmapped_small.clear();
  m_unmapped_large.clear();
  m_ranges.clear();
  m_stats = {};
}

std::uint64_t caching_allocator::address_of(std::int64_t handle) const {
  return m_blocks[static_cast<std::size_t>(handle)].address;
}

std::string caching_allocator::describe() const {
  std::string s = "caching (PyTorch rules";
  s += ", max_split_size ";
  s += m_options.max_split_size ? trim(to_mib(*m_options.max_split_size)) + " MiB"
                                : "none";
  s += m_options.expandable_segments ? ", expandable_segments on)" : ", expandable_segments off)";
  return s;
}

std::int32_t caching_allocator::new_block(const block& b) {
  std::int32_t id;
  if (!m_free_slots.empty()) {
    id = m_free_slots.back();
    m_free_slots.pop_back();
    m_blocks[static_cast<std::size_t>(id)] = b;
  } else {
    id = static_cast<std::int32_t>(m_blocks.size());
    m_blocks.push_back(b);
  }
  m_blocks[static_cast<std::size_t>(id)].live = true;
  return id;
}

void caching_allocator::drop_block(std::int32_t id) {
  m_blocks[static_cast<std::size_t>(id)].live = false;
  m_free_slots.push_back(id);
}

void caching_allocator::insert_free(std::int32_t id) {
  const auto& b = at(id);
  pool_of(b.small).insert({b.stream, b.size, b.address, id});
}

void caching_allocator::erase_free(std::int32_t id) {
  const auto& b = at(id);
  pool_of(b.small).erase({b.stream, b.size, b.address, id});
}

void caching_allocator::insert_unmapped(std::int32_t id) {
  const auto& b = at(id);
  (b.small ? m_unmapped_small : m_unmapped_large).insert({b.stream, b.address, id});
}

void caching_allocator::erase_unmapped(std::int32_t id) {
  const auto& b = at(id);
  (b.small ? m_unmapped_small : m_unmapped_large).erase({b.stream, b.address, id});
}

std::int32_t caching_allocator::insert_after(std::int32_t after, block b) {
  b.prev = after;
  b.next = at(after).next;
  const std::int32_t id = new_block(b);  // may move m_blocks: no references across this
  if (at(id).next >= 0) at(at(id).next).prev = id;
  at(after).next = id;
  return id;
}

std::int32_t caching_allocator::insert_before(std::int32_t before, block b) {
  b.next = before;
  b.prev = at(before).prev;
  const std::int32_t id = new_block(b);
  if (at(id).prev >= 0) at(at(id).prev).next = id;
  at(before).prev = id;
  return id;
}

std::int32_t caching_allocator::merge_neighbours(std::int32_t id) {
  for (const bool towards_prev : {true, false}) {
    const std::int32_t nb = towards_prev ? at(id).prev : at(id).next;
    if (nb < 0 || at(nb).allocated || at(nb).mapped != at(id).mapped) continue;
    if (at(nb).mapped)
      erase_free(nb);
    else
      erase_unmapped(nb);
    block& cur = at(id);
    block& n = at(nb);
    if (towards_prev) {  // [n cur] -> cur
      cur.address = n.address;
      cur.prev = n.prev;
      if (cur.prev >= 0) at(cur.prev).next = id;
    } else {  // [cur n] -> cur
      cur.next = n.next;
      if (cur.next >= 0) at(cur.next).prev = id;
    }
    at(id).size += at(nb).size;
    drop_block(nb);
  }
  return id;
}

std::optional<std::int32_t> caching_allocator::find_free(bool small, std::int64_t size, std::int64_t stream) {
  pool& p = pool_of(small);
  auto it = p.lower_bound({stream, size, 0, 0});
  if (it == p.end() || it->stream != stream) return std::nullopt;
  if (m_options.expandable_segments) {
    // Best fit counts a block that unmapped space follows as the size it can grow to, so a block that
    // cannot grow is taken first (PyTorch's expandable_size).
    auto growable = [&](const key& k) {
      const block& b = at(k.id);
      return b.size + (b.next >= 0 && !at(b.next).mapped ? at(b.next).size : 0);
    };
    for (auto next = std::next(it);
         next != p.end() && next->stream == stream && growable(*next) < growable(*it); ++next)
      it = next;
  }
  if (m_options.max_split_size) {
    const std::int64_t ms = *m_options.max_split_size;
    if (size < ms && it->size >= ms) return std::nullopt;                    // do not split oversize blocks
    if (size >= ms && it->size >= size + large_buffer) return std::nullopt;  // nor waste 20 MiB on one
  }
  const std::int32_t id = it->id;
  p.erase(it);
  return id;
}

std::optional<std::int32_t> caching_allocator::map_segment(bool small, std::int64_t size,
                                                           std::int64_t stream) {
  const std::int64_t bytes = allocation_size(size);
  auto addr = m_dev.map(bytes);
  if (!addr) return std::nullopt;
  m_stats.reserved += bytes;
  ++m_stats.segments;
  block b;
  b.address = *addr;
  b.size = bytes;
  b.small = small;
  b.stream = stream;
  return new_block(b);
}

std::optional<std::vector<std::int64_t>> caching_allocator::adopt_segment(
    bool small, std::int64_t stream, const std::vector<adopted_block>& blocks) {
  if (m_options.expandable_segments)
    throw bad_input("adopt", "a starting state is adopted only without expandable segments");
  if (blocks.empty()) throw bad_input("adopt", "a segment needs at least one block");
  std::int64_t total = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const auto& b = blocks[i];
    if (b.size <= 0 || b.size % min_block != 0)
      throw bad_input("adopt",
                      "a block of " + std::to_string(b.size) + " bytes (not a positive multiple of 512)");
    if (b.allocated && (b.requested < 0 || b.requested > b.size))
      throw bad_input("adopt", "an allocated block of " + std::to_string(b.size) + " bytes requested " +
                                   std::to_string(b.requested));
    if (i > 0 && !b.allocated && !blocks[i - 1].allocated)
      throw bad_input("adopt", "two free blocks side by side (the allocator merges them)");
    total += b.size;
  }
  const auto base = m_dev.map(total);
  if (!base) return std::nullopt;
  m_stats.reserved += total;
  ++m_stats.segments;
  std::vector<std::int64_t> handles;
  std::int32_t prev = -1;
  std::uint64_t at = *base;
  for (const auto& ab : blocks) {
    block b;
    b.address = at;
    b.size = ab.size;
    b.small = small;
    b.stream = stream;
    b.prev = prev;
    b.allocated = ab.allocated;
    b.requested = ab.allocated ? ab.requested : 0;
    const std::int32_t id = new_block(b);
    if (prev >= 0) m_blocks[static_cast<std::size_t>(prev)].next = id;
    if (ab.allocated) {
      m_stats.allocated += ab.size;
      m_stats.requested += ab.requested;
      handles.push_back(id);
    } else {
      insert_free(id);
    }
    prev = id;
    at += static_cast<std::uint64_t>(ab.size);
  }
  return handles;
}

std::int32_t caching_allocator::new_range(bool small, std::int64_t stream) {
  expandable_range r;
  r.page = small ? small_buffer : large_buffer;
  const std::int64_t cap = m_dev.capacity();
  r.size = round_up(cap + cap / 8, r.page);
  const auto base = m_dev.reserve_range(r.size);
  if (!base)
    throw device_error("cannot reserve " + gib_str(r.size) + " GiB of address space for expandable segments");
  r.base = *base;
  r.live = true;
  m_ranges.push_back(r);
  block b;
  b.address = r.base;
  b.size = r.size;
  b.small = small;
  b.stream = stream;
  b.mapped = false;
  b.range = static_cast<std::int32_t>(m_ranges.size() - 1);
  const std::int32_t id = new_block(b);
  insert_unmapped(id);
  return id;
}

std::optional<std::int32_t> caching_allocator::map_block(std::int32_t id, std::int64_t size) {
  expandable_range& r = m_ranges[static_cast<std::size_t>(at(id).range)];
  const auto offset = static_cast<std::int64_t>(at(id).address - r.base);
  const std::int64_t bytes = std::min(round_up(size, r.page), at(id).size);
  if (!m_dev.map_at(r.base, offset, bytes, r.page)) return std::nullopt;
  erase_unmapped(id);
  if (bytes < at(id).size) {  // the rest stays unmapped
    block rest = at(id);
    rest.address += static_cast<std::uint64_t>(bytes);
    rest.size -= bytes;
    insert_unmapped(insert_after(id, rest));
    at(id).size = bytes;
  }
  at(id).mapped = true;
  if (r.mapped == 0) ++m_stats.segments;
  r.mapped += bytes;
  m_stats.reserved += bytes;
  id = merge_neighbours(id);
  insert_free(id);
  return id;
}

std::optional<std::int32_t> caching_allocator::allocate_expandable(bool small, std::int64_t size,
                                                                   std::int64_t stream) {
  // The lowest address where free and unmapped space together hold `size`: an unmapped block, with the
  // free block just before it when there is one; else a new range.
  auto& unmapped = small ? m_unmapped_small : m_unmapped_large;
  std::optional<std::int32_t> candidate;
  for (auto it = unmapped.lower_bound({stream, 0, 0}); it != unmapped.end() && it->stream == stream; ++it) {
    std::int32_t c = it->id;
    if (at(c).prev >= 0 && !at(at(c).prev).allocated) c = at(c).prev;
    std::int64_t room = 0;
    for (std::int32_t x = c; x >= 0 && !at(x).allocated && room < size; x = at(x).next) room += at(x).size;
    if (room >= size) {
      candidate = c;
      break;
    }
  }
  std::int32_t c = candidate ? *candidate : new_range(small, stream);
  if (!at(c).mapped) {
    const auto m = map_block(c, std::min(at(c).size, size));
    if (!m) return std::nullopt;
    c = *m;
  }
  while (at(c).size < size) {  // a free block followed by unmapped space: map what is missing
    const std::int32_t next = at(c).next;
    if (next < 0 || at(next).mapped || at(next).allocated) return std::nullopt;
    const auto m = map_block(next, std::min(size - at(c).size, at(next).size));
    if (!m) return std::nullopt;
    c = *m;
  }
  erase_free(c);
  return c;
}

// Unmaps the whole pages inside free block `id`; the pages around them stay mapped as free blocks, and a
// range left with nothing mapped goes back to the device. Returns whether anything was unmapped.
bool caching_allocator::unmap_block(std::int32_t id) {
  expandable_range& r = m_ranges[static_cast<std::size_t>(at(id).range)];
  const auto from = static_cast<std::int64_t>(at(id).address - r.base);
  const std::int64_t to = from + at(id).size;
  const std::int64_t lo = round_up(from, r.page), hi = to / r.page * r.page;
  if (hi <= lo) return false;
  erase_free(id);
  m_dev.unmap_at(r.base, lo, hi - lo, r.page);
  block piece = at(id);
  if (lo > from) {  // free, still mapped, before the unmapped pages
    piece.size = lo - from;
    insert_free(insert_before(id, piece));
  }
  if (to > hi) {  // and after them
    piece.address = r.base + static_cast<std::uint64_t>(hi);
    piece.size = to - hi;
    insert_free(insert_after(id, piece));
  }
  at(id).address = r.base + static_cast<std::uint64_t>(lo);
  at(id).size = hi - lo;
  at(id).mapped = false;
  r.mapped -= hi - lo;
  m_stats.reserved -= hi - lo;
  if (r.mapped == 0) --m_stats.segments;
  id = merge_neighbours(id);
  if (at(id).prev < 0 && at(id).next < 0) {  // the whole range is unmapped: give the address space back
    m_dev.release_range(r.base, r.size);
    r.live = false;
    drop_block(id);
  } else {
    insert_unmapped(id);
  }
  return true;
}

void caching_allocator::release_segment(std::int32_t id) {
  const block& b = m_blocks[static_cast<std::size_t>(id)];
  m_dev.unmap(b.address, b.size);
  m_stats.reserved -= b.size;
  --m_stats.segments;
  drop_block(id);
}

bool caching_allocator::release_oversize(bool small, std::int64_t size, std::int64_t stream) {
  if (!m_options.max_split_size || m_options.expandable_segments) return false;
  const std::int64_t ms = *m_options.max_split_size;
  pool& p = pool_of(small);
  // The smallest whole oversize segment that covers the request; else the largest ones until covered.
  std::vector<key> oversize;
  for (const auto& k : p) {
    const auto& b = m_blocks[static_cast<std::size_t>(k.id)];
    if (k.stream == stream && k.size >= ms && b.prev < 0 && b.next < 0) oversize.push_back(k);
  }
  if (oversize.empty()) return false;
  auto fit = std::find_if(oversize.begin(), oversize.end(), [&](const key& k) { return k.size >= size; });
  if (fit != oversize.end()) {
    p.erase(*fit);
    release_segment(fit->id);
    return true;
  }
  std::int64_t freed = 0;
  for (auto it = oversize.rbegin(); it != oversize.rend() && freed < size; ++it) {
    freed += it->size;
    p.erase(*it);
    release_segment(it->id);
  }
  return true;
}

bool caching_allocator::release_cached() {
  bool any = false;
  if (m_options.expandable_segments) {
    // Every free block's whole pages, the large pool first, in pool order (PyTorch's release_blocks).
    for (pool* p : {&m_large, &m_small}) {
      std::vector<std::int32_t> free_blocks;
      for (const auto& k : *p) free_blocks.push_back(k.id);
      for (const auto id : free_blocks) any = unmap_block(id) || any;
    }
    return any;
  }
  for (pool* p : {&m_small, &m_large}) {
    for (auto it = p->begin(); it != p->end();) {
      const auto& b = at(it->id);
      if (b.prev < 0 && b.next < 0) {  // an unsplit segment: the block is the whole segment
        const std::int32_t id = it->id;
        it = p->erase(it);
        release_segment(id);
        any = true;
      } else {
        ++it;
      }
    }
  }
  return any;
}

void caching_allocator::empty_cache() {
  release_cached();
}

std::int32_t caching_allocator::split(std::int32_t id, std::int64_t size) {
  const block& b = at(id);
  const std::int64_t remaining = b.size - size;
  const bool should =
      (b.small || m_options.expandable_segments)
          ? remaining >= min_block
          : (!m_options.max_split_size || size < *m_options.max_split_size) && remaining > small_size;
  if (!should) return id;
  block rest = b;
  rest.address = b.address + static_cast<std::uint64_t>(size);
  rest.size = remaining;
  rest.allocated = false;
  rest.requested = 0;
  insert_free(insert_after(id, rest));
  at(id).size = size;
  return id;
}

std::optional<std::int64_t> caching_allocator::allocate_on(std::int64_t bytes, std::int64_t stream) {
  const std::int64_t size = round_size(bytes);
  const bool small = size <= small_size;
  auto found = find_free(small, size, stream);
  auto fresh = [&]() -> std::optional<std::int32_t> {
    return m_options.expandable_segments ? allocate_expandable(small, size, stream)
                                         : map_segment(small, size, stream);
  };
  if (!found) found = fresh();
  if (!found && release_oversize(small, size, stream)) found = fresh();
  if (!found) {
    ++m_stats.retries;
    release_cached();
    found = fresh();
  }
  if (!found) return std::nullopt;
  const std::int32_t id = split(*found, size);
  block& b = at(id);
  b.allocated = true;
  b.requested = bytes;
  m_stats.allocated += b.size;
  m_stats.requested += bytes;
  return id;
}

void caching_allocator::release(std::int64_t handle) {
  auto id = static_cast<std::int32_t>(handle);
  block& b = at(id);
  b.allocated = false;
  m_stats.allocated -= b.size;
  m_stats.requested -= b.requested;
  b.requested = 0;
  // Merge with free neighbours of the same segment (blocks of different segments are never linked).
  insert_free(merge_neighbours(id));
}

std::vector<caching_allocator::segment_view> caching_allocator::snapshot() const {
  std::vector<segment_view> out;
  for (std::size_t i = 0; i < m_blocks.size(); ++i) {
    const block& head = m_blocks[i];
    if (!head.live || head.prev >= 0) continue;
    // A segment per run of mapped blocks (a plain segment is one run).
    bool open = false;
    for (auto id = static_cast<std::int32_t>(i); id >= 0; id = at(id).next) {
      const block& b = at(id);
      if (!b.mapped) {
        open = false;
        continue;
      }
      if (!open) out.push_back({b.address, 0, b.small, {}});
      open = true;
      out.back().blocks.push_back({b.address, b.size, b.allocated});
      out.back().size += b.size;
    }
  }
  std::sort(out.begin(), out.end(),
            [](const segment_view& a, const segment_view& b) { return a.address < b.address; });
  return out;
}

}  // namespace headroom::probes
