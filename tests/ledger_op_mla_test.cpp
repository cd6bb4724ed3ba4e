// ledger_op_mla_test.cpp: torchtitan's per-op selective checkpointing (recompute_mode::selective_op) on
// multi-latent attention and under flex attention, against counts made by hand from the policy at
// pytorch/torchtitan@238fa9953e4aec2a62582121564273d7cbb1e9f1:
// - torchtitan/distributed/activation_checkpoint.py l.98-122: an op on the save list is kept except every
//   even-numbered aten.mm, the count restarting per block (l.126-128); the router gate's mm is forced to
//   recompute and not counted (l.110-113; job_config.py l.661-663);
// - models/deepseek_v3/infra/parallelize.py l.33-48, the save list: aten.mm, the SDPA kernels (cuDNN,
//   efficient, flash), reduce_scatter_tensor, all_to_all_single, max, flex_attention, inductor_compiled_code;
// - models/deepseek_v3/model/model.py l.250-323, the MLA forward: wq (q_lora_rank = 0) or wq_a, wq_b, then
//   wkv_a, wkv_b, the core, wo; models/moe/moe.py l.490, 524, 529: router, routed experts, shared experts;
// - parallelize.py l.259-293, the TP plan: the attention's input all-gathered; wq, wq_b, wkv_b column-parallel;
//   wq_a, wkv_a NoParallel (every token of the rank); wo row-parallel, reduce-scattered to Shard(1);
// - models/attention.py l.115-124: flex_attention compiled as an inductor_compiled_code region, whose cached
//   outputs include its saved inputs q, k, v.
// Every figure below is written out term by term from the formula in section 2 of the research report, in
// bytes per token of one rank's local sequence, bf16 unless said (the log-sum-exp is fp32).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "planner/estimate.hpp"
#include "planner/ledger.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

// DeepSeek-V3 16B as torchtitan's flavor "16B" builds it (models/deepseek_v3/__init__.py l.78-102 @238fa995):
// dim 2048, 16 heads, q_lora_rank 0, kv_lora_rank 512, nope 128, rope 64, v 128; 64 experts, top 6,
// moe_inter_dim 1408, 2 shared experts (2816), inter_dim 10944, 27 layers, the first one dense.
model_spec ledger_op_mla_16b() {
  model_spec m = test::swiglu_model("deepseek-v3-16b", 27, 2048, 16, 16, 128, 10944, 102400);
  m.mla.q_lora_rank = 0;
  m.mla.kv_lora_rank = 512;
  m.mla.qk_nope_head_dim = 128;
  m.mla.qk_rope_head_dim = 64;
  m.mla.v_head_dim = 128;
  m.moe.experts = 64;
  m.moe.top_k = 6;
  m.moe.expert_ffn = 1408;
  m.moe.shared_ffn = 2 * 1408;
  m.moe.layers.assign(27, true);
  m.moe.layers[0] = false;
  return m;
}

// DeepSeek-V3 671B's shape (flavor "671B"): dim 7168, 128 heads, q_lora_rank 1536, kv_lora_rank 512, nope 128,
// rope 64, v 128; 256 experts, top 8, moe_inter_dim 2048, 1 shared expert (2048), inter_dim 18432; 61 layers,
// the first 3 dense.
model_spec ledger_op_mla_671b() {
  model_spec m = ledger_op_mla_16b();
  m.name = "deepseek-v3-671b";
  m.layers = 61;
  m.hidden = 7168;
  m.heads = 128;
  m.kv_heads = 128;
  m.head_dim = 56;
  m.ffn_hidden = 18432;
  m.vocab = 129280;
  m.mla.q_lora_rank = 1536;
  m.moe.experts = 256;
  m.moe.top_k = 8;
  m.moe.expert_ffn = 2048;
  m.moe.shared_ffn = 2048;
  m.moe.layers.assign(61, true);
  for (int i = 0; i < 3; ++i) m.moe.layers[static_cast<std::size_t>(i)] = false;
  return m;
}

// The 16B's job file: seq 4096, local batch 8 (32,768 tokens), tp 1, ep 8. mm order: wq #1 kept, wkv_a #2, wkv_b
// #3 kept, [core], wo #4; the router gate forced and uncounted; shared w1 #5 kept, w3 #6, w2 #7 kept.
// Attention part per token: block input 2h = 4096, wq 2*16*(128+64) = 6144, wkv_b 2*16*(128+128) = 8192, the
// core's output 2*16*128 = 4096, its fp32 log-sum-exp 4*16 = 64: 22,592. MoE part (tests/ledger_op_moe_test.cpp's
// figure): dispatch 2*6*2048 = 24,576, combine 24,576, shared w1 2*2816 = 5,632, shared w2 2*2048 = 4,096: 58,880.
TEST(LedgerOpMla, DeepSeekV3_16bMoeLayerUnderSdpa) {
  const std::int64_t tokens = 4096 * 8;
  const std::int64_t attention =
      2 * 2048 + 2 * 16 * (128 + 64) + 2 * 16 * (128 + 128) + 2 * 16 * 128 + 4 * 16;
  const std::int64_t moe = 2 * 6 * 2048 + 2 * 6 * 2048 + 2 * 2816 + 2 * 2048;
  EXPECT_EQ(attention, 22592);
  EXPECT_EQ(moe, 58880);
  EXPECT_EQ(attention + moe, 81472);
  const auto ledger =
      layer_ledger(ledger_op_mla_16b(), test::op_shape(4096, 8, 1, 8, 1, attention_kind::flash), true);
  const auto kept = test::op_kept(ledger);
  EXPECT_EQ(kept.at("ln1.input"), tokens * 4096);
  EXPECT_EQ(kept.at("attn.wq.output"), tokens * 6144);
  EXPECT_EQ(kept.at("attn.wkv_b.output"), tokens * 8192);
  EXPECT_EQ(kept.at("attn.sdpa.output"), tokens * 4096);
  EXPECT_EQ(kept.at("attn.flash.logsumexp"), tokens * 64);
  EXPECT_EQ(kept.at("moe.shared.w1.output"), tokens * 5632);
  EXPECT_EQ(kept.at("moe.shared.w2.output"), tokens * 4096);
  // Recomputed: wkv_a (#2), wo (#4), shared w3 (#6); the Megatron-shaped latents and q, k, v under SDPA.
  for (const char* name :
       {"attn.wkv_a.output", "attn.wo.output", "moe.shared.w3.output", "attn.kv_down.output",
        "attn.kv_norm.output", "attn.q", "attn.k", "attn.v", "attn.proj.input"})
    EXPECT_EQ(kept.count(name), 0U) << name;
  EXPECT_EQ(sum_ledger(ledger).op, tokens * 81472);  // 2,546 MiB per MoE layer
  // The dense first layer: w1 #5 kept (the SwiGLU gate, 2*10944), w3 #6 recomputed, w2 #7 kept (2h).
  const std::int64_t dense = attention + 2 * 10944 + 2 * 2048;
  EXPECT_EQ(dense, 48576);
  const auto dense_kept = test::op_kept(
      layer_ledger(ledger_op_mla_16b(), test::op_shape(4096, 8, 1, 8, 1, attention_kind::flash)));
  EXPECT_EQ(dense_kept.at("mlp.gate"), tokens * 2 * 10944);
  EXPECT_EQ(dense_kept.at("mlp.w2.output"), tokens * 2 * 2048);
  EXPECT_EQ(dense_kept.count("mlp.up"), 0U);
  EXPECT_EQ(
      sum_ledger(layer_ledger(ledger_op_mla_16b(), test::op_shape(4096, 8, 1, 8, 1, attention_kind::flash)))
          .op,
      tokens * 48576);
}

// Flex (the 16B flavor's attn_type): the compiled region also keeps q and k (the cat outputs, 2*16*192 each);
// v is a view of wkv_b's output, kept already as mm #3: nothing more. 22,592 + 6,144 + 6,144 = 34,880.
TEST(LedgerOpMla, DeepSeekV3_16bUnderFlexKeepsQAndK) {
  const std::int64_t tokens = 4096 * 8;
  const std::int64_t attention = 2 * 2048 + 2 * 16 * (128 + 64) + 2 * 16 * (128 + 128) + 2 * 16 * 128 +
                                 4 * 16 + 2 * 16 * 192 + 2 * 16 * 192;
  EXPECT_EQ(attention, 34880);
  EXPECT_EQ(attention + 58880, 93760);
  const auto ledger =
      layer_ledger(ledger_op_mla_16b(), test::op_shape(4096, 8, 1, 8, 1, attention_kind::flex), true);
  const auto kept = test::op_kept(ledger);
  EXPECT_EQ(kept.at("attn.q"), tokens * 6144);
  EXPECT_EQ(kept.at("attn.k"), tokens * 6144);
  EXPECT_EQ(kept.at("attn.flex.output"), tokens * 4096);
  EXPECT_EQ(kept.at("attn.wkv_b.output"), tokens * 8192);
  EXPECT_EQ(kept.count("attn.sdpa.output") + kept.count("attn.v"), 0U);
  EXPECT_EQ(sum_ledger(ledger).op, tokens * 93760);  // 2,930 MiB per MoE layer
  EXPECT_EQ(
      sum_ledger(layer_ledger(ledger_op_mla_16b(), test::op_shape(4096, 8, 1, 8, 1, attention_kind::flex)))
          .op,
      tokens * (34880 + 2 * 10944 + 2 * 2048));  // 60,864
  // The kept q and k are not recomputed in backward; under SDPA they are.
  auto recomputed = [](attention_kind a, const char* name) {
    for (const auto& e : backward_working_set(ledger_op_mla_16b(), test::op_shape(64, 1, 1, 8, 1, a),
                                              recompute_mode::selective_op, 0, true)) {
      EXPECT_NE(e.role, act_role::op_output) << e.name;
      if (e.name == std::string("recomputed.") + name) return true;
    }
    return false;
  };
  EXPECT_FALSE(recomputed(attention_kind::flex, "attn.q"));
  EXPECT_TRUE(recomputed(attention_kind::flash, "attn.q"));
  EXPECT_TRUE(recomputed(attention_kind::flex, "attn.kv_down.output"));
}

// q_lora_rank > 0 (671B's shape), tp 1, ep 1 (no all-to-all), s 64, b 1. mm order: wq_a #1 kept, wq_b #2, wkv_a
// #3 kept, wkv_b #4, [core], wo #5 kept; then the MoE's shared w1 #6, w3 #7 kept, w2 #8; a dense MLP's w1 #6,
// w3 #7 kept (the SwiGLU up), w2 #8. Per token:
//   block input 2h = 2*7168 = 14,336; wq_a 2*q_lora = 2*1536 = 3,072 (NoParallel: every token);
//   wkv_a 2*(kv_lora+rope) = 2*576 = 1,152; wo 2h = 14,336 (its partial sum); core 2*n*dv = 2*128*128 = 32,768;
//   log-sum-exp 4n = 512: 66,176; the MoE keeps shared w3, 2*2048 = 4,096; a dense MLP w3, 2*18432 = 36,864.
TEST(LedgerOpMla, QLoraFlipsTheMlpParity) {
  const std::int64_t tokens = 64;
  const std::int64_t attention = 2 * 7168 + 2 * 1536 + 2 * (512 + 64) + 2 * 7168 + 2 * 128 * 128 + 4 * 128;
  EXPECT_EQ(attention, 66176);
  const auto ledger =
      layer_ledger(ledger_op_mla_671b(), test::op_shape(64, 1, 1, 1, 1, attention_kind::flash), true);
  const auto kept = test::op_kept(ledger);
  EXPECT_EQ(kept.at("attn.wq_a.output"), tokens * 3072);
  EXPECT_EQ(kept.at("attn.wkv_a.output"), tokens * 1152);
  EXPECT_EQ(kept.at("attn.wo.output"), tokens * 14336);
  EXPECT_EQ(kept.at("attn.sdpa.output"), tokens * 32768);
  EXPECT_EQ(kept.at("moe.shared.w3.output"), tokens * 4096);
  for (const char* name :
       {"attn.wq_b.output", "attn.wkv_b.output", "moe.shared.w1.output", "moe.shared.w2.output",
        "attn.q_down.output", "attn.q_norm.output", "moe.dispatch.all_to_all.output"})
    EXPECT_EQ(kept.count(name), 0U) << name;
  EXPECT_EQ(sum_ledger(ledger).op, tokens * (attention + 2 * 2048));  // 70,272
  const auto dense =
      layer_ledger(ledger_op_mla_671b(), test::op_shape(64, 1, 1, 1, 1, attention_kind::flash));
  const auto dense_kept = test::op_kept(dense);
  EXPECT_EQ(dense_kept.at("mlp.up"), tokens * 2 * 18432);
  EXPECT_EQ(dense_kept.count("mlp.gate") + dense_kept.count("mlp.w2.output"), 0U);
  EXPECT_EQ(sum_ledger(dense).op, tokens * (attention + 2 * 18432));  // 103,040
  // With ep 8 the two all-to-alls come back: 2*8*7168 bytes each way per token.
  EXPECT_EQ(sum_ledger(layer_ledger(ledger_op_mla_671b(),
                                    test::op_shape(64, 1, 1, 8, 1, attention_kind::flash), true))
                .op,
            tokens * (attention + 2 * 8 * 7168 + 2 * 8 * 7168 + 2 * 2048));
  // Flex: q and k, 2*128*192 each, and v's base, wkv_b's whole output 2*128*(128+128) (mm #4, not kept
  // otherwise): 66,176 + 49,152 + 49,152 + 65,536 = 230,016.
  const std::int64_t flex = attention + 2 * 128 * 192 + 2 * 128 * 192 + 2 * 128 * (128 + 128);
  EXPECT_EQ(flex, 230016);
  const auto flexed =
      layer_ledger(ledger_op_mla_671b(), test::op_shape(64, 1, 1, 1, 1, attention_kind::flex), true);
  EXPECT_EQ(test::op_kept(flexed).at("attn.wkv_b.output"), tokens * 65536);
  EXPECT_EQ(sum_ledger(flexed).op, tokens * (flex + 2 * 2048));
}

// tp 2 with sequence parallelism, ep 2, etp 1, s 64, b 1: 32 rows per rank outside the tp regions, 64 inside.
// 671B's shape, in bytes for the rank (not per token):
//   block input 32*7168*2; wq_a 64*1536*2 and wkv_a 64*576*2 (NoParallel: not split); wo's partial sum
//   64*7168*2 and its reduce-scatter 32*7168*2; core 64*(128/2)*128*2; log-sum-exp 64*(128/2)*4;
//   dispatch R = k * s/t * b * etp = 8*32 rows x 7168 x 2, combine the same; shared w3 64*(2048/2)*2; the MoE
//   output's reduce-scatter 32*7168*2.
TEST(LedgerOpMla, TensorParallelDividesTheColumnParallelOutputsOnly) {
  const std::int64_t q_lora_attention = 32 * 7168 * 2 + 64 * 1536 * 2 + 64 * 576 * 2 + 64 * 7168 * 2 +
                                        32 * 7168 * 2 + 64 * 64 * 128 * 2 + 64 * 64 * 4;
  const std::int64_t q_lora_moe = 8 * 32 * 7168 * 2 + 8 * 32 * 7168 * 2 + 64 * 1024 * 2 + 32 * 7168 * 2;
  const auto ledger =
      layer_ledger(ledger_op_mla_671b(), test::op_shape(64, 1, 2, 2, 1, attention_kind::flash), true);
  const auto kept = test::op_kept(ledger);
  EXPECT_EQ(kept.at("attn.wq_a.output"), 64 * 1536 * 2);
  EXPECT_EQ(kept.at("attn.wkv_a.output"), 64 * 576 * 2);
  EXPECT_EQ(kept.at("attn.wo.output"), 64 * 7168 * 2);
  EXPECT_EQ(kept.at("attn.wo.output.reduce_scatter"), 32 * 7168 * 2);
  EXPECT_EQ(kept.at("moe.output.reduce_scatter"), 32 * 7168 * 2);
  EXPECT_EQ(kept.at("moe.shared.w3.output"), 64 * 1024 * 2);
  EXPECT_EQ(sum_ledger(ledger).op, q_lora_attention + q_lora_moe);
  // Flex at tp 2: q and k 64*64*192*2 each, wkv_b's output 64*64*256*2.
  EXPECT_EQ(sum_ledger(layer_ledger(ledger_op_mla_671b(),
                                    test::op_shape(64, 1, 2, 2, 1, attention_kind::flex), true))
                .op,
            q_lora_attention + q_lora_moe + 64 * 64 * 192 * 2 * 2 + 64 * 64 * 256 * 2);
  // q_lora_rank = 0 (the 16B) at tp 2, ep 2: block input 32*2048*2; wq 64*8*192*2; wkv_b 64*8*256*2; core
  // 64*8*128*2; log-sum-exp 64*8*4; wo's reduce-scatter 32*2048*2 (wo itself, #4, recomputed); dispatch and
  // combine 6*32 rows x 2048 x 2 each; shared w1 64*1408*2, w2's partial sum 64*2048*2; the MoE's reduce-scatter
  // 32*2048*2.
  const std::int64_t sixteen = 32 * 2048 * 2 + 64 * 8 * 192 * 2 + 64 * 8 * 256 * 2 + 64 * 8 * 128 * 2 +
                               64 * 8 * 4 + 32 * 2048 * 2 + 6 * 32 * 2048 * 2 * 2 + 64 * 1408 * 2 +
                               64 * 2048 * 2 + 32 * 2048 * 2;
  const auto small =
      layer_ledger(ledger_op_mla_16b(), test::op_shape(64, 1, 2, 2, 1, attention_kind::flash), true);
  EXPECT_EQ(test::op_kept(small).count("attn.wo.output"), 0U);
  EXPECT_EQ(sum_ledger(small).op, sixteen);
}

// Standard attention under flex: q (a*d/t) and k (kv*d/t) kept besides SDPA's set; v is wv's output, the 3rd mm,
// kept already. A toy: h 64, 4 heads of 16, 2 kv heads, SwiGLU f 128, tp 1, s 16, b 2 (32 tokens). Per token: block
// input 2*64, wq 2*64, wv 2*32, core 2*64, log-sum-exp 4*4, w1 (gate) 2*128, w2 2*64; flex adds q 2*64, k 2*32.
TEST(LedgerOpMla, StandardAttentionUnderFlexAddsQAndK) {
  model_spec m = test::swiglu_model("toy", 2, 64, 4, 2, 16, 128, 100);
  const std::int64_t sdpa = 2 * 64 + 2 * 64 + 2 * 32 + 2 * 64 + 4 * 4 + 2 * 128 + 2 * 64;
  EXPECT_EQ(sdpa, 848);
  EXPECT_EQ(sum_ledger(layer_ledger(m, test::op_shape(16, 2, 1, 1, 1, attention_kind::flash))).op,
            32 * sdpa);
  const auto flexed = layer_ledger(m, test::op_shape(16, 2, 1, 1, 1, attention_kind::flex));
  EXPECT_EQ(sum_ledger(flexed).op, 32 * (sdpa + 2 * 64 + 2 * 32));
  const auto kept = test::op_kept(flexed);
  EXPECT_EQ(kept.at("attn.q"), 32 * 2 * 64);
  EXPECT_EQ(kept.at("attn.k"), 32 * 2 * 32);
  EXPECT_EQ(kept.at("attn.wv.output"), 32 * 2 * 32);
  EXPECT_EQ(kept.count("attn.v"), 0U);
}

TEST(LedgerOpMla, OtherModesAreUnchanged) {
  for (auto a : {attention_kind::flash, attention_kind::flex}) {
    auto s = test::op_shape(64, 1, 2, 2, 1, a);
    const auto with = sum_ledger(layer_ledger(ledger_op_mla_671b(), s, true));
    s.op_policy = false;
    const auto without = sum_ledger(layer_ledger(ledger_op_mla_671b(), s, true));
    EXPECT_EQ(with.none, without.none);
    EXPECT_EQ(with.selective, without.selective);
    EXPECT_EQ(with.full, without.full);
  }
}

// The plan prices it: multi-latent attention under selective-op, SDPA (flash) or flex; eager stays refused. The
// deepseek-v3 preset (671B) at s 4096, b 1, tp 1, ep 1, per token: SDPA's attention part 66,176 (above); a dense
// layer adds w3's 2*18432, a MoE layer shared w3's 2*2048; flex adds 49,152 + 49,152 + 65,536 to the attention.
TEST(LedgerOpMla, PlanPricesMlaUnderSdpaAndFlex) {
  problem p = test::preset_problem("deepseek-v3");
  p.training.seq = 4096;
  p.training.micro_batch = 1;
  p.training.global_batch = 64;
  const layout l = test::make_layout(64, 3, recompute_mode::selective_op);
  for (auto a : {attention_kind::flash, attention_kind::flex}) {
    p.training.attention = a;
    EXPECT_EQ(test::bad_input_of([&] { estimate(p, l); }), "") << to_string(a);
    const auto b = estimate(p, l);
    const std::int64_t attention = a == attention_kind::flash ? 66176 : 66176 + 49152 + 49152 + 65536;
    EXPECT_EQ(b.basis.per_layer.op, 4096 * (attention + 2 * 18432)) << to_string(a);
    EXPECT_EQ(b.basis.peaks.moe_layer.op, 4096 * (attention + 2 * 2048)) << to_string(a);
  }
  p.training.attention = attention_kind::eager;
  EXPECT_NE(test::bad_input_of([&] { estimate(p, l); }).find("eager attention"), std::string::npos);
}

}  // namespace
}  // namespace headroom
