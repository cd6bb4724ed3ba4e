// timeline_svg_test.cpp: the timeline is an SVG with the three series, the capacity line and the phases.
#include "probes/trace/timeline_svg.hpp"

#include <gtest/gtest.h>

#include "planner/model_files.hpp"
#include "probes/allocators/caching_allocator.hpp"
#include "probes/devices/sim_device.hpp"
#include "test_support.hpp"

namespace headroom::probes {
namespace {

TEST(TimelineSvg, DrawsSeriesCapacityAndPhases) {
  const problem p = test::preset_problem("gpt3-1.3b");
  layout l;
  l.gpus = 2;
  l.pp = 2;
  auto t = build_trace(p, l, 0);
  sim_device dev(p.device.capacity, 2 * mib);
  caching_allocator a(dev, {});
  auto r = replay(t, a, true);
  auto svg = timeline_svg(t, r, p.device.capacity, "gpt3-1.3b <test>");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  for (auto s : {"reserved", "allocated", "requested", "capacity 192.0 GiB", "backward", "&lt;test&gt;"})
    EXPECT_NE(svg.find(s), std::string::npos) << s;
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

}  // namespace
}  // namespace headroom::probes
