// megatron_unfused_test.cpp: Megatron's fusion-off flags (megatron_args.cpp read_fusions, megatron_flags.cpp)
// and the ledger's entries for the unfused paths they select (ledger.cpp; docs/model.md, "Megatron's unfused
// paths"). The bytes are checked against closed forms worked here from Megatron-LM@d98e8a64's code, the same
// sets tests/megatron_unfused_saved_test.py measures with PyTorch's autograd: RoPE keeps cos_ and sin_ (s x rotary
// dim) for q and k; glu() keeps silu(gate) and up + offset (and the experts' weighted product); the softmax in
// PyTorch in fp32 keeps fp32 probabilities (and their bf16 copy without dropout) and its own s x s causal mask.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "planner/imports/megatron_args.hpp"
#include "planner/ledger.hpp"

using namespace headroom;

namespace unfused_test {

const std::string uf_base =
    "--num-layers 2 --hidden-size 256 --num-attention-heads 4 --seq-length 512 --max-position-embeddings 512 "
    "--micro-batch-size 2 --vocab-size 1000 --bf16 ";

bool uf_listed(const std::vector<std::string>& v, const std::string& prefix) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.starts_with(prefix); });
}

std::uint32_t uf_bits(const launch_import& l) {
  return l.model ? l.model->unfused : 0xffffffffu;
}

// A dense model with rotary positions and no dropout, h 256, 4 heads of 64, ffn 512.
model_spec uf_dense(mlp_kind mlp, bool dropout = false) {
  model_spec m;
  m.layers = 2, m.hidden = 256, m.heads = 4, m.kv_heads = 4, m.head_dim = 64, m.ffn_hidden = 512;
  m.vocab = 1000, m.seq = 512, m.max_positions = 512;
  m.mlp = mlp, m.norm = norm_kind::rmsnorm, m.position = position_kind::rotary, m.dropout = dropout;
  return m;
}

// Returns the layer's bytes with the unfused path `p` minus without it.
std::int64_t uf_extra(model_spec m, const ledger_shape& s, unfused_path p, bool moe = false) {
  m.unfused = 0;
  const std::int64_t fused = total_bytes(layer_ledger(m, s, moe));
  m.unfused = unfused_bit(p);
  return total_bytes(layer_ledger(m, s, moe)) - fused;
}

}  // namespace unfused_test

using namespace unfused_test;

TEST(MegatronUnfused, ReadsEachPricedFlag) {
  auto l = import_megatron_args(uf_base + "--position-embedding-type rope --no-rope-fusion", "test");
  EXPECT_EQ(uf_bits(l), unfused_bit(unfused_path::rope));
  l = import_megatron_args(uf_base + "--swiglu --no-bias-swiglu-fusion", "test");
  EXPECT_EQ(uf_bits(l), unfused_bit(unfused_path::swiglu));
  // Megatron's own attention core (--transformer-impl local), bf16, fp32 softmax: by the flag or by
  // --apply-query-key-layer-scaling (arguments.py l.1714-1715); the mask only without the dataloader's.
  const std::string local = uf_base + "--transformer-impl local --no-masked-softmax-fusion ";
  l = import_megatron_args(local + "--attention-softmax-in-fp32", "test");
  EXPECT_EQ(uf_bits(l), unfused_bit(unfused_path::softmax_fp32));
  l = import_megatron_args(local + "--apply-query-key-layer-scaling --no-create-attention-mask-in-dataloader",
                           "test");
  EXPECT_EQ(uf_bits(l), unfused_bit(unfused_path::softmax_fp32) | unfused_bit(unfused_path::softmax_mask));
  EXPECT_TRUE(l.unmodelled.empty() || !uf_listed(l.unmodelled, "--apply-query-key-layer-scaling"));
  // The torch softmax in bf16 keeps what the fused kernel keeps: nothing priced, the fp32 flag absent.
  l = import_megatron_args(local, "test");
  EXPECT_EQ(uf_bits(l), 0u);
}

TEST(MegatronUnfused, FlagsWithoutEffectAreUnused) {
  // TransformerEngine's attention reads neither softmax flag (transformer_engine.py passes neither).
  auto l = import_megatron_args(
      uf_base +
          "--transformer-impl transformer_engine --attention-backend unfused --no-masked-softmax-fusion "
          "--attention-softmax-in-fp32",
      "test");
  EXPECT_EQ(uf_bits(l), 0u);
  EXPECT_TRUE(uf_listed(l.unused, "--no-masked-softmax-fusion"));
  EXPECT_TRUE(uf_listed(l.unused, "--attention-softmax-in-fp32"));
  // No rotary embedding, a GeLU MLP: nothing to unfuse. GeLU and bias-dropout-add keep the same tensors.
  l = import_megatron_args(
      uf_base + "--no-rope-fusion --no-bias-swiglu-fusion --no-bias-gelu-fusion --no-bias-dropout-fusion",
      "test");
  EXPECT_EQ(uf_bits(l), 0u);
  for (const char* f :
       {"--no-rope-fusion", "--no-bias-swiglu-fusion", "--no-bias-gelu-fusion", "--no-bias-dropout-fusion"})
    EXPECT_TRUE(uf_listed(l.unused, f)) << f;
  // Unfused wgrads hold no more than the fused default's cached dummies (megatron_flags.cpp): listed, unpriced.
  l = import_megatron_args(uf_base + "--no-gradient-accumulation-fusion", "test");
  EXPECT_TRUE(uf_listed(l.unused, "--no-gradient-accumulation-fusion"));
  EXPECT_FALSE(uf_listed(l.unmodelled, "--no-gradient-accumulation-fusion"));
  // A rotary part narrower than head_dim: priced over head_dim, and said so.
  l = import_megatron_args(uf_base + "--position-embedding-type rope --rotary-percent 0.5 --no-rope-fusion",
                           "test");
  EXPECT_TRUE(uf_listed(l.unmodelled, "--no-rope-fusion: "));
  // Without a model in the launch the path cannot reach --preset's model: refused unless allowed.
  l = import_megatron_args("--micro-batch-size 2 --no-rope-fusion", "test");
  EXPECT_TRUE(uf_listed(l.unmodelled, "--no-rope-fusion: "));
}

TEST(MegatronUnfused, RopeKeepsCosAndSinForQAndK) {
  // s = 512, head_dim 64 (all rotary): 4 tensors of s x 64 in bf16 per layer, whatever b, tp or the heads.
  const model_spec m = uf_dense(mlp_kind::gelu);
  EXPECT_EQ(uf_extra(m, ledger_shape(512, 2, 1, false, 1, attention_kind::flash, 2), unfused_path::rope),
            4 * 512 * 64 * 2);
  EXPECT_EQ(uf_extra(m, ledger_shape(512, 8, 2, true, 1, attention_kind::flash, 2), unfused_path::rope),
            4 * 512 * 64 * 2);
  // Context parallelism: this rank's s / cp positions.
  EXPECT_EQ(uf_extra(m, ledger_shape(512, 2, 1, false, 2, attention_kind::flash, 2), unfused_path::rope),
            4 * 256 * 64 * 2);
  // Learned positions have no rotary embedding.
  model_spec learned = m;
  learned.position = position_kind::learned;
  EXPECT_EQ(
      uf_extra(learned, ledger_shape(512, 2, 1, false, 1, attention_kind::flash, 2), unfused_path::rope), 0);
  // Under full recomputation the layer keeps its input only.
  model_spec u = m;
  u.unfused = unfused_bit(unfused_path::rope);
  const ledger_shape s(512, 2, 1, false, 1, attention_kind::flash, 2);
  EXPECT_EQ(sum_ledger(layer_ledger(u, s)).full, sum_ledger(layer_ledger(m, s)).full);
}

TEST(MegatronUnfused, MlaRopeIsTheRotaryPartAndRecomputedWithTheUpProjection) {
  model_spec m = uf_dense(mlp_kind::swiglu);
  m.mla.q_lora_rank = 64, m.mla.kv_lora_rank = 32, m.mla.qk_nope_head_dim = 16, m.mla.qk_rope_head_dim = 8,
  m.mla.v_head_dim = 16;
  const ledger_shape s(512, 2, 1, false, 1, attention_kind::flash, 2);
  EXPECT_EQ(uf_extra(m, s, unfused_path::rope), 4 * 512 * 8 * 2);
  model_spec u = m;
  u.unfused = unfused_bit(unfused_path::rope);
  const std::uint32_t up = module_bit(recompute_module::mla_up_proj);
  EXPECT_EQ(sum_ledger(layer_ledger(u, s), up).selective, sum_ledger(layer_ledger(m, s), up).selective);
}

TEST(MegatronUnfused, SwigluKeepsSiluAndUpPlusOffset) {
  // Dense: s*b*f/t twice (f = 512, tp 2: 256 per rank), b = 2, s = 512, bf16.
  const model_spec m = uf_dense(mlp_kind::swiglu);
  EXPECT_EQ(uf_extra(m, ledger_shape(512, 2, 2, true, 1, attention_kind::flash, 2), unfused_path::swiglu),
            2 * (512 * 2 * 256) * 2);
  // Recomputing the MLP drops them with the rest of it.
  model_spec u = m;
  u.unfused = unfused_bit(unfused_path::swiglu);
  const ledger_shape s(512, 2, 1, false, 1, attention_kind::flash, 2);
  const std::uint32_t mlp = module_bit(recompute_module::mlp);
  EXPECT_EQ(sum_ledger(layer_ledger(u, s), mlp).selective, sum_ledger(layer_ledger(m, s), mlp).selective);
  // A GeLU MLP runs no glu().
  EXPECT_EQ(uf_extra(uf_dense(mlp_kind::gelu), s, unfused_path::swiglu), 0);
}

TEST(MegatronUnfused, MoeSwigluKeepsThreeExpertTensorsAndTwoSharedOnes) {
  model_spec m = uf_dense(mlp_kind::swiglu);
  m.moe.experts = 8, m.moe.top_k = 2, m.moe.expert_ffn = 128, m.moe.shared_ffn = 256,
  m.moe.layers = {true, true};
  const ledger_shape s(512, 2, 1, false, 1, attention_kind::flash, 2);
  // R = top_k x s x b = 2048 routed rows (tp 1, balanced): silu, up + offset and the product the
  // probabilities multiply, 128 wide each; the shared experts' silu and up + offset, s x b x 256 each.
  const std::int64_t routed = 3 * (2 * 512 * 2) * 128 * 2, shared = 2 * (512 * 2) * 256 * 2;
  EXPECT_EQ(uf_extra(m, s, unfused_path::swiglu, true), routed + shared);
}

TEST(MegatronUnfused, TorchSoftmaxInFp32AndItsMask) {
  // Eager attention, 4 heads, s = 512, b = 2, tp 1: a*s^2*b elements.
  const std::int64_t elems = 4LL * 512 * 512 * 2;
  const ledger_shape s(512, 2, 1, false, 1, attention_kind::eager, 2);
  // Without dropout: fp32 probabilities (2 bytes more than bf16) and the bf16 copy the bmm keeps.
  EXPECT_EQ(uf_extra(uf_dense(mlp_kind::gelu, false), s, unfused_path::softmax_fp32), 2 * elems + 2 * elems);
  // With dropout the bmm keeps dropout's output (already priced): only the 2 more bytes of fp32.
  EXPECT_EQ(uf_extra(uf_dense(mlp_kind::gelu, true), s, unfused_path::softmax_fp32), 2 * elems);
  EXPECT_EQ(uf_extra(uf_dense(mlp_kind::gelu), s, unfused_path::softmax_mask), 512 * 512);
  // A fused attention kernel has no softmax to run in PyTorch.
  EXPECT_EQ(uf_extra(uf_dense(mlp_kind::gelu), ledger_shape(512, 2, 1, false, 1, attention_kind::flash, 2),
                     unfused_path::softmax_fp32),
            0);
}

TEST(MegatronUnfused, ModelJsonKeepsThePathsAndRefusesUnknownOnes) {
  const auto l = import_megatron_args(
      uf_base + "--swiglu --position-embedding-type rope --no-rope-fusion --no-bias-swiglu-fusion", "test");
  ASSERT_TRUE(l.model);
  const nlohmann::json j = model_to_json(*l.model);
  EXPECT_EQ(j.at("unfused"), nlohmann::json::array({"rope", "swiglu"}));
  EXPECT_EQ(model_from_json(j, "m").unfused, l.model->unfused);
  nlohmann::json fused = model_to_json(uf_dense(mlp_kind::gelu));
  EXPECT_FALSE(fused.contains("unfused"));  // every existing model file and row keeps its meaning
  nlohmann::json bad = j;
  bad["unfused"] = {"rope", "bias_gelu"};
  EXPECT_THROW(model_from_json(bad, "m"), bad_input);
}
