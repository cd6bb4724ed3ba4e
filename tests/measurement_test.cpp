// measurement_test.cpp: the measurement record: where the peaks happened, the implied reserve, and the
// JSON fields results/README.md documents.
#include "probes/measurement.hpp"

#include <gtest/gtest.h>

#include "probes/caching_allocator.hpp"
#include "probes/sim_device.hpp"
#include "test_support.hpp"

namespace headroom::probes {
namespace {

TEST(Measurement, RecordsPeaksImpliedReserveAndWhatWasNotMeasured) {
  const problem p = test::preset_problem("gpt3-1.3b");
  layout l;
  l.gpus = 4;
  l.zero = 2;
  l.recompute = recompute_mode::selective;
  const breakdown b = estimate(p, l);
  const step_trace t = build_trace(p, l, 0);
  sim_device dev(p.device.capacity, 2 * mib);
  caching_allocator a(dev, {});
  const replay_result r = replay(t, a, false);
  const measurement m = measure(t, b.stages[0], r, "sim", dev.describe(), a.describe());
  EXPECT_EQ(m.implied_reserve(), r.reserved.bytes - (b.stages[0].persistent + b.stages[0].activations));
  EXPECT_EQ(m.peak_reserved_at.index, r.reserved.event);
  EXPECT_FALSE(m.oom_at);
  const auto j = measurement_to_json(m, nlohmann::json::object(), {"1.2.3", "abc", "headroom probe ..."});
  EXPECT_EQ(j["schema"], "headroom.measurement/1");
  EXPECT_FALSE(j["measured"].get<bool>());
  EXPECT_EQ(j["environment"]["tool_version"], "1.2.3");
  EXPECT_EQ(j["replayed"]["peak_requested_bytes"].get<std::int64_t>(), b.stages[0].step_peak);
  EXPECT_TRUE(j["replayed"]["out_of_memory"].is_null());
  EXPECT_TRUE(j["fixed_overheads"]["nccl_bytes"].is_null());
  EXPECT_FALSE(j["environment"]["date_utc"].get<std::string>().empty());
}

}  // namespace
}  // namespace headroom::probes
