// stage_terms_test.cpp: the verdict, stated once: a stage's terms and what derives from them, against
// estimate()'s breakdown and by hand.
#include "planner/stage_terms.hpp"

#include <gtest/gtest.h>

#include "planner/estimate.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

TEST(StageTerms, DerivedFiguresByHand) {
  const stage_terms t{100, 20, 300, 40, 50};  // persistent, transient, activations, working set, output
  EXPECT_EQ(t.state(), 120);
  EXPECT_EQ(t.held(), 420);
  EXPECT_EQ(t.peak_extra(), 50);
  EXPECT_EQ(t.churn(), 370);  // transient + activations + max(working set, output phase)
  EXPECT_EQ(t.step_peak(), 470);
  device_spec d;
  d.capacity = 1000;
  d.fixed_overheads = 200;
  d.reserve.fixed = 30;
  d.reserve.fragmentation = 0.5;
  d.reserve.per_token = 2;
  EXPECT_EQ(t.reserve(d, 10), 30 + 185 + 20);
  EXPECT_EQ(t.total(d, 10), 420 + 235);
  EXPECT_EQ(t.peak_total(d), 670);
  EXPECT_EQ(t.decisive_total(d, 10), 670);
  const stage_verdict v = judge(t, d, 10);
  EXPECT_EQ(v.decisive, 670);
  EXPECT_EQ(v.headroom, 330);
  EXPECT_TRUE(v.fits);
  EXPECT_FALSE(v.tight);
  d.capacity = 700;  // 30 left, under 700 / 20 = 35
  EXPECT_TRUE(judge(t, d, 10).tight);
  d.capacity = 669;
  EXPECT_FALSE(judge(t, d, 10).fits);
  EXPECT_FALSE(judge(t, d, 10).tight);
}

TEST(StageTerms, TightIsUnderOneTwentieth) {
  EXPECT_TRUE(is_tight(9, 200));
  EXPECT_FALSE(is_tight(10, 200));
  EXPECT_TRUE(is_tight(-1, 200));
  EXPECT_TRUE(fits_in(200, 200));
  EXPECT_FALSE(fits_in(201, 200));
}

// Every stage of a breakdown is its terms' verdict.
TEST(StageTerms, EstimateIsTheVerdictOfItsTerms) {
  auto p = test::preset_problem("gpt3-175b");
  p.device.reserve.fragmentation = 0.1;  // a calibrated reserve: churn and tokens count
  p.device.reserve.per_token = 1000;
  for (int zero : {0, 3}) {
    layout l = test::make_layout(64, zero, recompute_mode::selective, 8, 8);
    const breakdown b = estimate(p, l);
    for (const auto& s : b.stages) {
      const stage_verdict v = judge(s.terms(), p.device, reserve_tokens(p, l));
      EXPECT_EQ(v.step_peak, s.step_peak);
      EXPECT_EQ(v.peak_total, s.peak_total);
      EXPECT_EQ(v.reserve, s.reserve);
      EXPECT_EQ(v.total, s.total);
      EXPECT_EQ(v.decisive, s.decisive_total());
      EXPECT_EQ(v.headroom, s.headroom);
      EXPECT_EQ(v.fits, s.fits);
      EXPECT_EQ(v.tight, s.tight());
      EXPECT_EQ(s.terms().state(), s.state);
    }
  }
}

}  // namespace
}  // namespace headroom
