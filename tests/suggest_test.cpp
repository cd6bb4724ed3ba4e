// suggest_test.cpp: the layout search: what it enumerates, how it ranks, the bound, and --min-gpus.
#include "planner/suggest.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "planner/errors.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

using test::preset_problem;

TEST(Suggest, ThirtyTwoGpusRanksZero3SelectiveFirst) {
  auto p = preset_problem("gpt3-175b");
  layout_search search(p, {}, {});
  auto s = search.suggest(32);
  ASSERT_FALSE(s.fitting.empty());
  const auto& best = s.fitting.front().where;
  EXPECT_EQ(best.zero, 3);
  EXPECT_EQ(best.recompute, recompute_mode::selective);
  EXPECT_EQ(best.tp, 1);
  EXPECT_EQ(best.pp, 1);
  EXPECT_NEAR(s.fitting.front().cost.recompute, 0.027, 0.0005);  // Korthikanti's 2.7% for GPT-3
  // The seed's alternatives all fit and rank below it: full recompute, tp=2 and pp=2 with selective.
  auto rank_of = [&](int zero, recompute_mode r, int tp, int pp) {
    for (std::size_t i = 0; i < s.fitting.size(); ++i) {
      const auto& l = s.fitting[i].where;
      if (l.zero == zero && l.recompute == r && l.tp == tp && l.pp == pp && l.sp() == (tp > 1))
        return static_cast<int>(i);
    }
    return -1;
  };
  EXPECT_GT(rank_of(3, recompute_mode::full, 1, 1), 0);
  EXPECT_GT(rank_of(3, recompute_mode::selective, 2, 1), 0);
  EXPECT_GT(rank_of(3, recompute_mode::selective, 1, 2), 0);
  EXPECT_GT(rank_of(3, recompute_mode::full, 1, 1), rank_of(3, recompute_mode::selective, 2, 1));
}

TEST(Suggest, RankingIsSortedAndTightLast) {
  auto p = preset_problem("gpt3-175b");
  layout_search search(p, {}, {});
  auto s = search.suggest(64);
  bool seen_tight = false;
  for (std::size_t i = 0; i < s.fitting.size(); ++i) {
    const auto& c = s.fitting[i];
    EXPECT_TRUE(c.worst.fits);
    EXPECT_EQ(c.tight, c.worst.headroom < p.device.capacity / 20);
    if (seen_tight) EXPECT_TRUE(c.tight);
    seen_tight = seen_tight || c.tight;
    if (i > 0 && c.tight == s.fitting[i - 1].tight) EXPECT_GE(c.cost.total, s.fitting[i - 1].cost.total);
  }
}

TEST(Suggest, EnumeratesOnlyValidLayouts) {
  auto p = preset_problem("gpt3-175b");
  layout_search search(p, {}, {});
  auto s = search.suggest(48);
  for (const auto& c : s.fitting) {
    const auto& l = c.where;
    EXPECT_EQ(48 % (l.tp * l.pp * l.cp), 0);
    EXPECT_EQ(96 % l.tp, 0);
    EXPECT_EQ(96 % l.pp, 0);
    EXPECT_LE(l.tp, 8);
  }
  EXPECT_GT(s.evaluated, 100);
}

TEST(Suggest, FixedAxesAreRespected) {
  auto p = preset_problem("gpt3-175b");
  search_axes axes;
  axes.tp = 2;
  axes.recompute = recompute_mode::full;
  layout_search search(p, axes, {});
  auto s = search.suggest(32);
  ASSERT_FALSE(s.fitting.empty());
  for (const auto& c : s.fitting) {
    EXPECT_EQ(c.where.tp, 2);
    EXPECT_EQ(c.where.recompute, recompute_mode::full);
  }
}

TEST(Suggest, ContextParallelOnlyForLongSequences) {
  auto p = preset_problem("llama3-70b");
  p.training.seq = 2048;
  auto has_cp = [](const suggestion& s) {
    return std::any_of(s.fitting.begin(), s.fitting.end(), [](const candidate& c) { return c.where.cp > 1; });
  };
  EXPECT_FALSE(has_cp(layout_search(p, {}, {}).suggest(64)));
  p.training.seq = 131072;
  p.training.attention = attention_kind::flash;
  EXPECT_TRUE(has_cp(layout_search(p, {}, {}).suggest(64)));
}

TEST(Suggest, BoundIsSixteenPsiOverN) {
  auto p = preset_problem("gpt3-175b");
  auto b = bound_for(p, 8, false);
  EXPECT_EQ(b.shardable_per_param, 16);
  EXPECT_EQ(b.per_gpu, 350'000'000'000LL);
  EXPECT_TRUE(b.impossible);
  EXPECT_FALSE(bound_for(p, 16, false).impossible);
  EXPECT_EQ(bound_for(p, 8, true).shardable_per_param, 4);  // offload leaves params + grads
}

TEST(Suggest, NoLayoutBelowTheBoundFits) {
  auto p = preset_problem("gpt3-175b");
  layout_search search(p, {}, {});
  for (int n = 1; n <= 14; ++n) EXPECT_TRUE(search.suggest(n).fitting.empty()) << n;
}

TEST(MinGpus, SmallModelFitsOnOne) {
  auto p = preset_problem("gpt3-125m");
  layout_search search(p, {}, {});
  auto r = min_gpus(search, 64);
  ASSERT_TRUE(r.n_min);
  EXPECT_EQ(*r.n_min, 1);
  EXPECT_EQ(*r.n_pow2, 1);
}

TEST(MinGpus, OneTrillionIsFoundAndConsistent) {
  auto p = preset_problem("korthikanti-1t");
  layout_search search(p, {}, {});
  auto r = min_gpus(search, 16384);
  ASSERT_TRUE(r.n_min);
  EXPECT_GE(*r.n_min, r.first_candidate);
  EXPECT_FALSE(search.suggest(*r.n_min).fitting.empty());
  if (*r.n_min > r.first_candidate) EXPECT_TRUE(search.suggest(*r.n_min - 1).fitting.empty());
  ASSERT_TRUE(r.n_pow2);
  EXPECT_EQ(*r.n_pow2 & (*r.n_pow2 - 1), 0);
}

TEST(MinGpus, ReportsNothingWithinTheLimit) {
  auto p = preset_problem("gpt3-175b");
  layout_search search(p, {}, {});
  auto r = min_gpus(search, 12);
  EXPECT_FALSE(r.n_min);
}

TEST(Suggest, RejectsImpossibleFixedAxes) {
  auto p = preset_problem("gpt3-175b");
  search_axes axes;
  axes.tp = 7;  // 96 heads
  EXPECT_THROW(layout_search(p, axes, {}), bad_input);
  // A fixed axis that cannot work is reported by its own rule, as `plan` would report it.
  search_axes pp97;
  pp97.pp = 97;
  try {
    layout_search(p, pp97, {});
    FAIL();
  } catch (const bad_input& e) {
    EXPECT_EQ(e.field(), "pp");
    EXPECT_NE(std::string(e.what()).find("fewer than pp=97"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace headroom
