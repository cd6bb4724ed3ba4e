// caching_allocator.cpp: PyTorch's caching allocator policy over a device (see caching_allocator.hpp).
// Expandable segments are simplified in one respect: releasing memory unmaps only the free pages at the
// end of a range, where PyTorch also unmaps free pages in the middle. Each range is as large as the
// device's capacity (PyTorch reserves the card's total memory per range).
#include "caching_allocator.hpp"

#include <algorithm>

#include "planner/errors.hpp"
#include "planner/format.hpp"

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
  m_exp_small.page = small_buffer;
  m_exp_large.page = large_buffer;
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
    if (!head.live || head.prev >= 0 || m_options.expandable_segments) continue;
    std::int64_t size = 0;
    for (auto id = static_cast<std::int32_t>(i); id >= 0; id = m_blocks[static_cast<std::size_t>(id)].next)
      size += m_blocks[static_cast<std::size_t>(id)].size;
    m_dev.unmap(head.address, size);
  }
  for (expandable* e : {&m_exp_small, &m_exp_large}) {
    if (!e->base) continue;
    if (e->mapped > 0) m_dev.unmap_at(*e->base, 0, e->mapped, e->page);
    m_dev.release_range(*e->base, e->range);
    *e = expandable{std::nullopt, 0, 0, e->page, -1};
  }
  m_blocks.clear();
  m_free_slots.clear();
  m_small.clear();
  m_large.clear();
  m_stats = {};
}

std::uint64_t caching_allocator::address_of(std::int64_t handle) const {
  return m_blocks[static_cast<std::size_t>(handle)].address;
}

std::string caching_allocator::describe() const {
  std::string s = "caching (PyTorch rules";
  s += ", max_split_size ";
  s += m_options.max_split_size ? trim(static_cast<double>(*m_options.max_split_size) / (1 << 20)) + " MiB"
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
  const auto& b = m_blocks[static_cast<std::size_t>(id)];
  pool_of(b.small).insert({b.stream, b.size, b.address, id});
}

void caching_allocator::erase_free(std::int32_t id) {
  const auto& b = m_blocks[static_cast<std::size_t>(id)];
  pool_of(b.small).erase({b.stream, b.size, b.address, id});
}

std::optional<std::int32_t> caching_allocator::find_free(bool small, std::int64_t size, std::int64_t stream) {
  pool& p = pool_of(small);
  auto it = p.lower_bound({stream, size, 0, 0});
  if (it == p.end() || it->stream != stream) return std::nullopt;
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

std::optional<std::int32_t> caching_allocator::grow_expandable(bool small, std::int64_t size) {
  expandable& e = small ? m_exp_small : m_exp_large;
  std::int64_t have = 0;
  const bool tail_free = e.tail >= 0 && !m_blocks[static_cast<std::size_t>(e.tail)].allocated;
  if (tail_free) have = m_blocks[static_cast<std::size_t>(e.tail)].size;
  const std::int64_t bytes = round_up(size - have, e.page);
  if (!e.base) {
    e.range = round_up(m_dev.capacity(), e.page);
    e.base = m_dev.reserve_range(e.range);
    if (!e.base)
      throw device_error("cannot reserve " + gib_str(e.range) +
                         " GiB of address space for expandable segments");
  }
  if (bytes > e.range - e.mapped) return std::nullopt;
  if (!m_dev.map_at(*e.base, e.mapped, bytes, e.page)) return std::nullopt;
  m_stats.reserved += bytes;
  if (e.mapped == 0) ++m_stats.segments;
  std::int32_t id;
  if (tail_free) {
    id = e.tail;
    erase_free(id);
    m_blocks[static_cast<std::size_t>(id)].size += bytes;
  } else {
    block b;
    b.address = *e.base + static_cast<std::uint64_t>(e.mapped);
    b.size = bytes;
    b.small = small;
    b.prev = e.tail;
    id = new_block(b);
    if (e.tail >= 0) m_blocks[static_cast<std::size_t>(e.tail)].next = id;
    e.tail = id;
  }
  e.mapped += bytes;
  return id;
}

void caching_allocator::release_segment(std::int32_t id) {
  const block& b = m_blocks[static_cast<std::size_t>(id)];
  m_dev.unmap(b.address, b.size);
  m_stats.reserved -= b.size;
  --m_stats.segments;
  drop_block(id);
}

bool caching_allocator::trim_expandable(expandable& e) {
  if (e.tail < 0 || !e.base) return false;
  block& t = m_blocks[static_cast<std::size_t>(e.tail)];
  if (t.allocated) return false;
  // Unmap the whole pages inside the free tail block.
  const std::int64_t from = round_up(static_cast<std::int64_t>(t.address - *e.base), e.page);
  if (from >= e.mapped) return false;
  const std::int64_t bytes = e.mapped - from;
  erase_free(e.tail);
  m_dev.unmap_at(*e.base, from, bytes, e.page);
  m_stats.reserved -= bytes;
  e.mapped -= bytes;
  t.size -= bytes;
  if (t.size == 0) {
    const std::int32_t gone = e.tail;
    e.tail = t.prev;
    if (e.tail >= 0) m_blocks[static_cast<std::size_t>(e.tail)].next = -1;
    drop_block(gone);
  } else {
    insert_free(e.tail);
  }
  if (e.mapped == 0) --m_stats.segments;
  return true;
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
    any = trim_expandable(m_exp_small) || any;
    any = trim_expandable(m_exp_large) || any;
    return any;
  }
  for (pool* p : {&m_small, &m_large}) {
    for (auto it = p->begin(); it != p->end();) {
      const auto& b = m_blocks[static_cast<std::size_t>(it->id)];
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
  block& b = m_blocks[static_cast<std::size_t>(id)];
  const std::int64_t remaining = b.size - size;
  const bool should =
      (b.small || m_options.expandable_segments)
          ? remaining >= min_block
          : (!m_options.max_split_size || size < *m_options.max_split_size) && remaining > small_size;
  if (!should) return id;
  block rest;
  rest.address = b.address + static_cast<std::uint64_t>(size);
  rest.size = remaining;
  rest.small = b.small;
  rest.stream = b.stream;
  rest.prev = id;
  rest.next = b.next;
  const std::int32_t rid = new_block(rest);
  block& bb = m_blocks[static_cast<std::size_t>(id)];  // new_block may have moved the vector
  if (bb.next >= 0) m_blocks[static_cast<std::size_t>(bb.next)].prev = rid;
  bb.next = rid;
  bb.size = size;
  expandable& e = bb.small ? m_exp_small : m_exp_large;
  if (m_options.expandable_segments && e.tail == id) e.tail = rid;
  insert_free(rid);
  return id;
}

std::optional<std::int64_t> caching_allocator::allocate_on(std::int64_t bytes, std::int64_t stream) {
  const std::int64_t size = round_size(bytes);
  const bool small = size <= small_size;
  if (m_options.expandable_segments) stream = 0;  // one range for every stream (see the header)
  auto found = find_free(small, size, stream);
  auto fresh = [&]() -> std::optional<std::int32_t> {
    return m_options.expandable_segments ? grow_expandable(small, size) : map_segment(small, size, stream);
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
  block& b = m_blocks[static_cast<std::size_t>(id)];
  b.allocated = true;
  b.requested = bytes;
  m_stats.allocated += b.size;
  m_stats.requested += bytes;
  return id;
}

void caching_allocator::release(std::int64_t handle) {
  auto id = static_cast<std::int32_t>(handle);
  block& b = m_blocks[static_cast<std::size_t>(id)];
  b.allocated = false;
  m_stats.allocated -= b.size;
  m_stats.requested -= b.requested;
  b.requested = 0;
  expandable& e = b.small ? m_exp_small : m_exp_large;
  // Merge with free neighbours of the same segment (blocks of different segments are never linked).
  for (std::int32_t nb : {b.prev, b.next}) {
    if (nb < 0) continue;
    block& n = m_blocks[static_cast<std::size_t>(nb)];
    if (n.allocated) continue;
    erase_free(nb);
    block& cur = m_blocks[static_cast<std::size_t>(id)];
    if (nb == cur.prev) {
      n.size += cur.size;
      n.next = cur.next;
      if (cur.next >= 0) m_blocks[static_cast<std::size_t>(cur.next)].prev = nb;
      if (m_options.expandable_segments && e.tail == id) e.tail = nb;
      drop_block(id);
      id = nb;
    } else {
      cur.size += n.size;
      cur.next = n.next;
      if (n.next >= 0) m_blocks[static_cast<std::size_t>(n.next)].prev = id;
      if (m_options.expandable_segments && e.tail == nb) e.tail = id;
      drop_block(nb);
    }
  }
  insert_free(id);
}

std::vector<caching_allocator::segment_view> caching_allocator::snapshot() const {
  std::vector<segment_view> out;
  for (std::size_t i = 0; i < m_blocks.size(); ++i) {
    const block& head = m_blocks[i];
    if (!head.live || head.prev >= 0) continue;
    segment_view s{head.address, 0, head.small, {}};
    for (auto id = static_cast<std::int32_t>(i); id >= 0; id = m_blocks[static_cast<std::size_t>(id)].next) {
      const block& b = m_blocks[static_cast<std::size_t>(id)];
      s.blocks.push_back({b.address, b.size, b.allocated});
      s.size += b.size;
    }
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(),
            [](const segment_view& a, const segment_view& b) { return a.address < b.address; });
  return out;
}

}  // namespace headroom::probes
