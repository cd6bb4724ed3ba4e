// max_fit_test.cpp: the doubling-then-bisection search against a linear scan, and --max-fit on the sim
// device against two independent facts: a linear scan of replays finds the same largest value, and a value
// that replays without running out of memory has a step peak (= peak requested <= peak reserved) within
// the capacity, so the device's answer never exceeds the planner's step-peak answer.
#include "probes/cases/max_fit.hpp"

#include <gtest/gtest.h>

#include "fake_device.hpp"
#include "planner/errors.hpp"
#include "probes/allocators/caching_allocator.hpp"
#include "test_support.hpp"

namespace headroom::probes {
namespace {

TEST(MaxFit, SearchAgreesWithALinearScan) {
  for (std::int64_t step : {1, 3, 256})
    for (std::int64_t answer : {0, 1, 2, 5, 17, 64, 100, 1000}) {
      const std::int64_t limit = 500 * step;
      auto fits = [&](std::int64_t v) { return fit_trial{v, v <= answer * step, ""}; };
      const fit_search s = search_largest(step, limit, fits);
      std::optional<std::int64_t> linear;
      for (std::int64_t v = step; v <= limit && fits(v).fits; v += step) linear = v;
      EXPECT_EQ(s.largest, linear) << "step " << step << " answer " << answer;
      EXPECT_EQ(s.reached_limit, answer >= 500);
      EXPECT_LE(s.trials.size(), 2u * 10 + 2);  // about 2 log2(500)
      for (const auto& t : s.trials) EXPECT_EQ(t.value % step, 0);
    }
}

// The planner's answer (planner/max_fit.hpp) against a linear scan of plans: the same largest sequence, and the
// plans on either side of the edge are the scan's.
TEST(MaxFit, PlannerAnswerAgreesWithALinearScanOfPlans) {
  problem p = test::preset_problem("gpt3-1.3b");
  p.device.capacity = 40 * gib;
  const layout l = test::make_layout(8, 1, recompute_mode::selective, 2, 1);
  const planned_fit f = plan_max_fit(p, l, fit_axis::seq, 64 * 1024);
  std::optional<std::int64_t> linear;
  for (std::int64_t v = f.step; v <= 64 * 1024; v += f.step) {
    problem q = p;
    q.training.seq = v;
    if (!estimate(q, l).fits()) break;
    linear = v;
  }
  ASSERT_TRUE(linear);
  EXPECT_EQ(f.search.largest, linear);
  ASSERT_TRUE(f.at_largest && f.at_next);
  EXPECT_TRUE(f.at_largest->fits());
  EXPECT_FALSE(f.at_next->fits());
  EXPECT_FALSE(f.breaking_term.empty());
  EXPECT_GT(f.breaking_growth, 0);
}

TEST(MaxFit, AxesAndSteps) {
  layout l = test::make_layout(16, 1, recompute_mode::none, 2, 4);
  l.vpp = 2;
  EXPECT_EQ(fit_step(l, fit_axis::micro_batch), 1);
  EXPECT_EQ(fit_step(l, fit_axis::layers), 8);
  EXPECT_EQ(fit_step(l, fit_axis::seq), 256);
  l.tp = 8;
  l.cp = 64;
  EXPECT_EQ(fit_step(l, fit_axis::seq), 512);  // lcm(256, 64 * 8)
  EXPECT_THROW(fit_axis_from("heads"), bad_input);
  // A stated Ψ keeps its parameters per layer when the layer count changes.
  const problem p = test::preset_problem("gpt3-175b");
  const problem half = with_fit_value(p, fit_axis::layers, 48);
  EXPECT_EQ(*half.model.stated_params, *p.model.stated_params / 96 * 48);
}

class MaxFitOnSim : public ::testing::TestWithParam<fit_axis> {};

TEST_P(MaxFitOnSim, BisectionEqualsALinearScanOfReplaysAndNeverBeatsTheStepPeak) {
  const fit_axis axis = GetParam();
  problem p = test::preset_problem("gpt3-1.3b");
  p.device.capacity = 24 * gib;
  const layout l = test::make_layout(8, 3, recompute_mode::none, 1, 1);
  test::fake_device dev(p.device.capacity, 2 * mib);
  max_fit_options o;
  o.axis = axis;
  o.limit = axis == fit_axis::seq ? 64 * 1024 : axis == fit_axis::layers ? 512 : 256;
  o.make_allocator = [](device& d) -> std::unique_ptr<allocator> {
    return std::make_unique<caching_allocator>(d, caching_options{});
  };
  o.make_checker = [] { return std::make_unique<test::fake_checker>(); };
  const max_fit_result r = max_fit(p, l, dev, o);
  ASSERT_TRUE(r.replayed.largest);
  ASSERT_FALSE(r.replayed.reached_limit);
  EXPECT_EQ(dev.live_mappings(), 0u);

  // Independent: replay every multiple of the step upward until the first out-of-memory.
  std::int64_t linear = 0;
  for (std::int64_t v = r.step; v <= o.limit; v += r.step) {
    const problem pv = with_fit_value(p, axis, v);
    const breakdown b = estimate(pv, l);
    const case_result c = run_case(build_trace(pv, l, b.worst), dev, o.make_allocator, {});
    if (c.replayed.oom_event) break;
    linear = v;
  }
  EXPECT_EQ(*r.replayed.largest, linear);
  ASSERT_TRUE(r.predicted_peak.largest);
  EXPECT_LE(*r.replayed.largest, *r.predicted_peak.largest);
  // The planner's verdict keeps a 10 GiB reserve on top: it never allows more than the step peak does.
  if (r.predicted_verdict.largest) {
    EXPECT_LE(*r.predicted_verdict.largest, *r.predicted_peak.largest);
  }
}

INSTANTIATE_TEST_SUITE_P(Axes, MaxFitOnSim,
                         ::testing::Values(fit_axis::micro_batch, fit_axis::seq, fit_axis::layers),
                         [](const ::testing::TestParamInfo<fit_axis>& i) {
                           return std::string(i.param == fit_axis::micro_batch ? "MicroBatch"
                                              : i.param == fit_axis::seq       ? "Seq"
                                                                               : "Layers");
                         });

TEST(MaxFit, NothingFitsIsAnAnswerAndABadLimitIsBadInput) {
  problem p = test::preset_problem("gpt3-13b");
  p.device.capacity = 8 * gib;  // 13B params of state cannot fit at any micro-batch
  p.device.reserve.fixed = 1 * gib;
  const layout l = test::make_layout(1, 0, recompute_mode::full);
  test::fake_device dev(p.device.capacity, 2 * mib);
  max_fit_options o;
  o.make_allocator = [](device& d) { return make_raw_allocator(d); };
  const max_fit_result r = max_fit(p, l, dev, o);
  EXPECT_FALSE(r.replayed.largest);
  EXPECT_EQ(r.replayed.trials.size(), 1u);
  EXPECT_NE(r.replayed.trials[0].detail.find("persistent state"), std::string::npos)
      << r.replayed.trials[0].detail;
  o.limit = -5;
  EXPECT_THROW(max_fit(p, l, dev, o), bad_input);
}

}  // namespace
}  // namespace headroom::probes
