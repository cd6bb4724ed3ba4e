// sim_device_test.cpp: the simulated device maps without host memory, in pages, up to its capacity.
#include "probes/devices/sim_device.hpp"

#include <gtest/gtest.h>

#include "planner/errors.hpp"
#include "planner/units.hpp"

namespace headroom::probes {
namespace {

TEST(SimDevice, A192GiBDeviceOnAnyHost) {
  sim_device d(192 * gib, 2 * mib);
  auto a = d.map(150 * gib);  // no host memory behind it
  ASSERT_TRUE(a);
  EXPECT_EQ(d.used(), 150 * gib);
  EXPECT_FALSE(d.map(43 * gib));
  auto b = d.map(1);  // rounded to one page
  ASSERT_TRUE(b);
  EXPECT_EQ(d.used(), 150 * gib + 2 * mib);
  EXPECT_GT(*b, *a);
  d.unmap(*a, 150 * gib);
  EXPECT_EQ(d.used(), 2 * mib);
  EXPECT_EQ(d.peak_used(), 150 * gib + 2 * mib);
  EXPECT_THROW(sim_device(0, 2 * mib), bad_input);
}

}  // namespace
}  // namespace headroom::probes
