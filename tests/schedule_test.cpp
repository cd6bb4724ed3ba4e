// schedule_test.cpp: pipelines as people cut them, against the splits the frameworks document: DeepSpeed's
// uniform partition (the first stages take the remainder), Megatron's first / last stage counts and its
// embedding / loss accounting, explicit layouts, and Llama 3 405B's 126 layers on 16 stages (Llama 3 paper,
// arXiv 2407.21783, section 3.3.2: one layer fewer on the first and the last stage). The schedule's chunks in
// flight are Megatron's warm-up + 1.
#include "planner/schedule.hpp"

#include <gtest/gtest.h>

#include <numeric>

#include "planner/estimate.hpp"
#include "planner/suggest.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

using test::make_layout;
using test::preset_problem;

std::vector<std::int64_t> split(const problem& p, const layout& l) {
  std::vector<std::int64_t> v;
  for (int k = 0; k < l.pp; ++k) v.push_back(stage_layers(p, l, k));
  return v;
}

TEST(Schedule, BalancedSplitGivesTheRemainderToTheFirstStages) {
  problem p = preset_problem("llama2-70b");  // 80 layers
  const layout l = make_layout(12, 1, recompute_mode::none, 1, 12);
  EXPECT_FALSE(split_error(p, l));
  // 80 = 12 * 6 + 8: DeepSpeed's partition_uniform gives the first 8 stages 7 layers, the other 4 six.
  EXPECT_EQ(split(p, l), (std::vector<std::int64_t>{7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 6}));
  EXPECT_EQ(first_layer_of(p, l, 9), 8 * 7 + 6);
  EXPECT_TRUE(middle_stages_dominated(p, l));
}

TEST(Schedule, Llama3_405bOn16StagesAsTheyCutIt) {
  problem p = preset_problem("llama3-405b");
  ASSERT_EQ(p.model.layers, 126);
  layout l = make_layout(16 * 8 * 8, 1, recompute_mode::selective, 8, 16);
  std::vector<std::int64_t> paper(16, 8);
  paper.front() = paper.back() = 7;
  // Three ways to say it: the explicit layout, the first/last counts, the embedding and loss as layers.
  p.training.split.layers = paper;
  EXPECT_FALSE(split_error(p, l));
  EXPECT_EQ(split(p, l), paper);
  p.training.split = {};
  p.training.split.first_stage = p.training.split.last_stage = 7;
  EXPECT_EQ(split(p, l), paper);
  p.training.split = {};
  p.training.split.embedding_as_layer = p.training.split.loss_as_layer = true;
  EXPECT_EQ(split(p, l), paper);  // 128 slots / 16
  // The middle stages hold more layers than the first: every stage is evaluated, the worst decides.
  EXPECT_FALSE(middle_stages_dominated(p, l));
  const breakdown b = estimate(p, l);
  const auto& worst = b.worst_stage();
  for (const auto& s : b.stages) EXPECT_LE(s.decisive_total(), worst.decisive_total());
  EXPECT_EQ(evaluate_worst(p, b.basis.params, b.basis.per_layer, b.basis.peaks, l).decisive_total(),
            worst.decisive_total());
  // The search reaches pp = 16 with the default (balanced) split too.
  problem q = preset_problem("llama3-405b");
  search_axes axes;
  axes.pp = 16;
  axes.tp = 8;
  const auto s = layout_search(q, axes, {}).suggest(1024);
  EXPECT_GT(s.evaluated, 0);
}

TEST(Schedule, StatedParamsFollowTheLayers) {
  problem p = preset_problem("gpt3-175b");  // a stated Psi, spread per layer
  p.training.split.layers = {31, 33, 32};
  const breakdown b = estimate(p, make_layout(3, 0, recompute_mode::full, 1, 3));
  EXPECT_EQ(b.stages[0].params_on_rank, 175'000'000'000LL * 31 / 96);
  EXPECT_EQ(b.stages[1].params_on_rank, 175'000'000'000LL * 33 / 96);
  // Full recompute: the state decides, and the stage with the most layers (stage 1) is the worst.
  EXPECT_EQ(b.worst, 1);
  // No recompute: 31 layers x 3 micro-batches in flight (2.67 GiB each) outweigh 33 x 2 on stage 1.
  EXPECT_EQ(estimate(p, make_layout(3, 0, recompute_mode::none, 1, 3)).worst, 0);
}

TEST(Schedule, ChunksInFlightAreMegatronsWarmupPlusOne) {
  layout l = make_layout(8, 0, recompute_mode::none, 1, 4);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(chunks_in_flight(l, k, 100), 4 - k);
  EXPECT_EQ(chunks_in_flight(l, 0, 2), 2);  // fewer micro-batches than stages
  l.vpp = 3;
  EXPECT_EQ(warmup_chunks(l, 0), 2 * 3 + 2 * 4);
  EXPECT_EQ(chunks_in_flight(l, 0, 100), 15);
}

TEST(Schedule, TheTraceUsesTheSameSplit) {
  problem p = preset_problem("gpt3-1.3b");  // 24 layers
  p.training.split.layers = {5, 7, 7, 5};
  const layout l = make_layout(8, 1, recompute_mode::selective, 1, 4);
  const breakdown b = estimate(p, l);
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(b.stages[static_cast<std::size_t>(k)].layers,
              p.training.split.layers[static_cast<std::size_t>(k)]);
}

}  // namespace
}  // namespace headroom
