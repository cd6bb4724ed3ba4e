// ledger_qk_test.cpp: per-head query and key norms (model_spec::qk_norm): Qwen3's q_norm / k_norm
// (transformers modeling_qwen3_moe.py: RMSNorm(head_dim) on each head of q and k) and Megatron's
// --qk-layernorm (TENorm(head_dim), megatron/core/transformer/attention.py). Expected bytes are hand counts
// of Qwen3-30B-A3B's layer (config.json: h 2048, 32 heads, 4 kv heads, head_dim 128, 128 experts, top 8,
// expert ffn 768), and the model-file and problem JSON round trips.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "planner/ledger.hpp"
#include "planner/model_files.hpp"
#include "planner/problem_json.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

model_spec ledger_qk_qwen3_30b(bool qk) {
  model_spec m = load_preset("qwen3-30b-a3b", preset_dir());
  m.qk_norm = qk;
  return m;
}

// s 4096, b 1, t 1, flash, bf16: q_norm keeps its input (s x a*d bf16) and an fp32 rstd per token and head;
// k_norm the same over kv heads.
TEST(LedgerQk, Qwen3LayerKeepsTheNormsInputsAndStatistics) {
  const ledger_shape s(4096, 1, 1, false, 1, attention_kind::flash, 2);
  const std::int64_t tokens = 4096, ad = 32 * 128, kvd = 4 * 128;
  const std::int64_t q_in = 2 * tokens * ad, q_st = 4 * tokens * 32;  // 32 MiB, 512 KiB
  const std::int64_t k_in = 2 * tokens * kvd, k_st = 4 * tokens * 4;  // 4 MiB, 64 KiB
  EXPECT_EQ(q_in + q_st + k_in + k_st, 38'338'560);
  const auto with = test::bytes_by_name(layer_ledger(ledger_qk_qwen3_30b(true), s, true));
  EXPECT_EQ(with.at("attn.q_norm.input"), q_in);
  EXPECT_EQ(with.at("attn.q_norm.stats"), q_st);
  EXPECT_EQ(with.at("attn.k_norm.input"), k_in);
  EXPECT_EQ(with.at("attn.k_norm.stats"), k_st);

  // The whole MoE layer, by hand, per token (h 2048, E 128, k 8 routed rows per token, F 768):
  // ln1 input h + qkv input h + q ad + k kvd + v kvd + proj input ad + ln2 input h + moe input h (bf16),
  // two norms' rstd (4 each), flash log-sum-exp 4a, router probs 2E, routing map 8E, and per routed row
  // fc1 input h, fc1 output 2F, act output F, unpermute input h (bf16).
  const std::int64_t h = 2048, E = 128, k = 8, F = 768, a = 32;
  const std::int64_t per_token =
      2 * (4 * h + 2 * ad + 2 * kvd) + 2 * 4 + 4 * a + 2 * E + 8 * E + k * 2 * (h + 2 * F + F + h);
  const auto without = sum_ledger(layer_ledger(ledger_qk_qwen3_30b(false), s, true));
  EXPECT_EQ(without.none, tokens * per_token);
  const auto sums = sum_ledger(layer_ledger(ledger_qk_qwen3_30b(true), s, true));
  EXPECT_EQ(sums.none, tokens * per_token + 38'338'560);
  // Outside the attention core and outside Megatron's recompute modules: selective keeps them, full does not.
  EXPECT_EQ(sums.selective - without.selective, 38'338'560);
  EXPECT_EQ(sums.full, without.full);
}

TEST(LedgerQk, TensorParallelismSplitsThemByHeads) {
  const ledger_shape s(4096, 1, 4, true, 1, attention_kind::flash, 2);
  const auto e = test::bytes_by_name(layer_ledger(ledger_qk_qwen3_30b(true), s, true));
  EXPECT_EQ(e.at("attn.q_norm.input"), 2 * 4096 * (32 / 4) * 128);
  EXPECT_EQ(e.at("attn.q_norm.stats"), 4 * 4096 * (32 / 4));
  EXPECT_EQ(e.at("attn.k_norm.input"), 2 * 4096 * 1 * 128);  // 4 kv heads over tp 4
  EXPECT_EQ(e.at("attn.k_norm.stats"), 4 * 4096 * 1);
}

TEST(LedgerQk, LayerNormKeepsMeanAndRstd) {
  model_spec m = ledger_qk_qwen3_30b(true);
  m.norm = norm_kind::layernorm;
  const ledger_shape s(1024, 2, 1, false, 1, attention_kind::flash, 2);
  const auto e = test::bytes_by_name(layer_ledger(m, s, true));
  EXPECT_EQ(e.at("attn.q_norm.stats"), 2 * 4 * 1024 * 2 * 32);
}

TEST(LedgerQk, WeightsAreTwoHeadDimNormsPerLayer) {
  const auto without = count_params(ledger_qk_qwen3_30b(false));
  const auto with = count_params(ledger_qk_qwen3_30b(true));
  EXPECT_EQ(with.moe_layer.replicated - without.moe_layer.replicated, 2 * 128);  // RMSNorm: weight only
  EXPECT_EQ(with.total - without.total, 48 * 2 * 128);
  model_spec ln = ledger_qk_qwen3_30b(true);
  ln.norm = norm_kind::layernorm;
  model_spec ln_off = ln;
  ln_off.qk_norm = false;
  EXPECT_EQ(count_params(ln).total - count_params(ln_off).total, 48 * 2 * 2 * 128);  // weight and bias
}

TEST(LedgerQk, MultiLatentAttentionIgnoresIt) {
  // DeepSeek-V3's latent norms are priced whatever qk_norm says (Megatron's --qk-layernorm normalises them).
  model_spec m = load_preset("deepseek-v3", preset_dir());
  const ledger_shape s(4096, 1, 1, false, 1, attention_kind::flash, 2);
  const auto off = sum_ledger(layer_ledger(m, s, true));
  m.qk_norm = true;
  const auto on = sum_ledger(layer_ledger(m, s, true));
  EXPECT_EQ(on.none, off.none);
  EXPECT_EQ(count_params(m).total, count_params(load_preset("deepseek-v3", preset_dir())).total);
}

TEST(LedgerQk, ModelFilesReadAndWriteIt) {
  nlohmann::json j = model_to_json(ledger_qk_qwen3_30b(false));
  EXPECT_FALSE(j.contains("qk_norm"));  // files written before the field read the same
  EXPECT_FALSE(model_from_json(j, "m").qk_norm);
  j["qk_norm"] = true;
  const model_spec m = model_from_json(j, "m");
  EXPECT_TRUE(m.qk_norm);
  EXPECT_TRUE(model_to_json(m).at("qk_norm").get<bool>());
  j["qk_norm"] = "yes";
  EXPECT_THROW(model_from_json(j, "m"), bad_input);
  // A problem file keeps it.
  problem p = test::preset_problem("qwen3-30b-a3b");
  p.model.qk_norm = true;
  EXPECT_TRUE(problem_from_json(problem_to_json(p), "p").model.qk_norm);
}

TEST(LedgerQk, Qwen3ConfigImpliesIt) {
  EXPECT_TRUE(load_hf_config(data + "/hf/qwen3-30b-a3b.json").qk_norm);
  EXPECT_FALSE(load_hf_config(data + "/hf/mixtral-8x7b.json").qk_norm);
}

}  // namespace
}  // namespace headroom
