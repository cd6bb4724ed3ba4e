// cost_model_test.cpp: the ranking terms against their closed forms.
#include "planner/cost_model.hpp"

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace headroom {
namespace {

using test::make_layout;
using test::preset_problem;

TEST(CostModel, RecomputeTerms) {
  auto p = preset_problem("gpt3-175b");
  auto pc = count_params(p.model);
  EXPECT_DOUBLE_EQ(cost_of(p, pc, make_layout(32, 3, recompute_mode::full), {}).recompute, 1.0 / 3.0);
  EXPECT_NEAR(cost_of(p, pc, make_layout(32, 3, recompute_mode::selective), {}).recompute, 0.027, 0.0005);
  EXPECT_EQ(cost_of(p, pc, make_layout(32, 3, recompute_mode::none), {}).recompute, 0.0);
}

TEST(CostModel, BubbleIsPpMinusOneOverMicroBatches) {
  auto p = preset_problem("gpt3-175b");
  auto pc = count_params(p.model);
  auto c = cost_of(p, pc, make_layout(32, 3, recompute_mode::none, 1, 2), {});
  EXPECT_DOUBLE_EQ(c.bubble, 1.0 / (1536.0 / 16));  // M = 1536 / dp 16
  auto l = make_layout(32, 3, recompute_mode::none, 1, 4);
  l.vpp = 2;
  EXPECT_DOUBLE_EQ(cost_of(p, pc, l, {}).bubble, 3.0 / (192.0 * 2));
}

// Pipeline sends, from their closed form: 2 v M messages of s b h 2 bytes / t per GPU over the link between
// neighbouring stages (inter-node when N / p fills a node), as a fraction of the compute time.
TEST(CostModel, PipelineTrafficScalesWithInterleaving) {
  auto p = preset_problem("gpt3-175b");
  auto pc = count_params(p.model);
  auto l = make_layout(32, 3, recompute_mode::none, 1, 2);  // dp 16, M = 96, N/p = 16: across nodes
  const auto c1 = cost_of(p, pc, l, {});
  const double compute = 6.0 * 175e9 * 1536 * 2048 * (1 + 2048.0 / (6 * 12288)) / 32 / (2250e12 * 0.4);
  EXPECT_NEAR(c1.pp_comm, 2.0 * 96 * 2048 * 12288 * 2 / 50e9 / compute, 1e-9);
  l.vpp = 4;
  EXPECT_NEAR(cost_of(p, pc, l, {}).pp_comm, 4 * c1.pp_comm, 1e-12);
  EXPECT_EQ(cost_of(p, pc, make_layout(32, 3, recompute_mode::none), {}).pp_comm, 0.0);  // no pipeline
  auto within = make_layout(8, 3, recompute_mode::none, 1, 2);  // N/p = 4: neighbours share a node
  p.device.gpus_per_node = 8;
  EXPECT_LT(cost_of(p, pc, within, {}).pp_comm, c1.pp_comm);
}

TEST(CostModel, DataParallelVolume) {
  auto p = preset_problem("gpt3-175b");
  auto pc = count_params(p.model);
  auto z3 = cost_of(p, pc, make_layout(32, 3, recompute_mode::none), {});
  auto z1 = cost_of(p, pc, make_layout(32, 1, recompute_mode::none), {});
  EXPECT_NEAR(z3.dp_bytes, 3 * 175e9 * 2 * 31 / 32, 1e3);  // ZeRO-3: 3 Psi
  EXPECT_NEAR(z1.dp_bytes, 2 * 175e9 * 2 * 31 / 32, 1e3);
  cost_model slow;
  slow.inter_node_gbs = 0.1;  // traffic that compute cannot hide shows up
  EXPECT_GT(cost_of(p, pc, make_layout(32, 3, recompute_mode::none), slow).dp_exposed, 0.0);
  EXPECT_EQ(z3.dp_exposed, 0.0);
}

TEST(CostModel, TensorParallelTrafficGrowsWithTp) {
  auto p = preset_problem("gpt3-175b");
  auto pc = count_params(p.model);
  double prev = 0;
  for (int t : {2, 4, 8}) {
    double c = cost_of(p, pc, make_layout(64, 1, recompute_mode::selective, t, 1), {}).tp_comm;
    EXPECT_GT(c, prev);
    prev = c;
  }
}

// torchtitan's per-op policy on an all-MoE model, Qwen3-30B-A3B (h 2048, 32 heads and 4 kv heads of 128,
// 128 experts of width 768, top 8, no shared expert) at seq 4096, per token and layer in FLOPs: the forward is
// attention 2(2hq + 2h·kv) + 4sq = 104,857,600, the gate 2·E·h = 524,288 and 8 experts' three matmuls
// 2·8·3·h·768 = 75,497,472, in all 180,879,360; the policy repeats wk and wo, 2(h·kv + q·h) = 18,874,368, the
// gate and every expert matmul (torch._grouped_mm is on no save list), 94,896,128; the fraction of forward +
// backward is 94,896,128 / (3 x 180,879,360).
TEST(CostModel, OpPolicyOnMoeLayersRepeatsTheExperts) {
  auto p = preset_problem("qwen3-30b-a3b");
  p.training.seq = 4096;
  p.training.attention = attention_kind::flash;
  const auto pc = count_params(p.model);
  layout l = make_layout(8, 3, recompute_mode::selective_op);
  l.ep = 8;
  EXPECT_NEAR(cost_of(p, pc, l, {}).recompute, 94896128.0 / (3 * 180879360.0), 1e-12);
  // The compute a token costs is that of the parameters it touches (top_k of the experts): every term
  // measured against the compute time scales with active / total when the active count is taken away.
  l = make_layout(16, 1, recompute_mode::none, 2);
  l.ep = 8;
  auto all = pc;
  all.active = pc.total;
  ASSERT_LT(pc.active, pc.total / 5);
  const double touched = cost_of(p, pc, l, {}).tp_comm, every = cost_of(p, all, l, {}).tp_comm;
  EXPECT_NEAR(every / touched, static_cast<double>(pc.active) / static_cast<double>(pc.total), 1e-12);
}

// Multi-latent attention with q_lora_rank > 0 (the deepseek-v3 preset: h 7168, 128 heads, q_lora 1536, kv_lora
// 512, head dims 128 / 64 / 128; dense ffn 18432 on layers 0-2, 58 MoE layers of 256 experts top 8, width 2048,
// one shared expert of 2048): five attention matmuls wq_a, wq_b, wkv_a, wkv_b, wo, so the 2nd and 4th (wq_b,
// wkv_b) are repeated and the MLP's w1 and w2 (6th and 8th), not w3 (torchtitan activation_checkpoint.py @
// 238fa995 l.98-122; tests/ledger_op_mla_test.cpp prices the same order's kept outputs). Per token at s 4096:
TEST(CostModel, OpPolicyOnMlaFollowsItsMatmulOrder) {
  auto p = preset_problem("deepseek-v3");
  p.training.seq = 4096;
  p.training.attention = attention_kind::flash;
  const double h = 7168, s = 4096, n = 128;
  const double wq_a = 2 * h * 1536, wq_b = 2 * 1536 * n * 192, wkv_a = 2 * h * 576, wkv_b = 2 * 512 * n * 256;
  const double wo = 2 * n * 128 * h, core = 2 * s * n * 192 + 2 * s * n * 128;
  const double attention = wq_a + wq_b + wkv_a + wkv_b + wo + core, attention_again = wq_b + wkv_b;
  const double dense_forward = attention + 3 * 2 * h * 18432, dense_again = attention_again + 2 * 2 * h * 18432;
  const double gate = 2 * 256 * h, experts = 2 * 8 * 3 * h * 2048;
  const double moe_forward = attention + gate + experts + 3 * 2 * h * 2048;
  const double moe_again = attention_again + gate + experts + 2 * 2 * h * 2048;
  const double expected = (3 * dense_again + 58 * moe_again) / (3 * (3 * dense_forward + 58 * moe_forward));
  layout l = make_layout(64, 3, recompute_mode::selective_op);
  EXPECT_NEAR(cost_of(p, count_params(p.model), l, {}).recompute, expected, 1e-12);
}

// The expert-parallel all-to-alls of Qwen3-30B-A3B (48 MoE layers, h 2048, top 8) at seq 4096, micro-batch 1,
// global batch 256 on 16 GPUs of nodes of 8, dp 16 (M = 16): each rank sends its 4096 tokens' 8 rows of
// 2048 bf16 values, 134,217,728 bytes, in each of 4 all-to-alls per layer and micro-batch (dispatch and
// combine, forward and backward): 4 x 134,217,728 x 48 x 16 bytes a step, of which (ep - 1)/ep leave the rank.
// ep 8 stays in a node (NVLink, 900 GB/s); ep 16 sends 8 of its 16 shares over the 50 GB/s NICs.
TEST(CostModel, ExpertAllToAllCrossesNodesPastOneNode) {
  auto p = preset_problem("qwen3-30b-a3b");
  p.training.seq = 4096;
  p.training.micro_batch = 1;
  p.training.global_batch = 256;
  p.training.attention = attention_kind::flash;
  p.device.gpus_per_node = 8;
  const auto pc = count_params(p.model);
  const double step_bytes = 4.0 * 134217728 * 48 * 16;
  layout l = make_layout(16, 1, recompute_mode::none);
  EXPECT_EQ(ep_alltoall_seconds(p, pc, l, {}, 16), 0.0);  // ep 1: no all-to-all
  EXPECT_EQ(cost_of(p, pc, l, {}).ep_comm, 0.0);
  l.ep = 8;
  EXPECT_NEAR(ep_alltoall_seconds(p, pc, l, {}, 16), step_bytes * 7 / 8 / 900e9, 1e-12);
  const auto c8 = cost_of(p, pc, l, {});
  l.ep = 16;
  EXPECT_NEAR(ep_alltoall_seconds(p, pc, l, {}, 16), step_bytes * 8 / 16 / 50e9, 1e-12);
  const auto c16 = cost_of(p, pc, l, {});
  EXPECT_GT(c16.ep_comm, 10 * c8.ep_comm);
  EXPECT_GT(c16.total, c8.total);  // ep 8 and ep 16 no longer cost the same
  EXPECT_NEAR(c16.total - c16.ep_comm, c8.total - c8.ep_comm, 1e-12);
  // A full recompute repeats the forward's dispatch and combine: 6 all-to-alls instead of 4.
  l.recompute = recompute_mode::full;
  EXPECT_NEAR(ep_alltoall_seconds(p, pc, l, {}, 16), 1.5 * step_bytes * 8 / 16 / 50e9, 1e-12);
  // A dense model has no all-to-all whatever ep says.
  auto dense = preset_problem("gpt3-175b");
  EXPECT_EQ(ep_alltoall_seconds(dense, count_params(dense.model), l, {}, 16), 0.0);
}

}  // namespace
}  // namespace headroom
