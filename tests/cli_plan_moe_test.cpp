// cli_plan_moe_test.cpp: the plan document's per-layer ledgers for mixture-of-experts models
// (headroom.plan/2.4, results/README.md): the dense layer's `ledger` stays, the MoE layer's comes beside it
// with each kind's layer count, and a stage's activations are the sum of both kinds. Expected figures are
// derived by hand from the HF configs (tests/data/hf/SOURCES.md).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_support.hpp"

namespace {

const std::string plan_moe_flags = " --gpu-type h100-80gb --attention flash --zero 1 --recompute full --json";

// Returns the sum of a ledger's bytes.
std::int64_t plan_moe_ledger_sum(const nlohmann::json& ledger) {
  std::int64_t s = 0;
  for (const auto& e : ledger) s += e["bytes"].get<std::int64_t>();
  return s;
}

// Qwen3-30B-A3B: 48 layers, every one MoE (decoder_sparse_step 1, no mlp_only_layers).
TEST(PlanMoeJson, AllMoeModelCarriesTheMoeLedger) {
  const auto r =
      run("plan --hf-config " + data + "/hf/qwen3-30b-a3b.json --gpus 16 --ep 16" + plan_moe_flags);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema"], "headroom.plan/2.4");
  EXPECT_EQ(j["layers_by_kind"]["dense"], 0);
  EXPECT_EQ(j["layers_by_kind"]["moe"], 48);
  ASSERT_TRUE(j["moe_ledger"].is_array());
  ASSERT_FALSE(j["moe_ledger"].empty());
  // Full recompute keeps the layer input, 2 * s * b * h = 2 * 4096 * 2048 bytes (the HF config's
  // max_position_embeddings 40960 capped at 4096).
  EXPECT_EQ(j["moe_layer_activation_bytes"]["full"].get<std::int64_t>(), 2LL * 4096 * 2048);
  EXPECT_EQ(j["moe_layer_activation_bytes"]["none"].get<std::int64_t>(),
            plan_moe_ledger_sum(j["moe_ledger"]));
  // The routed experts' fc1 input: R x h with R = k x tokens = 8 x 4096.
  bool routed = false;
  for (const auto& e : j["moe_ledger"])
    routed = routed ||
             (e["name"] == "moe.experts.fc1.input" && e["bytes"].get<std::int64_t>() == 2LL * 32768 * 2048);
  EXPECT_TRUE(routed) << j["moe_ledger"].dump();
  // The dense ledger stays (readers of 2.2), and describes none of the 48 layers.
  EXPECT_FALSE(j["ledger"].empty());
  const auto& s = j["stages"][0];
  EXPECT_EQ(s["moe_layers"], 48);
  EXPECT_EQ(s["activation_bytes"].get<std::int64_t>(), 48 * 2LL * 4096 * 2048);
}

// DeepSeek-V3: first_k_dense_replace 3 of 61 layers; at pp 4 stage 0 holds 3 dense and 13 MoE layers and keeps
// 4 micro-batches of them; each keeps its input, 2 * 4096 * 7168 bytes.
TEST(PlanMoeJson, DeepSeekCountsBothKinds) {
  const auto r =
      run("plan --hf-config " + data + "/hf/deepseek-v3.json --gpus 1024 --ep 64 --pp 4" + plan_moe_flags);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["layers_by_kind"]["dense"], 3);
  EXPECT_EQ(j["layers_by_kind"]["moe"], 58);
  const std::int64_t dense = j["layer_activation_bytes"]["full"].get<std::int64_t>();
  const std::int64_t moe = j["moe_layer_activation_bytes"]["full"].get<std::int64_t>();
  EXPECT_EQ(dense, 2LL * 4096 * 7168);
  EXPECT_EQ(moe, 2LL * 4096 * 7168);
  const auto& s = j["stages"][0];
  EXPECT_EQ(s["layers"], 16);
  EXPECT_EQ(s["moe_layers"], 13);
  EXPECT_EQ(s["activation_bytes"].get<std::int64_t>(), 4 * 3 * dense + 4 * 13 * moe);
}

// A dense model: no MoE layer, so no MoE ledger; the dense keys are as before.
TEST(PlanMoeJson, DenseModelHasNoMoeLedger) {
  const auto r = run("plan --preset llama3-8b --gpus 8" + plan_moe_flags);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["layers_by_kind"]["dense"], 32);
  EXPECT_EQ(j["layers_by_kind"]["moe"], 0);
  EXPECT_TRUE(j["moe_ledger"].empty());
  EXPECT_TRUE(j["moe_layer_activation_bytes"].is_null());
  EXPECT_EQ(j["layer_activation_bytes"]["none"].get<std::int64_t>(), plan_moe_ledger_sum(j["ledger"]));
}

}  // namespace

namespace {

// Megatron-MoE-ModelZoo's DeepSeek-V3 launch (tests/data/megatron/modelzoo_dsv3_fp8_dry_run.cmd: pp 8 and the
// layout string Et|(tt|)*30mL, 32 virtual stages): planned as written, its ranks hold 7, 8 x 6 and 6 layers in
// chunks of different sizes; with --pp 16 over it, Megatron interleaves the same 32 virtual stages over 16
// ranks (vpp = 32 / 16 = 2, arguments.py), and so does headroom unless --vpp is given too.
TEST(PlanMoeJson, LayoutStringFollowsAPpGivenOverIt) {
  const std::string launch = "plan --megatron-args " + data +
                             "/megatron/modelzoo_dsv3_fp8_dry_run.cmd --gpus 1024 --gpu-type h100-80gb "
                             "--allow-unmodelled --json";
  const auto r = run(launch);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["layout"]["vpp"], 4);
  std::vector<std::int64_t> layers;
  for (const auto& s : j["stages"]) layers.push_back(s["layers"].get<std::int64_t>());
  EXPECT_EQ(layers, (std::vector<std::int64_t>{7, 8, 8, 8, 8, 8, 8, 6}));
  // A --pp on the command line contradicts the launch's (issue 34, A: refused); appended to the launch, it is
  // the launch's own, as Megatron takes the last of a flag.
  const auto refused = run(launch + " --pp 16");
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.err.find("states --pp 8, the command line --pp 16: drop --pp"), std::string::npos) << refused.err;
  const std::string appended = "plan --megatron-args \"" + data +
                               "/megatron/modelzoo_dsv3_fp8_dry_run.cmd --pipeline-model-parallel-size 16\" "
                               "--gpus 1024 --gpu-type h100-80gb --allow-unmodelled --json";
  const auto over = run(appended);
  ASSERT_EQ(over.status, 0) << over.err;
  const auto k = nlohmann::json::parse(over.out);
  EXPECT_EQ(k["layout"]["vpp"], 2);
  EXPECT_EQ(k["stages"][0]["layers"], 1 + 2);   // virtual stages 0 and 16
  EXPECT_EQ(k["stages"][15]["layers"], 2 + 0);  // virtual stages 15 and 31
  EXPECT_EQ(run(appended + " --vpp 4").status, 2);  // 32 stages are not 16 x 4: refused
}

}  // namespace
