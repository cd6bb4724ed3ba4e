// ledger_op_moe_test.cpp: torchtitan's per-op selective checkpointing on MoE layers, against counts made by
// hand from the policy at pytorch/torchtitan@99fee810b: torchtitan/distributed/activation_checkpoint.py
// l.92-116 (save list ops kept, every second aten.mm recomputed, the count restarting per checkpointed
// module), the save lists (models/deepseek_v3/infra/parallelize.py l.33-44 and experiments/llama4/infra/
// parallelize.py l.37-48 with all_to_all_single; experiments/qwen3/infra/parallelize.py l.36-46 without),
// config/job_config.py l.542-544 (the router gate's mm forced to recompute, uncounted), models/moe.py
// l.392-468 (gate, grouped mm, shared w1, w3, w2) and the MoE TP plan (llama4/infra/
// parallelize.py l.451-465: input all-gathered, output reduce-scattered, tokens split over tp when etp = 1).
#include <gtest/gtest.h>

#include <map>

#include "planner/ledger.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

// A toy MoE: h 64, 4 heads of 16 (2 kv heads), 8 experts of width 32, top 2, shared experts of width 64.
model_spec ledger_op_moe_toy(bool shared) {
  model_spec m = test::swiglu_model("toy-moe", 2, 64, 4, 2, 16, 128, 100);
  m.moe.experts = 8;
  m.moe.top_k = 2;
  m.moe.expert_ffn = 32;
  m.moe.shared_ffn = shared ? 64 : 0;
  m.moe.layers = {true, true};
  return m;
}

// tp 1, ep 1, s 16, b 2 (32 tokens). Per token, bf16: the block input h = 64; the 1st matmul wq a*d = 64;
// the 3rd wv kv*d = 32; SDPA's output 64 and its fp32 log-sum-exp 4 x 4 heads; the router's gate is forced
// to recompute and not counted (job_config.py l.542-544); the routed experts' grouped mm is not on the list;
// shared w1 5th (kept, Fs = 64), w3 6th (recomputed), w2 7th (kept, h = 64). No all-to-all without expert
// parallelism, no reduce-scatter without tp.
TEST(LedgerOpMoe, ToyLayerKeepsSharedW1AndW2) {
  const std::int64_t per_token = 2 * (64 + 64 + 32 + 64 + 64 + 64) + 4 * 4;
  EXPECT_EQ(per_token, 720);
  const auto ledger = layer_ledger(ledger_op_moe_toy(true), test::op_shape(16, 2, 1, 1, 0), true);
  const auto kept = test::op_kept(ledger);
  EXPECT_EQ(kept.at("moe.shared.w1.output"), 32 * 2 * 64);
  EXPECT_EQ(kept.at("moe.shared.w2.output"), 32 * 2 * 64);
  EXPECT_EQ(kept.count("moe.shared.w3.output") + kept.count("moe.router.gate.output"), 0U);
  EXPECT_EQ(kept.count("moe.router.probs") + kept.count("moe.experts.fc1.output"), 0U);
  EXPECT_EQ(kept.count("moe.dispatch.all_to_all.output"), 0U);
  EXPECT_EQ(sum_ledger(ledger).op, 32 * per_token);
  // Without shared experts the attention's outputs are all: 720 - 2 x 128 per token.
  const auto bare = layer_ledger(ledger_op_moe_toy(false), test::op_shape(16, 2, 1, 1, 0), true);
  EXPECT_EQ(sum_ledger(bare).op, 32 * (per_token - 256));
}

// tp 2 (sequence parallel), ep 2, etp 1, s 16, b 2: s/t = 8 rows per rank outside the tp regions, 16 inside.
// Bytes: block input 8*2*64*2 = 2048; wq 16*2*32*2 = 2048; wv 16*2*16*2 = 1024; SDPA 2048; log-sum-exp
// 4*2*2*16 = 256; wo's reduce-scatter 2048 (wo itself is the 4th matmul); dispatch all-to-all R = k * s/t *
// b * etp = 32 rows x 64 x 2 = 4096, combine the rank's own 32 rows 4096; shared w1 16*2*32*2 = 2048 (the
// all-gathered tokens), w2's partial sum 16*2*64*2 = 4096; the MoE output's reduce-scatter 2048.
TEST(LedgerOpMoe, ExpertAndTensorParallelKeepTheCollectives) {
  const std::int64_t expected = 2048 + 2048 + 1024 + 2048 + 256 + 2048 + 4096 + 4096 + 2048 + 4096 + 2048;
  EXPECT_EQ(expected, 25856);
  const auto ledger = layer_ledger(ledger_op_moe_toy(true), test::op_shape(16, 2, 2, 2, 1), true);
  const auto kept = test::op_kept(ledger);
  EXPECT_EQ(kept.at("moe.dispatch.all_to_all.output"), 4096);
  EXPECT_EQ(kept.at("moe.combine.all_to_all.output"), 4096);
  EXPECT_EQ(kept.at("moe.output.reduce_scatter"), 2048);
  EXPECT_EQ(kept.at("attn.wo.output.reduce_scatter"), 2048);
  EXPECT_EQ(sum_ledger(ledger).op, expected);
  // Expert tp = tp (ExpertTensorParallel): every tp rank dispatches all k * s * b rows: 64 rows each way.
  const auto etp2 =
      test::op_kept(layer_ledger(ledger_op_moe_toy(true), test::op_shape(16, 2, 2, 2, 2), true));
  EXPECT_EQ(etp2.at("moe.dispatch.all_to_all.output"), 64 * 64 * 2);
  EXPECT_EQ(etp2.at("moe.combine.all_to_all.output"), 64 * 64 * 2);
  // Without shared experts the all-to-alls still come after the attention.
  const auto bare =
      test::op_kept(layer_ledger(ledger_op_moe_toy(false), test::op_shape(16, 2, 2, 2, 1), true));
  EXPECT_EQ(bare.at("moe.dispatch.all_to_all.output"), 4096);
}

// A model with q/k norms (Qwen3): its wq output is the q norm's input, already a ledger tensor. The
// all-to-alls stay kept: torchtitan's Qwen3 experiment leaves them off its save list, DeepSeek-V3's and
// Llama 4's keep them, and the planner does not guess which code ran from the model's shape (it over-counts
// Qwen3 by the two outputs, docs/model.md).
TEST(LedgerOpMoe, QkNormModelKeepsItsNormInputAndTheAllToAlls) {
  model_spec m = ledger_op_moe_toy(true);
  m.qk_norm = true;
  const auto ledger = layer_ledger(m, test::op_shape(16, 2, 2, 2, 1), true);
  const auto kept = test::op_kept(ledger);
  EXPECT_EQ(kept.at("moe.dispatch.all_to_all.output"), 4096);
  EXPECT_EQ(kept.at("moe.combine.all_to_all.output"), 4096);
  EXPECT_EQ(kept.count("attn.wq.output"), 0U);
  EXPECT_EQ(kept.at("attn.q_norm.input"), 2048);
  EXPECT_EQ(kept.count("attn.k_norm.input") + kept.count("attn.q_norm.stats"), 0U);  // wk is the 2nd mm
  EXPECT_EQ(sum_ledger(ledger).op, 25856);
}

// DeepSeek-V3 16B's MoE (torchtitan models/deepseek_v3/__init__.py "16B": dim 2048, 64 experts, top 6,
// moe_inter_dim 1408, 2 shared experts) at its train config (deepseek_v3_16b.toml: seq_len 4096,
// local_batch_size 8 @ 99fee810b, 4 @ 238fa995, ep 8, tp 1). Its attention is MLA (q_lora_rank 0: wq, wkv_a,
// wkv_b, wo, four counted matmuls, tests/ledger_op_mla_test.cpp), so shared w1 is the 5th counted matmul and w2
// the 7th, as after a standard 4-matmul attention: a standard-attention stand-in with its widths tests them. Per token, bf16: dispatch
// 6 x 2048, combine 6 x 2048, shared w1 2 x 1408 = 2816, shared w2 2048: 58,880 bytes; x 32,768 tokens.
TEST(LedgerOpMoe, DeepSeekV3_16bMoeKeepsItsFourOutputs) {
  model_spec m = ledger_op_moe_toy(true);
  m.layers = 27;
  m.hidden = 2048;
  m.heads = 16;
  m.kv_heads = 16;
  m.head_dim = 128;
  m.ffn_hidden = 10944;
  m.vocab = 102400;
  m.moe.experts = 64;
  m.moe.top_k = 6;
  m.moe.expert_ffn = 1408;
  m.moe.shared_ffn = 2 * 1408;
  m.moe.layers.assign(27, true);
  m.moe.layers[0] = false;
  const std::int64_t per_token = 2 * (6 * 2048 + 6 * 2048 + 2816 + 2048);
  EXPECT_EQ(per_token, 58880);
  std::int64_t moe_kept = 0;
  for (const auto& [name, bytes] :
       test::op_kept(layer_ledger(m, test::op_shape(4096, 8, 1, 8, 1), true)))
    if (name.rfind("moe.", 0) == 0) moe_kept += bytes;
  EXPECT_EQ(moe_kept, 32768 * per_token);  // 1,840 MiB per MoE layer
}

TEST(LedgerOpMoe, OtherModesAndTheWorkingSetAreUnchanged) {
  auto s = test::op_shape(16, 2, 2, 2, 1);
  const auto with = sum_ledger(layer_ledger(ledger_op_moe_toy(true), s, true));
  s.op_policy = false;
  const auto without = sum_ledger(layer_ledger(ledger_op_moe_toy(true), s, true));
  EXPECT_EQ(with.none, without.none);
  EXPECT_EQ(with.selective, without.selective);
  EXPECT_EQ(with.full, without.full);
  s.op_policy = true;
  bool experts_recomputed = false;
  for (const auto& e :
       backward_working_set(ledger_op_moe_toy(true), s, recompute_mode::selective_op, 0, true)) {
    EXPECT_NE(e.role, act_role::op_output) << e.name;
    experts_recomputed |= e.name == "recomputed.moe.experts.fc1.output";  // the grouped mm is not on the list
  }
  EXPECT_TRUE(experts_recomputed);
}

}  // namespace
}  // namespace headroom
