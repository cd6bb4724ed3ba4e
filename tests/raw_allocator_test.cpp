// raw_allocator_test.cpp: the raw policy: one device allocation per tensor, rounded to the granularity.
#include <gtest/gtest.h>

#include "test_support.hpp"
#include "planner/units.hpp"
#include "probes/allocators/allocator.hpp"
#include "probes/devices/sim_device.hpp"

namespace headroom::probes {
namespace {


TEST(RawAllocator, RoundsEachTensorToTheGranularity) {
  sim_device dev(64 * MiB, 2 * MiB);
  auto a = make_raw_allocator(dev);
  auto x = a->allocate(1);
  auto y = a->allocate(3 * MiB);
  ASSERT_TRUE(x && y);
  EXPECT_EQ(a->stats().requested, 3 * MiB + 1);
  EXPECT_EQ(a->stats().allocated, 6 * MiB);
  EXPECT_EQ(a->stats().reserved, 6 * MiB);
  a->release(*x);
  EXPECT_EQ(a->stats().reserved, 4 * MiB);
  EXPECT_EQ(dev.used(), 4 * MiB);
  EXPECT_FALSE(a->allocate(61 * MiB));  // 62 MiB rounded, 60 free
}

}  // namespace
}  // namespace headroom::probes
