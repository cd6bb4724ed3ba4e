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

// Returns the most layers stage `stage` holds at once over a whole step, walked in Megatron's interleaved
// order (schedules.py: the warm-up forwards, then one forward and one backward at a time, then the
// cool-down; forward step i runs chunk (i mod pp*vpp) / pp, backward step j chunk vpp - 1 - (j mod pp*vpp)
// / pp), given each chunk's size: the count the planner's activations must follow when chunks differ.
std::int64_t schedule_walked_layers(const layout& l, int stage, std::int64_t microbatches,
                                    const std::vector<std::int64_t>& chunk_sizes) {
  const std::int64_t pp = l.pp, v = l.vpp, total = microbatches * v;
  const std::int64_t warmup = std::min(2 * (pp - stage - 1) + (v - 1) * pp, total);
  auto size = [&](std::int64_t i, bool fwd) {
    const std::int64_t c = (i % (pp * v)) / pp;
    return chunk_sizes[static_cast<std::size_t>(fwd ? c : v - 1 - c)];
  };
  std::int64_t alive = 0, most = 0, f = 0;
  for (; f < warmup; ++f) alive += size(f, true);
  most = alive;
  for (std::int64_t b = 0; b < total; ++b) {
    if (f < total) alive += size(f++, true);
    most = std::max(most, alive);
    alive -= size(b, false);
  }
  return most;
}

// Chunks whose sizes fall along the round: stage 0 of pp 4, vpp 2 with chunks of 5 and 4 layers holds 51
// layers at the end of its warm-up but 52 later in the steady state, when its backward has moved on to the
// smaller chunk while forwards still add the larger one; the planner and the trace take the most.
TEST(Schedule, SteadyStatePeakOfUnevenChunks) {
  problem p = preset_problem("llama2-7b");  // 32 layers
  p.training.global_batch = 64;
  p.training.split.layers = {5, 3, 4, 4, 4, 4, 4, 4};
  layout l = make_layout(8, 0, recompute_mode::none, 1, 4);
  l.vpp = 2;
  ASSERT_FALSE(split_error(p, l));
  const breakdown b = estimate(p, l);
  const std::int64_t M = b.basis.microbatches;
  for (int k = 0; k < 4; ++k) {
    const std::vector<std::int64_t> sizes = {chunk_layers(p, l, k, 0), chunk_layers(p, l, k, 1)};
    EXPECT_EQ(b.stages[static_cast<std::size_t>(k)].layer_activations, schedule_walked_layers(l, k, M, sizes))
        << "stage " << k;
  }
  EXPECT_EQ(b.stages[0].layer_activations, 52);
}

// Megatron's embedding and loss counted as pipeline layers under interleaving (transformer_block.py
// get_num_layers_to_build at NVIDIA/Megatron-LM@d98e8a64): (L + 2) / (pp x vpp) slots per virtual stage, one
// layer fewer on the first virtual stage of rank 0 and the last of rank pp - 1. Qwen3-235B-A22B's 94 layers on
// pp 8, vpp 4 (Megatron-MoE-ModelZoo's H100 layout): 96 / 32 = 3, so rank 0's chunks are 2, 3, 3, 3.
TEST(Schedule, CountedEmbeddingAndLossShortenTheFirstAndLastVirtualStage) {
  problem p = preset_problem("llama2-70b");
  p.model.layers = 94;
  p.training.global_batch = 64 * 8;  // dp 8: 64 micro-batches a step, so the warm-up is not cut short
  p.training.split.embedding_as_layer = p.training.split.loss_as_layer = true;
  layout l = make_layout(8 * 8, 1, recompute_mode::full, 1, 8);
  l.vpp = 4;
  ASSERT_FALSE(split_error(p, l));
  EXPECT_TRUE(uneven_chunks(p, l));
  EXPECT_EQ(split(p, l), (std::vector<std::int64_t>{11, 12, 12, 12, 12, 12, 12, 11}));
  const std::vector<std::int64_t> first = {2, 3, 3, 3}, last = {3, 3, 3, 2};
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(chunk_layers(p, l, 0, c), first[static_cast<std::size_t>(c)]);
    EXPECT_EQ(chunk_layers(p, l, 7, c), last[static_cast<std::size_t>(c)]);
  }
  EXPECT_EQ(chunk_first_layer(p, l, 0, 1), 2 + 7 * 3);  // virtual stage 8
  EXPECT_EQ(chunk_first_layer(p, l, 7, 3), 94 - 2);     // the last virtual stage
  EXPECT_EQ(largest_chunk_layers(p, l, 0), 3);
  // Stage 0 keeps 39 chunks at the end of its warm-up (2(pp-1) + (vpp-1)pp + 1): 15 of chunk 0 (2 layers) and
  // 8 of each other (3 layers), 102 layers, not 39 x 11 / 4.
  const breakdown b = estimate(p, l);
  EXPECT_EQ(schedule_walked_layers(l, 0, 64, first), 15 * 2 + 3 * 8 * 3);
  EXPECT_EQ(b.stages[0].layer_activations, 102);
  EXPECT_EQ(b.stages[0].activations - b.stages[0].embedding_activations, 102 * b.basis.per_layer.of(l.recompute));
  EXPECT_TRUE(b.stages[0].layer_activations <= 39 * 3);
  for (int k = 1; k < 8; ++k) {
    std::vector<std::int64_t> sizes;
    for (int c = 0; c < 4; ++c) sizes.push_back(chunk_layers(p, l, k, c));
    EXPECT_EQ(b.stages[static_cast<std::size_t>(k)].layer_activations, schedule_walked_layers(l, k, 64, sizes))
        << "stage " << k;
  }
  // Megatron asserts the slots divide: 96 slots over pp 8 x vpp 5 do not.
  l.vpp = 5;
  const auto e = split_error(p, l);
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("get_num_layers_to_build"), std::string::npos) << e->what();
}

// A Megatron layout string, "Et|(tt|)*30mL" (Megatron-MoE-ModelZoo's DeepSeek-V3 H100 layout for pp 8, vpp 4),
// gives 32 virtual stages: 1, 30 x 2 and 0 decoder layers (the last holds the MTP layer and the loss). Each
// rank's chunks keep their sizes: rank 0 holds 1 + 2 + 2 + 2, rank 7 2 + 2 + 2 + 0.
TEST(Schedule, LayoutStringVirtualStagesKeepTheirSizes) {
  problem p = preset_problem("llama2-70b");
  p.model.layers = 61;
  p.training.global_batch = 64 * 8;  // dp 8: 64 micro-batches a step
  std::vector<std::int64_t> v(32, 2);
  v.front() = 1;
  v.back() = 0;
  p.training.split.layers = v;
  layout l = make_layout(8 * 8, 1, recompute_mode::selective, 1, 8);
  l.vpp = 4;
  ASSERT_FALSE(split_error(p, l));
  EXPECT_EQ(split(p, l), (std::vector<std::int64_t>{7, 8, 8, 8, 8, 8, 8, 6}));
  EXPECT_EQ(chunk_first_layer(p, l, 0, 1), 1 + 7 * 2);
  EXPECT_EQ(chunk_layers(p, l, 7, 3), 0);
  const breakdown b = estimate(p, l);
  for (int k = 0; k < 8; ++k) {
    std::vector<std::int64_t> sizes;
    for (int c = 0; c < 4; ++c) sizes.push_back(v[static_cast<std::size_t>(c * 8 + k)]);
    EXPECT_EQ(b.stages[static_cast<std::size_t>(k)].layer_activations, schedule_walked_layers(l, k, 64, sizes))
        << "stage " << k;
  }
  // 32 counts need vpp 4 on pp 8; with vpp 2 they are neither 8 stages nor 16 virtual ones.
  l.vpp = 2;
  EXPECT_TRUE(split_error(p, l));
}

}  // namespace
}  // namespace headroom
