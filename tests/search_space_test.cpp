// search_space_test.cpp: the search's axes as data: their order, levels and setters, and the combinations
// each level's loop runs through.
#include "planner/search_space.hpp"

#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace headroom {
namespace {

TEST(SearchSpace, EightAxesInLoopOrder) {
  const auto p = test::preset_problem("gpt3-175b");
  const auto space = search_space(p, {});
  std::string names;
  for (const auto& a : space) names += std::string(a.name) + " ";
  EXPECT_EQ(names, "tp cp sp micro_batch pp vpp zero recompute ");
  for (const auto& a : space) {
    EXPECT_FALSE(a.fixed) << a.name;
    ASSERT_TRUE(a.set) << a.name;
    ASSERT_FALSE(a.values.empty()) << a.name;
  }
  EXPECT_EQ(space[0].values.size(), 8u);   // tp 1 .. GPUs per node
  EXPECT_EQ(space[1].values.size(), 1u);   // cp: the sequence is short
  EXPECT_EQ(space[4].values.size(), 98u);  // pp 1 .. 96 + 2
  EXPECT_EQ(space[7].level, axis_level::activation);
  EXPECT_EQ(space[6].level, axis_level::state);
  EXPECT_TRUE(space[3].monotone);
  // Each setter writes its own field.
  search_point x;
  for (const auto& a : space) a.set(x, a.values.back());
  EXPECT_EQ(x.where.tp, 8);
  EXPECT_FALSE(x.where.sequence_parallel);
  EXPECT_EQ(x.micro_batch, 16);
  EXPECT_EQ(x.where.pp, 98);
  EXPECT_EQ(x.where.vpp, 8);
  EXPECT_EQ(x.where.zero, 3);
  EXPECT_EQ(x.where.recompute, recompute_mode::full);
}

TEST(SearchSpace, FixedAxesHoldOneValue) {
  const auto p = test::preset_problem("gpt3-175b");
  search_axes a;
  a.tp = 4;
  a.micro_batch = 2;
  a.recompute = recompute_mode::selective;
  const auto space = search_space(p, a);
  EXPECT_TRUE(space[0].fixed);
  EXPECT_EQ(space[0].values, std::vector<std::int64_t>{4});
  EXPECT_EQ(space[3].values, std::vector<std::int64_t>{2});
  EXPECT_EQ(space[7].values, std::vector<std::int64_t>{1});
}

TEST(SearchSpace, CombinationsTurnTheLastAxisFastest) {
  const auto p = test::preset_problem("gpt3-175b");
  search_axes a;
  a.cp = 1;
  const auto space = search_space(p, a);
  const axis_combos ledger(space, axis_level::ledger);
  EXPECT_EQ(ledger.size(), 8u * 1 * 2 * 5);  // tp x cp x sp x micro-batch
  search_point x;
  ledger.apply(1, x);  // tp 1, cp 1, sp on, micro-batch 2
  EXPECT_EQ(x.where.tp, 1);
  EXPECT_TRUE(x.where.sequence_parallel);
  EXPECT_EQ(x.micro_batch, 2);
  EXPECT_FALSE(ledger.monotone_first(1));
  EXPECT_TRUE(ledger.monotone_first(0));
  // sp off means nothing at tp = 1: not tried there; at tp = 2 it is.
  ledger.apply(5, x);  // tp 1, sp off, micro-batch 1
  EXPECT_FALSE(x.where.sequence_parallel);
  EXPECT_FALSE(ledger.applies(5, x.where));
  ledger.apply(15, x);  // tp 2, sp off, micro-batch 1
  EXPECT_TRUE(ledger.applies(15, x.where));
  // plan's combination: the searched axes at their first values, the fixed cp.
  ledger.apply(0, x);
  EXPECT_TRUE(ledger.as_plan_builds(0, x.where));
  EXPECT_FALSE(ledger.as_plan_builds(1, x.where));
  // A level without fixed axes has no combination of plan's to blame.
  const axis_combos state(space, axis_level::state);
  EXPECT_EQ(state.size(), 4u);
  EXPECT_FALSE(state.as_plan_builds(0, x.where));
}

}  // namespace
}  // namespace headroom
