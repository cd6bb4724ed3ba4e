// ledger_op_test.cpp: torchtitan's per-op selective checkpointing (recompute_mode::selective_op) against a
// count made by hand from the policy (pytorch/torchtitan@9dec370 torchtitan/parallelisms/parallelize_llama.py
// l.214-264: aten.mm, the SDPA kernels, reduce_scatter_tensor and max saved, every second mm recomputed) for
// torchtitan's Llama 3 block (torchtitan/models/llama/model.py at 9dec370: wq, wk, wv, SDPA, wo; w1, w3, w2).
#include <gtest/gtest.h>

#include <string>

#include "planner/estimate.hpp"
#include "planner/ledger.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

// Llama 3.1 8B as torchtitan builds it (models/llama/__init__.py at 9dec370: dim 4096, 32 layers, 32 heads,
// 8 kv heads, ffn 14336 after its rounding of 1.3 x 8/3 x 4096 up to a multiple of 1024).
model_spec ledger_op_llama3_8b() {
  model_spec m = test::swiglu_model("llama3-8b", 32, 4096, 32, 8, 128, 14336, 128256);
  return m;
}

ledger_shape ledger_op_shape(std::int64_t seq, std::int64_t b, int tp) {
  ledger_shape s{seq, b, tp, tp > 1, 1, attention_kind::flash, 2};
  s.op_policy = true;
  return s;
}

// The hand count, per token on one rank, bf16 unless said: the block input h/t (sequence parallel); the kept
// matmul outputs, 1st wq (a*d/t), 3rd wv (kv*d/t), 5th w1 (f/t), 7th w2 (h: a row-parallel partial sum over
// every local token); SDPA's output (a*d/t) and its fp32 log-sum-exp (4 bytes x a/t); with tp > 1 the two
// reduce-scatter outputs (h/t each). wk, wo and w3 (2nd, 4th, 6th) are recomputed.
std::int64_t ledger_op_bytes_per_token(int tp) {
  const std::int64_t h = 4096, ad = 32 * 128, kvd = 8 * 128, f = 14336, a = 32;
  std::int64_t bf16_width = h / tp + ad / tp + kvd / tp + f / tp + h + ad / tp;
  if (tp > 1) bf16_width += 2 * (h / tp);
  return 2 * bf16_width + 4 * (a / tp);
}

TEST(LedgerOp, Llama3_8bLayerKeepsWhatThePolicySaves) {
  // torchtitan Table 1's case: seq 8192, local batch 2, no tensor parallelism: 63,616 bytes per token.
  EXPECT_EQ(ledger_op_bytes_per_token(1), 63616);
  const auto sums = sum_ledger(layer_ledger(ledger_op_llama3_8b(), ledger_op_shape(8192, 2, 1)));
  EXPECT_EQ(sums.op, 8192 * 2 * 63616);
  EXPECT_EQ(sums.of(recompute_mode::selective_op), sums.op);
  // Between full recomputation (the block input, 8,192 bytes per token) and none.
  EXPECT_EQ(sums.full, 8192 * 2 * 8192);
  EXPECT_GT(sums.op, sums.full);
  EXPECT_LT(sums.op, sums.none);
}

TEST(LedgerOp, TensorParallelKeepsThePartialSumAndTheReduceScatters) {
  EXPECT_EQ(ledger_op_bytes_per_token(8), 17168);
  const auto sums = sum_ledger(layer_ledger(ledger_op_llama3_8b(), ledger_op_shape(8192, 1, 8)));
  EXPECT_EQ(sums.op, 8192 * 17168);
}

TEST(LedgerOp, TheOtherModesDoNotCountTheOpOutputs) {
  const auto with = sum_ledger(layer_ledger(ledger_op_llama3_8b(), ledger_op_shape(4096, 1, 2)));
  auto plain_shape = ledger_op_shape(4096, 1, 2);
  plain_shape.op_policy = false;
  const auto without = sum_ledger(layer_ledger(ledger_op_llama3_8b(), plain_shape));
  EXPECT_EQ(with.none, without.none);
  EXPECT_EQ(with.selective, without.selective);
  EXPECT_EQ(with.full, without.full);
  // Recomputed in backward: what the policy did not keep, never one of its kept op outputs.
  auto s = ledger_op_shape(4096, 1, 2);
  bool up_recomputed = false;
  for (const auto& e : backward_working_set(ledger_op_llama3_8b(), s, recompute_mode::selective_op, 0)) {
    EXPECT_NE(e.role, act_role::op_output) << e.name;
    EXPECT_NE(e.name, "recomputed.ln1.input");
    EXPECT_NE(e.name, "recomputed.mlp.gate");  // w1's output, the 5th matmul: kept
    up_recomputed |= e.name == "recomputed.mlp.up";  // w3's output, the 6th: recomputed
  }
  EXPECT_TRUE(up_recomputed);
}

TEST(LedgerOp, AGeluBlockKeepsTheFirstMlpMatmulOnly) {
  // wq 1st, wk 2nd, wv 3rd, wo 4th, fc1 5th (kept: the GeLU input), fc2 6th (recomputed). Per token with
  // tp = 1: input h, wq h, wv h, SDPA h, log-sum-exp 4a bytes, GeLU input 4h, in bf16.
  model_spec m = ledger_op_llama3_8b();
  m.mlp = mlp_kind::gelu;
  m.kv_heads = 32;
  m.ffn_hidden = 4 * 4096;
  const auto sums = sum_ledger(layer_ledger(m, ledger_op_shape(2048, 1, 1)));
  EXPECT_EQ(sums.op, 2048 * (2 * (4096 * 4 + 4 * 4096) + 4 * 32));
}

TEST(LedgerOp, PlanRefusesItWhereItIsNotModelled) {
  problem p = test::preset_problem("llama3-8b");
  p.training.attention = attention_kind::flash;
  p.training.global_batch = 8;
  layout l = test::make_layout(8, 3, recompute_mode::selective_op);
  EXPECT_NO_THROW(estimate(p, l));
  p.training.attention = attention_kind::eager;
  EXPECT_THROW(estimate(p, l), bad_input);
  // MoE layers with standard attention are priced (tests/ledger_op_moe_test.cpp), and multi-latent attention
  // too (tests/ledger_op_mla_test.cpp: torchtitan @ 238fa995 runs the whole block under the policy).
  problem moe = test::preset_problem("mixtral-8x7b");
  moe.training.attention = attention_kind::flash;
  moe.training.global_batch = 8;
  EXPECT_NO_THROW(estimate(moe, l));
  problem mla = test::preset_problem("deepseek-v3");
  mla.training.attention = attention_kind::flash;
  mla.training.global_batch = 64;
  EXPECT_NO_THROW(estimate(mla, test::make_layout(64, 3, recompute_mode::selective_op)));
  // torchao's Float8 linears run torch._scaled_mm, which the policy neither counts nor keeps: refused for
  // every FP8 recipe, not only those that save FP8 activations.
  p.training.attention = attention_kind::flash;
  for (const char* fp8 : {"fsdp2-fp8", "fsdp2-fp8-allgather"}) {
    p.precision = load_recipe(fp8);
    EXPECT_THROW(estimate(p, l), bad_input) << fp8;
  }
}

// torchtitan counts the blocks across a rank's chunks; per chunk here: interleaving with the layer policy is
// refused rather than priced one way or the other.
TEST(LedgerOp, EveryNthLayerWithInterleavedChunksIsRefused) {
  problem p = test::preset_problem("llama3-8b");
  p.training.attention = attention_kind::flash;
  p.training.global_batch = 16;
  layout l = test::make_layout(8, 0, recompute_mode::full_every_5, 1, 4);
  EXPECT_NO_THROW(estimate(p, l));
  l.vpp = 2;
  EXPECT_THROW(estimate(p, l), bad_input);
}

TEST(LedgerOp, EstimatePricesTheLayerAsTheLedgerSums) {
  problem p = test::preset_problem("llama3-8b");
  p.training.attention = attention_kind::flash;
  p.training.seq = 8192;
  p.training.micro_batch = 2;
  p.training.global_batch = 16;
  const layout l = test::make_layout(8, 3, recompute_mode::selective_op);
  const auto b = estimate(p, l);
  EXPECT_EQ(b.basis.per_layer.op, 8192 * 2 * ledger_op_bytes_per_token(1));
  EXPECT_EQ(b.worst_stage().activations, 32 * 8192 * 2 * ledger_op_bytes_per_token(1));
  EXPECT_EQ(parse_name<recompute_mode>("selective-op"), recompute_mode::selective_op);
}

// torchtitan's layer policy (parallelize_llama.py @ 9dec370 l.277-285): blocks counted from 1, those whose
// count is a multiple of N checkpointed whole. 32 layers, N = 3: blocks 3, 6, ..., 30 = 10 recomputed, 22 kept.
TEST(LedgerOp, EveryNthLayerRecomputesTheMultiplesOfN) {
  problem p = test::preset_problem("llama3-8b");
  p.training.attention = attention_kind::flash;
  p.training.global_batch = 8;
  const auto plain = estimate(p, test::make_layout(8, 3, recompute_mode::none));
  const auto full = estimate(p, test::make_layout(8, 3, recompute_mode::full));
  const std::int64_t none_layer = plain.basis.per_layer.none, full_layer = full.basis.per_layer.full;
  const auto every3 = estimate(p, test::make_layout(8, 3, recompute_mode::full_every_3));
  EXPECT_EQ(every3.worst_stage().activations, 22 * none_layer + 10 * full_layer);
  EXPECT_EQ(every3.worst_stage().working_set, full.worst_stage().working_set);
  const auto every2 = estimate(p, test::make_layout(8, 3, recompute_mode::full_every_2));
  EXPECT_EQ(every2.worst_stage().activations, 16 * none_layer + 16 * full_layer);
  // A stage of 4 layers under every 5th: none recomputed, so none's working set.
  p.training.global_batch = 1;
  const auto short_stage = estimate(p, test::make_layout(8, 0, recompute_mode::full_every_5, 1, 8));
  const auto short_none = estimate(p, test::make_layout(8, 0, recompute_mode::none, 1, 8));
  EXPECT_EQ(short_stage.worst_stage().activations, short_none.worst_stage().activations);
  EXPECT_EQ(short_stage.worst_stage().working_set, short_none.worst_stage().working_set);
  EXPECT_EQ(mode_of_layer(recompute_mode::full_every_3, 2), recompute_mode::full);
  EXPECT_EQ(mode_of_layer(recompute_mode::full_every_3, 3), recompute_mode::none);
  EXPECT_EQ(parse_name<recompute_mode>("full-every-4"), recompute_mode::full_every_4);
}

}  // namespace
}  // namespace headroom
