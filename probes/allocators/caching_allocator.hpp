// caching_allocator.hpp: PyTorch's CUDA caching allocator policy (c10/cuda/CUDACachingAllocator.cpp), as
// docs/allocator-rules.md lists its rules: 512 B rounding; a small pool (<= 1 MiB, 2 MiB
// segments) and a large pool (20 MiB segments below 10 MiB, 2 MiB-rounded segments above); best fit by
// (size, address); splits only when more than 1 MiB (large) or 512 B (small) would remain; merging only
// inside a segment; on a refused device allocation, free cached oversize blocks (max_split_size only), then
// every unsplit cached segment, and retry before out-of-memory. Options: max_split_size,
// expandable_segments: per stream and pool, one virtual range (1.125 x the device's memory) reserved from
// the device, pages of 2 MiB (small) / 20 MiB (large) mapped on demand at the lowest free address range
// that fits, and on a release every whole free page unmapped wherever it lies; best fit then prefers a
// block that cannot grow into unmapped space (PyTorch's expandable_size). Streams: a block freed on one
// stream is reused only on that stream (pools are ordered by stream, then size, then address, as PyTorch's).
#pragma once

#include <optional>
#include <set>
#include <vector>

#include "probes/allocators/allocator.hpp"
#include "planner/units.hpp"

namespace headroom::probes {

struct caching_options {
  std::optional<std::int64_t> max_split_size;  // bytes; blocks at least this large are never split
  bool expandable_segments = false;            // one growing range per pool, 2 MiB / 20 MiB pages
  bool operator==(const caching_options&) const = default;
};

class caching_allocator final : public allocator {
 public:
  static constexpr std::int64_t min_block = 512;
  static constexpr std::int64_t small_size = mib;            // requests up to this use the small pool
  static constexpr std::int64_t small_buffer = 2 << 20;      // small-pool segment
  static constexpr std::int64_t large_buffer = 20 << 20;     // segment for 1-10 MiB requests
  static constexpr std::int64_t min_large_alloc = 10 << 20;  // from here segments are rounded to 2 MiB
  static constexpr std::int64_t round_large = 2 << 20;

  // Throws bad_input when max_split_size is below 20 MiB (PyTorch's lower limit).
  caching_allocator(device& dev, caching_options options);
  ~caching_allocator() override;

  std::optional<std::int64_t> allocate(std::int64_t bytes) override { return allocate_on(bytes, 0); }
  // Returns a block for `bytes` on `stream` (reused only from blocks freed on that stream), or nullopt.
  std::optional<std::int64_t> allocate_on(std::int64_t bytes, std::int64_t stream) override;
  void release(std::int64_t handle) override;
  std::uint64_t address_of(std::int64_t handle) const override;
  const allocator_stats& stats() const override { return m_stats; }
  std::string describe() const override;

  // One block of a segment handed over by adopt_segment: its bytes, whether it is allocated, and for an
  // allocated block the bytes its user requested.
  struct adopted_block {
    std::int64_t size = 0;
    bool allocated = false;
    std::int64_t requested = 0;
  };
  // Takes over a segment the real allocator already held when a replay begins (a warm snapshot's starting
  // state): maps the blocks' total bytes on the device, lays the blocks out in order from the address the
  // device returns, caches the free ones for `stream`, and counts the allocated ones as live. Returns the
  // handles of the allocated blocks in order, or nullopt when the device refuses the segment. Throws
  // bad_input for blocks that cannot form a segment (none, a non-positive or unaligned size, two free
  // blocks side by side), and with expandable segments (their ranges are not adopted).
  std::optional<std::vector<std::int64_t>> adopt_segment(bool small, std::int64_t stream,
                                                         const std::vector<adopted_block>& blocks);

  // Returns every cached segment that holds no live block to the device (torch.cuda.empty_cache()), and
  // with expandable segments the free pages at the end of each range.
  void empty_cache() override;

  // What the allocator holds, for tests: segments in address order with their blocks (with expandable
  // segments, each run of mapped pages is a segment, as PyTorch's snapshot shows them).
  struct block_view {
    std::uint64_t address;
    std::int64_t size;
    bool allocated;
  };
  struct segment_view {
    std::uint64_t address;
    std::int64_t size;
    bool small;
    std::vector<block_view> blocks;
  };
  std::vector<segment_view> snapshot() const;

  // Returns the size PyTorch rounds a request to (a multiple of 512, at least 512).
  static std::int64_t round_size(std::int64_t bytes);
  // Returns the segment size PyTorch asks the device for to serve a rounded request.
  static std::int64_t allocation_size(std::int64_t rounded);

 private:
  struct block {
    std::uint64_t address = 0;
    std::int64_t size = 0;
    std::int64_t requested = 0;
    std::int64_t stream = 0;
    std::int32_t prev = -1, next = -1;
    std::int32_t range = -1;  // expandable segments: the range the block lies in
    bool allocated = false;
    bool small = false;
    bool mapped = true;  // expandable segments: address space with no pages behind it yet
    bool live = false;   // the slot is in use
  };
  struct key {
    std::int64_t stream;
    std::int64_t size;
    std::uint64_t address;
    std::int32_t id;
    bool operator<(const key& o) const {
      if (stream != o.stream) return stream < o.stream;
      return size != o.size ? size < o.size : address < o.address;
    }
  };
  using pool = std::set<key>;
  // Unmapped blocks of expandable ranges, ordered by stream, then address (PyTorch's unmapped set).
  struct ukey {
    std::int64_t stream;
    std::uint64_t address;
    std::int32_t id;
    bool operator<(const ukey& o) const {
      return stream != o.stream ? stream < o.stream : address < o.address;
    }
  };
  using unmapped_set = std::set<ukey>;
  struct expandable_range {
    std::uint64_t base = 0;
    std::int64_t size = 0;    // bytes of address space reserved
    std::int64_t page = 0;    // bytes mapped at a time
    std::int64_t mapped = 0;  // bytes with pages behind them now
    bool live = false;
  };

  std::int32_t new_block(const block& b);
  void drop_block(std::int32_t id);
  block& at(std::int32_t id) { return m_blocks[static_cast<std::size_t>(id)]; }
  const block& at(std::int32_t id) const { return m_blocks[static_cast<std::size_t>(id)]; }
  pool& pool_of(bool small) { return small ? m_small : m_large; }
  void insert_free(std::int32_t id);
  void erase_free(std::int32_t id);
  void insert_unmapped(std::int32_t id);
  void erase_unmapped(std::int32_t id);
  // Links a new block holding `b`'s fields right after `after` (or before `before`); returns its id.
  std::int32_t insert_after(std::int32_t after, block b);
  std::int32_t insert_before(std::int32_t before, block b);
  // Merges a free block with its free neighbours in the same state (mapped or not), which must be out of
  // their pools; returns the surviving block, not in a pool.
  std::int32_t merge_neighbours(std::int32_t id);
  std::optional<std::int32_t> find_free(bool small, std::int64_t size, std::int64_t stream);
  std::optional<std::int32_t> map_segment(bool small, std::int64_t size, std::int64_t stream);
  std::optional<std::int32_t> allocate_expandable(bool small, std::int64_t size, std::int64_t stream);
  std::int32_t new_range(bool small, std::int64_t stream);
  std::optional<std::int32_t> map_block(std::int32_t id, std::int64_t size);
  bool unmap_block(std::int32_t id);
  bool release_oversize(bool small, std::int64_t size, std::int64_t stream);
  bool release_cached();
  void release_segment(std::int32_t id);
  std::int32_t split(std::int32_t id, std::int64_t size);
  void release_everything();

  device& m_dev;
  caching_options m_options;
  std::vector<block> m_blocks;
  std::vector<std::int32_t> m_free_slots;
  pool m_small, m_large;
  unmapped_set m_unmapped_small, m_unmapped_large;
  std::vector<expandable_range> m_ranges;
  allocator_stats m_stats;
};

}  // namespace headroom::probes
