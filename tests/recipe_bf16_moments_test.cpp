// recipe_bf16_moments_test.cpp: the FP8 recipes with bf16 Adam moments (planner/recipe.cpp), the precision of
// Megatron-MoE-ModelZoo's FP8 launches, against a hand count of Llama 3 8B on 8 GPUs at ZeRO 1. Where each
// byte lives, from the sources (NVIDIA/Megatron-LM @ d98e8a64, NVIDIA/TransformerEngine @ d0067d0d): with FP8
// other than delayed scaling and fp32 main params, use_precision_aware_optimizer_no_fp8_or_ds_fp8 is false
// (megatron/core/optimizer/optimizer_config.py l.407-414), so the distributed optimizer keeps an fp32 clone of
// the rank's shard as master (distrib_optimizer.py l.421-455) and passes TE's FusedAdam only the moment dtypes
// (optimizer/__init__.py l.564-585), which allocates exp_avg and exp_avg_sq in bf16 (fused_adam.py
// l.393-416, 452-460). The grad buffer stays fp32 and unsharded (--main-grads-dtype fp32).
#include <gtest/gtest.h>

#include "planner/estimate.hpp"
#include "planner/recipe.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

// Llama 3 8B by hand: per layer q, o 4096 x 4096, k, v 4096 x 1024, gate, up, down 4096 x 14336 (linear);
// two RMSNorm weights of 4096; embedding and output head 128256 x 4096 each, untied; the final norm 4096.
constexpr std::int64_t moments_linear = 32LL * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336);
constexpr std::int64_t moments_other = 32LL * 2 * 4096 + 2LL * 128256 * 4096 + 4096;
constexpr std::int64_t moments_n = moments_linear + moments_other;
constexpr std::int64_t moments_d = 8;

breakdown moments_plan(const std::string& recipe) {
  auto p = test::preset_problem("llama3-8b");
  p.precision = load_recipe(recipe);
  p.training.seq = 4096;
  p.training.global_batch = 64;
  p.training.attention = attention_kind::flash;
  layout l;
  l.gpus = static_cast<int>(moments_d);
  l.zero = 1;
  return estimate(p, l);
}

TEST(RecipeBf16Moments, ParamGatherFormByHand) {
  const auto b = moments_plan("megatron-distopt-fp8-param-gather-bf16-moments");
  const auto& s = b.stages[0];
  ASSERT_EQ(s.params_on_rank, moments_n);  // the hand count is the preset's model
  // FP8 weight + transpose 2 bytes per linear weight, bf16 2 bytes for the rest: 2 bytes each.
  EXPECT_EQ(s.params, 2 * moments_linear + 2 * moments_other);
  EXPECT_EQ(s.grads, 4 * moments_n);                        // fp32 main gradients, never sharded
  EXPECT_EQ(s.master, 4 * moments_n / moments_d);           // MCore's fp32 master shard
  EXPECT_EQ(s.optimizer, (2 + 2) * moments_n / moments_d);  // bf16 exp_avg + exp_avg_sq, sharded
  // 6 + 8/d bytes per parameter, against 6 + 12/d with fp32 moments.
  const auto fp32 = moments_plan("megatron-distopt-fp8-param-gather");
  EXPECT_EQ(fp32.stages[0].optimizer - s.optimizer, 4 * moments_n / moments_d);
  EXPECT_EQ(load_recipe("megatron-distopt-fp8-param-gather-bf16-moments").bytes_per_param(),
            2 + 2 + 4 + 4 + 2 + 2);
}

TEST(RecipeBf16Moments, WithoutParamGatherTheBf16WeightsStay) {
  const auto s = moments_plan("megatron-distopt-fp8-bf16-moments").stages[0];  // a copy: the plan is a temporary
  EXPECT_EQ(s.params, 2 * moments_n + 2 * moments_linear);  // bf16 everywhere, plus FP8 + transpose on linear
  EXPECT_EQ(s.grads, 4 * moments_n);
  EXPECT_EQ(s.master, 4 * moments_n / moments_d);
  EXPECT_EQ(s.optimizer, 4 * moments_n / moments_d);
  const recipe r = load_recipe("megatron-distopt-fp8-bf16-moments");
  EXPECT_TRUE(r.trains_in_fp8());
  EXPECT_EQ(r.lowest_zero(), 1);
  EXPECT_EQ(r.highest_zero(), 1);
  // The FP8 recipes' saved activations are the same with either moment dtype.
  EXPECT_EQ(moments_plan("megatron-distopt-fp8-bf16-moments").basis.per_layer.none,
            moments_plan("megatron-distopt-fp8").basis.per_layer.none);
}

}  // namespace
}  // namespace headroom
