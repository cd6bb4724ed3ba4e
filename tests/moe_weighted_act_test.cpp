// moe_weighted_act_test.cpp: the routed experts' probability-weighted activation, against counts made by
// hand from Megatron-Core @ d98e8a64: TEGroupedMLP's bias_act_func (megatron/core/transformer/moe/
// experts.py l.1012-1016) and SequentialMLP's experts (megatron/core/transformer/mlp.py l.336-340) compute
// act(fc1) * probs, and autograd's mul keeps act(fc1) for the probabilities' gradient: one more R x F/etp
// bf16 tensor per MoE layer for a non-gated MLP. SwiGLU runs the fused weighted_bias_swiglu_impl, which
// keeps fc1's output and the probabilities only, so a SwiGLU layer and a dense layer are unchanged.
#include <gtest/gtest.h>

#include <map>

#include "planner/ledger.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

// A toy MoE: h 64, 4 heads of 16, 8 experts of width 32, top 2; `mlp` the experts' (and dense layers') kind.
model_spec weighted_act_toy(mlp_kind mlp) {
  model_spec m = test::swiglu_model("toy-moe", 2, 64, 4, 4, 16, 128, 100);
  m.mlp = mlp;
  m.moe.experts = 8;
  m.moe.top_k = 2;
  m.moe.expert_ffn = 32;
  m.moe.layers = {true, true};
  return m;
}

// s 16, b 2, tp 2 with sequence parallelism, etp 1: R = k * s/t * b * etp = 2 * 8 * 2 = 32 routed rows.
// bf16: fc1's input 32 x 64 x 2 = 4096, fc1's output 32 x 32 x 2 = 2048, the weighted multiply's kept
// activation 2048, fc2's input 2048, the unpermute's input 32 x 64 x 2 = 4096.
TEST(MoeWeightedAct, GeluExpertsKeepTheActivationTheProbabilitiesMultiply) {
  ledger_shape s(16, 2, 2, true, 1, attention_kind::flash, 2);
  s.etp = 1;
  const auto e = test::bytes_by_name(layer_ledger(weighted_act_toy(mlp_kind::gelu), s, true));
  EXPECT_EQ(e.at("moe.experts.fc1.input"), 4096);
  EXPECT_EQ(e.at("moe.experts.fc1.output"), 2048);
  EXPECT_EQ(e.at("moe.experts.act.weighted"), 2048);
  EXPECT_EQ(e.at("moe.experts.act.output"), 2048);
  EXPECT_EQ(e.at("moe.unpermute.input"), 4096);
  // Expert tensor parallelism 2: twice the rows (etp ranks see the same tokens), half the width each.
  s.etp = 2;
  EXPECT_EQ(test::bytes_by_name(layer_ledger(weighted_act_toy(mlp_kind::gelu), s, true))
                .at("moe.experts.act.weighted"),
            2 * 64 * 16);
}

// moe_act recomputation (Megatron's CheckpointWithoutOutput around bias_act_func) drops both tensors the
// activation function makes: the weighted multiply's kept operand and fc2's input, 2 x 2048 bytes; a SwiGLU
// layer drops fc2's input alone (32 rows x 32 x 2 = 2048).
TEST(MoeWeightedAct, MoeActRecomputeDropsIt) {
  ledger_shape s(16, 2, 2, true, 1, attention_kind::flash, 2);
  s.etp = 1;
  auto dropped = [&](mlp_kind k) {
    const auto ledger = layer_ledger(weighted_act_toy(k), s, true);
    return sum_ledger(ledger, 0).selective -
           sum_ledger(ledger, module_bit(recompute_module::moe_act)).selective;
  };
  EXPECT_EQ(dropped(mlp_kind::gelu), 2 * 2048);
  EXPECT_EQ(dropped(mlp_kind::swiglu), 2048);
  // Full recomputation keeps the layer's input alone, with or without it: s/t * b * h * 2 = 2048.
  EXPECT_EQ(sum_ledger(layer_ledger(weighted_act_toy(mlp_kind::gelu), s, true)).full, 8 * 2 * 64 * 2);
}

// The fused SwiGLU path and the dense MLP have no such tensor.
TEST(MoeWeightedAct, SwigluAndDenseLayersAreUnchanged) {
  ledger_shape s(16, 2, 1, false, 1, attention_kind::flash, 2);
  EXPECT_EQ(test::bytes_by_name(layer_ledger(weighted_act_toy(mlp_kind::swiglu), s, true))
                .count("moe.experts.act.weighted"),
            0U);
  EXPECT_EQ(test::bytes_by_name(layer_ledger(weighted_act_toy(mlp_kind::gelu), s, false))
                .count("moe.experts.act.weighted"),
            0U);
}

// The Megatron functional test gpt3_moe_mcore_te_ep8_resume_torch_dist_dist_optimizer (s 1024, b 4, tp 1,
// ep 8, top 2, --moe-ffn-hidden-size 1024, GeLU): R = 2 * 1024 * 4 = 8192 rows, 16 MiB per MoE layer, 192
// MiB over its 12 layers; the per-layer sum without recomputation grows by exactly that.
TEST(MoeWeightedAct, FunctionalTestEp8LayerByHand) {
  model_spec m = weighted_act_toy(mlp_kind::gelu);
  m.hidden = 512;
  m.heads = 8;
  m.kv_heads = 8;
  m.head_dim = 64;
  m.ffn_hidden = 2048;
  m.moe.expert_ffn = 1024;
  ledger_shape s(1024, 4, 1, false, 1, attention_kind::flash, 2);
  s.ep = 8;
  const auto gelu = layer_ledger(m, s, true);
  EXPECT_EQ(test::bytes_by_name(gelu).at("moe.experts.act.weighted"), 16 * 1024 * 1024);
  std::int64_t without = 0;
  for (const auto& e : gelu)
    if (e.name != "moe.experts.act.weighted") without += e.bytes;
  EXPECT_EQ(sum_ledger(gelu).none - without, 16 * 1024 * 1024);
}

}  // namespace
}  // namespace headroom
