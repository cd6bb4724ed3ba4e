// fp8_recipe_test.cpp: the FP8 and precision-aware recipes (planner/recipe.cpp) against hand counts of
// Llama 3 8B (h 4096, 32 heads of 128, 8 kv heads, ffn 14336, 32 layers, vocab 128256, untied): FP8 adds an
// FP8 copy + transpose of every linear weight (TransformerEngine issues #1261, #257), --fp8-param-gather drops
// the bf16 copy of those weights (issue #1764), and the linear layers' saved inputs are FP8.
#include <gtest/gtest.h>

#include "planner/estimate.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

using test::preset_problem;

// The linear weights of Llama 3 8B, counted by hand: q and o 4096 x 4096, k and v 4096 x 1024, gate, up and
// down 4096 x 14336, per layer, times 32 layers.
constexpr std::int64_t linear_weights = 32LL * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336);

breakdown plan_with(const std::string& recipe) {
  auto p = preset_problem("llama3-8b");
  p.precision = load_recipe(recipe);
  p.training.seq = 4096;
  p.training.global_batch = 64;
  p.training.attention = attention_kind::flash;
  layout l;
  l.gpus = 8;
  l.zero = 1;
  return estimate(p, l);
}

TEST(Fp8Recipes, Fp8AddsACopyAndTransposeOfEveryLinearWeight) {
  const auto bf16 = plan_with("megatron-distopt"), fp8 = plan_with("megatron-distopt-fp8");
  EXPECT_EQ(fp8.stages[0].params - bf16.stages[0].params, 2 * linear_weights);
  EXPECT_EQ(fp8.stages[0].grads, bf16.stages[0].grads);
  EXPECT_EQ(fp8.stages[0].optimizer, bf16.stages[0].optimizer);
}

TEST(Fp8Recipes, ParamGatherDropsTheBf16CopyOfTheLinearWeights) {
  const auto fp8 = plan_with("megatron-distopt-fp8"), gather = plan_with("megatron-distopt-fp8-param-gather");
  EXPECT_EQ(fp8.stages[0].params - gather.stages[0].params, 2 * linear_weights);
  EXPECT_EQ(gather.stages[0].master, fp8.stages[0].master);
}

TEST(Fp8Recipes, LinearInputsAreSavedInFp8) {
  // Per layer, s = 4096, b = 1, t = 1: the inputs of qkv (h), the output projection (a*d = h), fc1 (h) and fc2
  // (f) lose one byte each per token.
  const auto bf16 = plan_with("megatron-distopt"), fp8 = plan_with("megatron-distopt-fp8");
  const std::int64_t saved = 4096LL * (4096 + 4096 + 4096 + 14336);
  EXPECT_EQ(bf16.basis.per_layer.none - fp8.basis.per_layer.none, saved);
}

TEST(Fp8Recipes, PrecisionAwareOptimizerHalvesTheMoments) {
  const auto fp32 = plan_with("megatron-distopt"), bf16 = plan_with("megatron-distopt-bf16-moments");
  EXPECT_EQ(bf16.stages[0].optimizer * 2, fp32.stages[0].optimizer);
  EXPECT_EQ(bf16.stages[0].master * 2, fp32.stages[0].master);  // FusedAdam's int16 remainders, not fp32
}

// --grad-reduce-in-bf16: the unsharded grad buffer halves (4 -> 2 bytes per parameter) and each rank gains the
// fp32 cast of its 1/d shard (distrib_optimizer.py, _copy_model_grads_to_main_grads): 6 + 12/d becomes
// 4 + 16/d bytes per parameter, by hand on 8 GPUs.
TEST(Fp8Recipes, Bf16GradReduceHalvesTheGradBufferAndAddsTheShardCast) {
  const auto fp32 = plan_with("megatron-distopt"), bf16 = plan_with("megatron-distopt-bf16-grads");
  const std::int64_t n = fp32.stages[0].params_on_rank;
  EXPECT_EQ(fp32.stages[0].grads, 4 * n);
  EXPECT_EQ(bf16.stages[0].grads, 2 * n + 4 * n / 8);
  EXPECT_EQ(bf16.stages[0].master, fp32.stages[0].master);
  EXPECT_EQ(bf16.stages[0].optimizer, fp32.stages[0].optimizer);
  EXPECT_EQ(load_recipe("megatron-distopt-bf16-grads").bytes_per_param(), 20);
}

// NVIDIA's FP8 example's precision (--fp8-param-gather and --grad-reduce-in-bf16 under the distributed
// optimizer), by hand on 8 GPUs: every linear weight 2 bytes (FP8 and its transpose) and every other
// parameter 2 (bf16), a 2-byte bf16 grad buffer, and the sharded fp32 gradient cast, master and Adam
// state, (4 + 4 + 8) / 8: 6 bytes per parameter.
TEST(Fp8Recipes, Fp8WithBf16GradsKeepsTheBf16GradBufferAndTheShardCast) {
  const auto r = plan_with("megatron-distopt-fp8-param-gather-bf16-grads");
  const auto fp8 = plan_with("megatron-distopt-fp8-param-gather");
  const std::int64_t n = r.stages[0].params_on_rank;
  EXPECT_EQ(r.stages[0].params, 2 * n);
  EXPECT_EQ(r.stages[0].grads, 2 * n + 4 * n / 8);
  EXPECT_EQ(r.stages[0].master, fp8.stages[0].master);
  EXPECT_EQ(r.stages[0].optimizer, fp8.stages[0].optimizer);
  EXPECT_EQ(r.stages[0].params + r.stages[0].grads + r.stages[0].master + r.stages[0].optimizer, 6 * n);
  // Without --fp8-param-gather the bf16 weights stay beside their FP8 copies: 2 more bytes per linear weight.
  EXPECT_GT(plan_with("megatron-distopt-fp8-bf16-grads").stages[0].params, r.stages[0].params);
}

TEST(Fp8Recipes, DistributedOptimizerVariantsRunAtZeroOne) {
  for (const char* name : {"megatron-distopt-fp8", "megatron-distopt-fp8-param-gather", "megatron-distopt-bf16-moments",
                           "megatron-distopt-bf16-grads", "megatron-distopt-fp8-bf16-grads",
                           "megatron-distopt-fp8-param-gather-bf16-grads"}) {
    const recipe r = load_recipe(name);
    EXPECT_EQ(r.lowest_zero(), 1) << name;
    EXPECT_EQ(r.highest_zero(), 1) << name;
  }
}

}  // namespace
}  // namespace headroom
