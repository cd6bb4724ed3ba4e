// caching_allocator_test.cpp: PyTorch's caching-allocator rules, each as a sequence of requests and the
// exact segments and blocks that must result (docs/allocator-rules.md lists the rules; the sources are
// c10/cuda/CUDACachingAllocator.cpp's round_size, get_allocation_size, get_free_block, should_split,
// free_block and release_cached_blocks).
#include "test_support.hpp"
#include "probes/allocators/caching_allocator.hpp"

#include <gtest/gtest.h>

#include "fake_device.hpp"
#include "planner/errors.hpp"
#include "planner/units.hpp"
#include "probes/devices/sim_device.hpp"

namespace headroom::probes {
namespace {


struct fixture {
  sim_device dev;
  caching_allocator a;
  explicit fixture(std::int64_t capacity = 1024 * MiB, caching_options o = {})
      : dev(capacity, 2 * MiB), a(dev, o) {}
  // Returns the sizes of each segment's blocks, allocated blocks positive, free ones negative, in MiB*1024.
  std::vector<std::vector<std::int64_t>> layout() const {
    std::vector<std::vector<std::int64_t>> out;
    for (const auto& s : a.snapshot()) {
      out.emplace_back();
      for (const auto& b : s.blocks) out.back().push_back(b.allocated ? b.size : -b.size);
    }
    return out;
  }
};

using segs = std::vector<std::vector<std::int64_t>>;

TEST(CachingAllocator, RoundsTo512AndSmallRequestsGetTwoMiBSegments) {
  EXPECT_EQ(caching_allocator::round_size(1), 512);
  EXPECT_EQ(caching_allocator::round_size(513), 1024);
  EXPECT_EQ(caching_allocator::allocation_size(MiB), 2 * MiB);
  EXPECT_EQ(caching_allocator::allocation_size(MiB + 512), 20 * MiB);
  EXPECT_EQ(caching_allocator::allocation_size(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(caching_allocator::allocation_size(10 * MiB), 10 * MiB);
  EXPECT_EQ(caching_allocator::allocation_size(10 * MiB + 512), 12 * MiB);
  fixture f;
  ASSERT_TRUE(f.a.allocate(1));
  EXPECT_EQ(f.layout(), (segs{{512, -(2 * MiB - 512)}}));
  EXPECT_EQ(f.a.stats().requested, 1);
  EXPECT_EQ(f.a.stats().allocated, 512);
  EXPECT_EQ(f.a.stats().reserved, 2 * MiB);
  ASSERT_TRUE(f.a.allocate(MiB));  // still the small pool: <= 1 MiB; the 2 MiB - 512 free block fits
  EXPECT_EQ(f.layout(), (segs{{512, MiB, -(MiB - 512)}}));
}

TEST(CachingAllocator, MidSizedRequestsShareTwentyMiBSegments) {
  fixture f;
  ASSERT_TRUE(f.a.allocate(3 * MiB));
  ASSERT_TRUE(f.a.allocate(3 * MiB));
  EXPECT_EQ(f.layout(), (segs{{3 * MiB, 3 * MiB, -14 * MiB}}));
  EXPECT_EQ(f.a.stats().reserved, 20 * MiB);
}

TEST(CachingAllocator, LargeBlocksSplitOnlyWhenMoreThanOneMiBRemains) {
  fixture f;
  ASSERT_TRUE(f.a.allocate(10 * MiB + 1));  // 12 MiB segment, 2 MiB - 512 remain: split
  EXPECT_EQ(f.layout(), (segs{{10 * MiB + 512, -(2 * MiB - 512)}}));
  fixture g;
  ASSERT_TRUE(g.a.allocate(11 * MiB));  // 12 MiB segment, exactly 1 MiB remains: no split
  EXPECT_EQ(g.layout(), (segs{{12 * MiB}}));
  EXPECT_EQ(g.a.stats().allocated, 12 * MiB);
  EXPECT_EQ(g.a.stats().requested, 11 * MiB);
}

TEST(CachingAllocator, BestFitBySizeThenAddress) {
  fixture f;
  auto a = f.a.allocate(30 * MiB), b = f.a.allocate(24 * MiB), c = f.a.allocate(24 * MiB);
  f.a.release(*a);
  f.a.release(*c);
  f.a.release(*b);
  ASSERT_TRUE(f.a.allocate(22 * MiB));  // the first 24 MiB segment (lower address), split 22 + 2
  EXPECT_EQ(f.layout(), (segs{{-30 * MiB}, {22 * MiB, -2 * MiB}, {-24 * MiB}}));
}

TEST(CachingAllocator, FreedBlocksMergeOnlyInsideTheirSegment) {
  fixture f;
  auto a = f.a.allocate(3 * MiB), b = f.a.allocate(3 * MiB);
  auto c = f.a.allocate(16 * MiB), d = f.a.allocate(16 * MiB);  // the free 14 MiB is too small
  f.a.release(*a);
  EXPECT_EQ(f.layout()[0], (std::vector<std::int64_t>{-3 * MiB, 3 * MiB, -14 * MiB}));
  f.a.release(*b);  // merges with both neighbours
  f.a.release(*c);
  f.a.release(*d);  // adjacent addresses, different segments: never merged
  EXPECT_EQ(f.layout(), (segs{{-20 * MiB}, {-16 * MiB}, {-16 * MiB}}));
  EXPECT_EQ(f.a.stats().reserved, 52 * MiB);
  f.a.empty_cache();
  EXPECT_TRUE(f.layout().empty());
  EXPECT_EQ(f.a.stats().reserved, 0);
}

TEST(CachingAllocator, EmptyCacheKeepsSegmentsWithALiveBlock) {
  fixture f;
  auto a = f.a.allocate(3 * MiB);
  auto b = f.a.allocate(3 * MiB);
  f.a.release(*b);
  f.a.empty_cache();
  EXPECT_EQ(f.layout(), (segs{{3 * MiB, -17 * MiB}}));
  (void)a;
}

TEST(CachingAllocator, RefusedDeviceAllocationFreesTheCacheAndRetries) {
  fixture f(64 * MiB);
  auto a = f.a.allocate(30 * MiB);
  f.a.release(*a);  // cached: 30 MiB reserved, none allocated
  ASSERT_TRUE(f.a.allocate(40 * MiB));
  EXPECT_EQ(f.a.stats().retries, 1);
  EXPECT_EQ(f.a.stats().reserved, 40 * MiB);
  EXPECT_FALSE(f.a.allocate(30 * MiB));  // nothing left to free: out of memory
  EXPECT_EQ(f.a.stats().retries, 2);
}

TEST(CachingAllocator, SameTensorsDifferentOrderDifferentReserved) {
  // a (20 MiB) lives first and dies; then b, c (12 MiB each).
  fixture first;
  auto a = first.a.allocate(20 * MiB);
  first.a.release(*a);
  ASSERT_TRUE(first.a.allocate(12 * MiB));  // from a's block: 12 + 8 free
  ASSERT_TRUE(first.a.allocate(12 * MiB));  // 8 MiB is too small: a new segment
  EXPECT_EQ(first.a.stats().reserved, 32 * MiB);
  // b, c first, then a: nothing cached fits a.
  fixture second;
  ASSERT_TRUE(second.a.allocate(12 * MiB));
  ASSERT_TRUE(second.a.allocate(12 * MiB));
  ASSERT_TRUE(second.a.allocate(20 * MiB));
  EXPECT_EQ(second.a.stats().reserved, 44 * MiB);
}

TEST(CachingAllocator, MaxSplitSizeKeepsOversizeBlocksWhole) {
  caching_options o;
  o.max_split_size = 20 * MiB;
  fixture f(1024 * MiB, o);
  auto a = f.a.allocate(20 * MiB);
  f.a.release(*a);
  ASSERT_TRUE(f.a.allocate(12 * MiB));  // 12 < 20 and the cached block is >= 20: not used
  EXPECT_EQ(f.layout(), (segs{{-20 * MiB}, {12 * MiB}}));
  EXPECT_THROW(fixture(1024 * MiB, caching_options{10 * MiB, false}), bad_input);
}

TEST(CachingAllocator, MaxSplitSizeFreesOversizeBlocksBeforeTheFullFlush) {
  caching_options o;
  o.max_split_size = 20 * MiB;
  fixture f(64 * MiB, o);
  auto a = f.a.allocate(60 * MiB);
  f.a.release(*a);
  ASSERT_TRUE(f.a.allocate(30 * MiB));  // 60 cached is >= 30 + 20: not used; freeing it makes room
  EXPECT_EQ(f.a.stats().retries, 0);
  EXPECT_EQ(f.a.stats().reserved, 30 * MiB);
}

TEST(CachingAllocator, ExpandableSegmentsGrowOneRangeAndAlwaysMerge) {
  caching_options o;
  o.expandable_segments = true;
  fixture f(1024 * MiB, o);
  auto a = f.a.allocate(3 * MiB);   // maps one 20 MiB page
  auto b = f.a.allocate(30 * MiB);  // 17 MiB free at the end: map 20 MiB more and extend
  EXPECT_EQ(f.layout(), (segs{{3 * MiB, 30 * MiB, -7 * MiB}}));
  EXPECT_EQ(f.a.stats().reserved, 40 * MiB);  // separate segments would hold 20 + 30
  f.a.release(*a);
  f.a.release(*b);
  EXPECT_EQ(f.layout(), (segs{{-40 * MiB}}));
  f.a.empty_cache();
  EXPECT_EQ(f.a.stats().reserved, 0);
}

// PyTorch's unmap_block: a release unmaps every whole free page, in the middle of a range too; the pages a
// live block touches stay. The next growth maps at the lowest address with room (find_expandable_block),
// and best fit takes a block that cannot grow before one that unmapped space follows.
TEST(CachingAllocator, ExpandableSegmentsUnmapFreePagesAnywhereAndRemapAtTheLowestRoom) {
  caching_options o;
  o.expandable_segments = true;
  fixture f(1024 * MiB, o);
  auto a = f.a.allocate(30 * MiB);  // pages [0, 40) MiB
  auto b = f.a.allocate(3 * MiB);   // at 30 MiB
  ASSERT_TRUE(a && b);
  const auto base = f.a.address_of(*a);
  f.a.release(*a);
  f.a.empty_cache();  // page [0, 20) is wholly free: unmapped; [20, 40) holds b
  EXPECT_EQ(f.a.stats().reserved, 20 * MiB);
  EXPECT_EQ(f.layout(), (segs{{-10 * MiB, 3 * MiB, -7 * MiB}}));
  auto c = f.a.allocate(10 * MiB);  // fits the 10 MiB left below b: no map
  ASSERT_TRUE(c);
  EXPECT_EQ(f.a.address_of(*c), base + 20 * MiB);
  EXPECT_EQ(f.a.stats().reserved, 20 * MiB);
  auto d = f.a.allocate(15 * MiB);  // no free block holds it: the unmapped hole at the range's start does
  ASSERT_TRUE(d);
  EXPECT_EQ(f.a.address_of(*d), base);
  EXPECT_EQ(f.a.stats().reserved, 40 * MiB);
  EXPECT_EQ(f.layout(), (segs{{15 * MiB, -5 * MiB, 10 * MiB, 3 * MiB, -7 * MiB}}));
}

// Random allocations, frees, empty_cache() calls on two streams under a tight capacity (so the
// out-of-memory retry runs), for every policy: after each step the allocator's figures agree with what
// it shows (reserved = the segments' bytes = the device's, allocated = the live blocks'), no two free
// blocks sit side by side, every live block keeps its address; at the end everything goes back.
TEST(CachingAllocator, RandomSequencesKeepEveryInvariant) {
  struct policy {
    const char* name;
    caching_options o;
  };
  caching_options exp;
  exp.expandable_segments = true;
  caching_options split;
  split.max_split_size = 64 * MiB;
  for (const auto& pol : {policy{"default", {}}, policy{"expandable", exp}, policy{"max_split 64", split}}) {
    SCOPED_TRACE(pol.name);
    test::fake_device dev(256 * MiB, 2 * MiB);
    {
      caching_allocator a(dev, pol.o);
      std::uint64_t rng = 88172645463325252ULL;
      auto next = [&] {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return rng;
      };
      struct live {
        std::int64_t handle, bytes;
        std::uint64_t address;
      };
      std::vector<live> alive;
      int ooms = 0;
      for (int step = 0; step < 4000; ++step) {
        const auto r = next() % 100;
        if (r < 55 || alive.empty()) {
          const std::int64_t bytes = (next() % 3 == 0) ? 1 + static_cast<std::int64_t>(next() % MiB)
                                                       : MiB + static_cast<std::int64_t>(next() % (40 * MiB));
          const auto h = a.allocate_on(bytes, static_cast<std::int64_t>(next() % 2));
          if (h)
            alive.push_back({*h, bytes, a.address_of(*h)});
          else
            ++ooms;
        } else if (r < 97) {
          const std::size_t k = next() % alive.size();
          a.release(alive[k].handle);
          alive.erase(alive.begin() + static_cast<std::ptrdiff_t>(k));
        } else {
          a.empty_cache();
        }
        std::int64_t seg_bytes = 0, live_bytes = 0, requested = 0;
        for (const auto& sv : a.snapshot()) {
          seg_bytes += sv.size;
          for (std::size_t b = 0; b < sv.blocks.size(); ++b) {
            if (sv.blocks[b].allocated) live_bytes += sv.blocks[b].size;
            if (b > 0) {
              ASSERT_FALSE(!sv.blocks[b].allocated && !sv.blocks[b - 1].allocated) << "step " << step;
            }
          }
        }
        for (const auto& l : alive) {
          requested += l.bytes;
          ASSERT_EQ(a.address_of(l.handle), l.address) << "step " << step;
        }
        ASSERT_EQ(a.stats().reserved, seg_bytes) << "step " << step;
        ASSERT_EQ(a.stats().reserved, dev.used()) << "step " << step;
        ASSERT_EQ(a.stats().allocated, live_bytes) << "step " << step;
        ASSERT_EQ(a.stats().requested, requested) << "step " << step;
        ASSERT_LE(a.stats().reserved, 256 * MiB);
      }
      EXPECT_GT(ooms, 0);  // the capacity was reached: the retry path ran
      for (const auto& l : alive) a.release(l.handle);
      a.empty_cache();
      EXPECT_EQ(a.stats().reserved, 0);
      EXPECT_EQ(dev.used(), 0);
    }
    EXPECT_EQ(dev.used(), 0);
    EXPECT_EQ(dev.ranges(), 0u);
    EXPECT_EQ(dev.live_mappings(), 0u);
  }
}

// Each stream has its own range (PyTorch keys expandable segments by stream): a block freed on one stream
// is not reused on another, and both ranges map their own pages.
TEST(CachingAllocator, ExpandableSegmentsKeepARangePerStream) {
  test::fake_device dev(1024 * MiB, 2 * MiB);
  caching_options o;
  o.expandable_segments = true;
  caching_allocator a(dev, o);
  auto x = a.allocate_on(3 * MiB, 0);
  ASSERT_TRUE(x);
  a.release(*x);
  auto y = a.allocate_on(3 * MiB, 7);
  ASSERT_TRUE(y);
  EXPECT_EQ(dev.ranges(), 2u);
  EXPECT_NE(a.address_of(*y), a.address_of(*x));
  EXPECT_EQ(a.stats().reserved, 40 * MiB);
  a.empty_cache();  // stream 0's free page goes; stream 7's holds y
  EXPECT_EQ(a.stats().reserved, 20 * MiB);
  EXPECT_EQ(dev.ranges(), 1u);  // a range with nothing mapped is given back
}

// Expandable segments live at real addresses: inside a range the device reserved, pages mapped and
// unmapped at their offsets, the range given back when the allocator goes.
TEST(CachingAllocator, ExpandableSegmentsMapPagesInsideAReservedRange) {
  test::fake_device dev(1024 * MiB, 2 * MiB);
  {
    caching_options o;
    o.expandable_segments = true;
    caching_allocator a(dev, o);
    auto x = a.allocate(3 * MiB);
    auto y = a.allocate(30 * MiB);
    ASSERT_TRUE(x && y);
    EXPECT_EQ(dev.ranges(), 1u);  // the large pool's range
    EXPECT_TRUE(dev.inside_a_range(a.address_of(*x), 3 * MiB));
    EXPECT_TRUE(dev.inside_a_range(a.address_of(*y), 30 * MiB));
    EXPECT_EQ(a.address_of(*y), a.address_of(*x) + 3 * MiB);  // contiguous in the one range
    auto s = a.allocate(4096);                                // the small pool has its own range
    EXPECT_EQ(dev.ranges(), 2u);
    EXPECT_TRUE(dev.inside_a_range(a.address_of(*s), 4096));
    a.release(*y);
    a.empty_cache();  // the free tail's whole pages go back
    EXPECT_EQ(dev.used(), 20 * MiB + 2 * MiB);
  }
  EXPECT_EQ(dev.used(), 0);
  EXPECT_EQ(dev.ranges(), 0u);
  EXPECT_EQ(dev.live_mappings(), 0u);
}

TEST(CachingAllocator, AddressesOfPlainSegmentsAreTheDevicesAndSplitsAreOffsets) {
  test::fake_device dev(1024 * MiB, 2 * MiB);
  caching_allocator a(dev, {});
  auto x = a.allocate(3 * MiB);  // a 20 MiB segment, split
  auto y = a.allocate(5 * MiB);  // the rest of it
  ASSERT_TRUE(x && y);
  EXPECT_EQ(a.address_of(*y), a.address_of(*x) + 3 * MiB);
  EXPECT_EQ(dev.live_mappings(), 1u);
}

}  // namespace
}  // namespace headroom::probes
