// recipe_fp8_ddp_test.cpp: FP8 without Megatron's distributed optimizer (planner/recipe.cpp): megatron-fp8
// (Megatron DDP + TransformerEngine FP8) and fsdp2-fp8 / fsdp2-fp8-allgather (torchtitan's torchao Float8 over
// FSDP2). Every byte below is derived here from the framework code the recipe cites, and Llama 2 7B's
// parameters are counted by hand (h 4096, 32 layers, ffn 11008, vocab 32000, untied, RMSNorm, no biases).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

// Llama 2 7B by hand: per layer q, k, v, o 4096 x 4096 and gate, up, down 4096 x 11008 (linear), two RMSNorm
// weights of 4096; the embedding and the output head 32000 x 4096 each; the final norm 4096.
constexpr std::int64_t fp8ddp_linear = 32LL * (4 * 4096LL * 4096 + 3 * 4096LL * 11008);
constexpr std::int64_t fp8ddp_norms = 32LL * 2 * 4096 + 4096;
constexpr std::int64_t fp8ddp_head = 2 * 32000LL * 4096;
constexpr std::int64_t fp8ddp_total = fp8ddp_linear + fp8ddp_norms + fp8ddp_head;
static_assert(fp8ddp_total == 6'738'415'616);  // Llama 2 7B's published count (HF: 6.74 B)

// Bytes per parameter from the sources, not from the recipe:
// Megatron DDP with --bf16 (Megatron-LM @ d98e8a64): bf16 weights 2; fp32 main_grad 4 (arguments.py
// l.1209-1216); fp32 master clone 4 (optimizer.py l.1012); Adam m, v fp32 on the master 4 + 4. TE @ d0067d0d
// caches for each linear weight an FP8 rowwise copy 1 and its columnwise transpose 1 (linear.py l.467-475,
// l.2068-2071). Nothing is sharded.
constexpr std::int64_t fp8ddp_megatron_other = 2 + 4 + 4 + 4 + 4;               // 18
constexpr std::int64_t fp8ddp_megatron_linear = fp8ddp_megatron_other + 1 + 1;  // 20
// FSDP2 with MixedPrecisionPolicy(bf16, fp32): fp32 shard 4, fp32 gradient 4, Adam m, v 4 + 4, all sharded;
// gathered bf16 2, or with torchao's FP8 all-gather FP8 1 for linear weights (fsdp_utils.py l.228-251).
constexpr std::int64_t fp8ddp_fsdp_sharded = 4 + 4 + 4 + 4;

breakdown fp8ddp_plan(const std::string& recipe, int gpus, int zero) {
  problem p = test::preset_problem("llama2-7b");
  p.precision = load_recipe(recipe);
  p.training.seq = 4096;
  p.training.global_batch = 64;
  p.training.attention = attention_kind::flash;
  return estimate(p, test::make_layout(gpus, zero, recompute_mode::selective));
}

TEST(Fp8WithoutDistributedOptimizer, BytesPerParameterFromTheirSources) {
  const recipe m = load_recipe("megatron-fp8");
  EXPECT_EQ(m.bytes_per_param(), fp8ddp_megatron_linear);  // as every buffer were on a linear weight
  EXPECT_TRUE(m.fp8_activations);  // TE saves the linear inputs quantized (linear.py l.598-621)
  for (const auto& b : m.buffers) EXPECT_EQ(describe_sharding(b), "never sharded") << b.name;
  EXPECT_EQ(m.lowest_zero(), 0);
  EXPECT_EQ(m.highest_zero(), 0);
  for (const char* n : {"fsdp2-fp8", "fsdp2-fp8-allgather"}) {
    const recipe f = load_recipe(n);
    EXPECT_EQ(f.bytes_per_param(), fp8ddp_fsdp_sharded) << n;
    EXPECT_FALSE(f.fp8_activations) << n;  // torchao saves the high-precision input (float8_linear.py l.45)
    EXPECT_EQ(f.lowest_zero(), 3) << n;
    EXPECT_EQ(f.highest_zero(), 3) << n;
    EXPECT_FALSE(f.source.empty()) << n;
  }
  // The gathered copy: bf16 without the FP8 all-gather; with it, FP8 for linear weights and bf16 for the rest.
  EXPECT_EQ(load_recipe("fsdp2-fp8").gathered_bytes(1000, 10), 2 * 1000 + 2 * 10);
  EXPECT_EQ(load_recipe("fsdp2-fp8-allgather").gathered_bytes(1000, 10), 1 * 1000 + 2 * 10);
  EXPECT_FALSE(m.source.empty());
}

// Megatron DDP on 8 GPUs: every buffer whole on every rank, the FP8 copy on the linear weights only.
TEST(Fp8WithoutDistributedOptimizer, MegatronDdpStateOfA7BModel) {
  const auto s = fp8ddp_plan("megatron-fp8", 8, 0).worst_stage();
  EXPECT_EQ(s.params_on_rank, fp8ddp_total);
  EXPECT_EQ(s.params, 2 * fp8ddp_total + 2 * fp8ddp_linear);
  EXPECT_EQ(s.grads, 4 * fp8ddp_total);
  EXPECT_EQ(s.master, 4 * fp8ddp_total);
  EXPECT_EQ(s.optimizer, 8 * fp8ddp_total);
  EXPECT_EQ(s.persistent, fp8ddp_megatron_linear * fp8ddp_linear +
                              fp8ddp_megatron_other * (fp8ddp_norms + fp8ddp_head));  // 125.0 GiB
  EXPECT_EQ(s.transient, 0);
  EXPECT_DOUBLE_EQ(test::rounded_gib(s.persistent, 2), 125.02);
  // The distributed optimizer's FP8 recipe on the same ranks shards master and Adam: 6 + 2 + 12/8.
  const auto d = fp8ddp_plan("megatron-distopt-fp8", 8, 1).worst_stage();
  EXPECT_EQ(s.persistent - d.persistent, 12 * fp8ddp_total - 3 * (4 * fp8ddp_total / 8));
}

// FSDP2 + torchao Float8 on 8 GPUs at ZeRO 3: the sharded state is fsdp2-bf16's, 16/8 bytes a parameter; the
// gathered layers (two in flight) are bf16, or FP8 with the all-gather.
TEST(Fp8WithoutDistributedOptimizer, Fsdp2Float8StateOfA7BModel) {
  const std::int64_t layer_linear = fp8ddp_linear / 32, layer_norms = 2 * 4096;
  const auto bf16 = fp8ddp_plan("fsdp2-bf16", 8, 3).worst_stage();
  for (const char* n : {"fsdp2-fp8", "fsdp2-fp8-allgather"}) {
    const auto s = fp8ddp_plan(n, 8, 3).worst_stage();
    EXPECT_EQ(s.persistent, fp8ddp_fsdp_sharded * fp8ddp_total / 8) << n;
    EXPECT_EQ(s.persistent, bf16.persistent) << n;
    EXPECT_EQ(s.activations, bf16.activations) << n;  // torchao saves bf16 inputs: nothing changes
  }
  EXPECT_EQ(fp8ddp_plan("fsdp2-fp8", 8, 3).worst_stage().transient, 2 * 2 * (layer_linear + layer_norms));
  // With the FP8 all-gather a layer's linear weights gather at 1 byte; its two norms, 16 KiB in bf16, are
  // priced at the layer's rate by the per-layer unit (estimate.cpp zero3_gather_bytes): at most that short.
  const std::int64_t want = 2 * (1 * layer_linear + 2 * layer_norms);
  EXPECT_NEAR(static_cast<double>(fp8ddp_plan("fsdp2-fp8-allgather", 8, 3).worst_stage().transient),
              static_cast<double>(want), 2.0 * layer_norms);
}

std::string fp8ddp_layout_refusal(const std::string& recipe, int gpus, int zero) {
  problem p = test::preset_problem("llama2-7b");
  p.precision = load_recipe(recipe);
  const auto e = layout_error(p, test::make_layout(gpus, zero, recompute_mode::selective));
  return e ? e->what() : "";
}

// Section 0 of issue 19: a stage the framework never runs is refused, not priced.
TEST(Fp8WithoutDistributedOptimizer, StagesTheFrameworksDoNotRunAreRefused) {
  for (int z : {1, 2, 3})
    EXPECT_NE(fp8ddp_layout_refusal("megatron-fp8", 8, z).find("runs with ZeRO 0"), std::string::npos) << z;
  for (const char* n : {"fsdp2-fp8", "fsdp2-fp8-allgather"})
    for (int z : {0, 1, 2})
      EXPECT_NE(fp8ddp_layout_refusal(n, 8, z).find("runs with ZeRO 3"), std::string::npos) << n << z;
  EXPECT_EQ(fp8ddp_layout_refusal("megatron-fp8", 8, 0), "");
  EXPECT_EQ(fp8ddp_layout_refusal("fsdp2-fp8-allgather", 8, 3), "");
  EXPECT_EQ(fp8ddp_layout_refusal("fsdp2-fp8", 1, 0), "");  // one GPU: nothing to shard, any stage
  // A custom file states its stages as `headroom recipes --json` writes them, and round-trips.
  const recipe back = recipe_from_json(recipe_to_json(load_recipe("fsdp2-fp8-allgather")), "r");
  EXPECT_EQ(back.lowest_zero(), 3);
  EXPECT_EQ(back.gathered_bytes(1000, 10), 1020);
  EXPECT_THROW(recipe_from_json(nlohmann::json::parse(R"({"buffers": [{"kind": "params", "bytes": 2}],
                                                          "zero_stages": [2, 1]})"),
                                "r"),
               bad_input);
}

}  // namespace
}  // namespace headroom
