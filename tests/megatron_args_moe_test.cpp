// megatron_args_moe_test.cpp: what the Megatron importer makes of Megatron-MoE-ModelZoo's MoE launches: the flex
// token dispatcher, --qk-layernorm by attention kind, FP8 with bf16 Adam moments, and the refusal line that
// names every unmodelled flag. The real launch is tests/data/megatron/modelzoo_dsv3_fp8_dry_run.cmd (ModelZoo's
// sbatch_benchmarking.sh @ e865051, DeepSeek-V3, PR=fp8); rules are Megatron-LM's @ d98e8a64, cited per test.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "planner/errors.hpp"
#include "planner/imports/megatron_args.hpp"
#include "planner/model_files.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

bool moe_args_lists(const std::vector<std::string>& v, const std::string& prefix) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.starts_with(prefix); });
}
bool moe_args_derived(const launch_import& l, const std::string& field, const std::string& value) {
  return std::any_of(l.derived.begin(), l.derived.end(),
                     [&](const import_note& n) { return n.field == field && n.value == value; });
}
// A small MoE model in Megatron's flags; each test adds what it checks.
const std::string moe_base =
    "--num-layers 2 --hidden-size 256 --num-attention-heads 4 --vocab-size 1024 --seq-length 512 "
    "--max-position-embeddings 512 --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 2 "
    "--micro-batch-size 1 --global-batch-size 8 --bf16 ";

launch_import moe_import(const std::string& extra) {
  return import_megatron_args(moe_base + extra, "test");
}

TEST(MegatronArgsMoe, ModelZooDeepSeekV3Fp8Launch) {
  const auto l =
      load_megatron_args(std::string(HEADROOM_TEST_DATA) + "/megatron/modelzoo_dsv3_fp8_dry_run.cmd");
  ASSERT_TRUE(l.model);
  // --fp8-recipe blockwise --fp8-param-gather --use-precision-aware-optimizer --exp-avg-dtype bf16
  // --exp-avg-sq-dtype bf16 --main-*-dtype fp32 (sbatch_benchmarking.sh l.85-92).
  EXPECT_EQ(l.fp8, "blockwise");
  EXPECT_EQ(l.recipe, "megatron-distopt-fp8-param-gather-bf16-moments");
  // --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep (l.78-79): priced as alltoall.
  EXPECT_EQ(l.dispatcher, "alltoall");
  EXPECT_TRUE(moe_args_derived(l, "dispatcher", "alltoall"));
  // --qk-layernorm with MLA: the latent norms the MLA ledger prices; not a refusal.
  EXPECT_TRUE(moe_args_derived(l, "mla latent norms", "priced"));
  EXPECT_FALSE(l.model->qk_norm);
  // What is left unmodelled, every flag by name (the line of the notes cut it after one and a half).
  std::vector<std::string> keys = unmodelled_keys(l);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys,
            (std::vector<std::string>{"--delay-wgrad-compute", "--moe-router-padding-for-fp8",
                                      "--moe-token-dispatcher-type", "--overlap-moe-expert-parallel-comm"}));
  const std::string line = unmodelled_refusal(l);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  // Every key is named, or counted whole at the end of the list when the origin leaves no room for it.
  int missing = 0;
  for (const auto& k : keys) missing += line.find(k) == std::string::npos;
  if (missing > 0) {
    EXPECT_NE(line.find(", and " + std::to_string(missing) + " more"), std::string::npos) << line;
  }
  EXPECT_EQ(line.rfind("--delay-wgrad-compute, --moe-router-padding-for-fp8", 0), 0u) << line;
  EXPECT_LE(std::string("headroom: bad input: : ").size() + l.origin.size() + line.size(), 280u) << line;
  const auto j = unmodelled_json({l});
  ASSERT_EQ(j.size(), l.unmodelled.size());
  for (const auto& e : j) {
    EXPECT_EQ(e["origin"], l.origin);
    EXPECT_FALSE(e["why"].get<std::string>().empty()) << e.dump();
  }
}

// token_dispatcher.py MoEFlexTokenDispatcher (l.1809-2052): a fused all-to-all, then a permute into R rows.
TEST(MegatronArgsMoe, FlexDispatcherIsPricedAsAlltoallWithItsBackendListed) {
  auto l = moe_import("--moe-token-dispatcher-type flex");
  EXPECT_EQ(l.dispatcher, "alltoall");
  EXPECT_TRUE(moe_args_lists(l.unmodelled, "--moe-token-dispatcher-type: flex: the deepep backend"));
  l = moe_import("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep");
  EXPECT_TRUE(moe_args_lists(l.unmodelled, "--moe-token-dispatcher-type: flex: the hybridep backend"));
  EXPECT_EQ(unmodelled_keys(l), std::vector<std::string>{"--moe-token-dispatcher-type"});  // listed once
  l = moe_import("--moe-token-dispatcher-type flex --moe-enable-deepep");
  EXPECT_TRUE(moe_args_lists(l.unmodelled, "--moe-token-dispatcher-type: flex: the deepep backend"));
  // A backend without flex selects nothing (the dispatcher is not flex): read, no effect on memory.
  l = moe_import("--moe-token-dispatcher-type alltoall --moe-flex-dispatcher-backend deepep");
  EXPECT_EQ(l.dispatcher, "alltoall");
  EXPECT_TRUE(l.unmodelled.empty()) << l.unmodelled.front();
  EXPECT_TRUE(moe_args_lists(l.unused, "--moe-flex-dispatcher-backend"));
  l = moe_import("");
  EXPECT_EQ(l.dispatcher, "allgather");  // transformer_config.py l.891
  // What Megatron refuses (transformer_config.py l.1743-1768), refused here with the flag named.
  EXPECT_NE(test::bad_input_of([] { moe_import("--moe-enable-deepep"); }).find("--moe-enable-deepep: needs"),
            std::string::npos);
  EXPECT_NE(test::bad_input_of([] {
              moe_import("--moe-token-dispatcher-type alltoall --moe-flex-dispatcher-backend ncclep");
            }).find("--moe-flex-dispatcher-backend: ncclep needs"),
            std::string::npos);
  EXPECT_NE(test::bad_input_of([] {
              moe_import(
                  "--moe-token-dispatcher-type flex --moe-expert-capacity-factor 1 "
                  "--moe-pad-expert-input-to-capacity");
            }).find("--moe-pad-expert-input-to-capacity"),
            std::string::npos);
  EXPECT_NE(test::bad_input_of([] {
              moe_import("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend x");
            }).find("--moe-flex-dispatcher-backend"),
            std::string::npos);
}

// gpt_layer_specs.py: with MLA --qk-layernorm makes the latent norms (l.104-115); without it, a norm on each
// head of q and k (l.149-152).
TEST(MegatronArgsMoe, QkLayernormByAttentionKind) {
  auto l = moe_import("--group-query-attention --num-query-groups 2 --qk-layernorm");
  ASSERT_TRUE(l.model);
  EXPECT_TRUE(l.model->qk_norm);
  EXPECT_FALSE(moe_args_lists(l.unmodelled, "--qk-layernorm"));
  l = moe_import("--group-query-attention --num-query-groups 2");
  EXPECT_FALSE(l.model->qk_norm);
  l = moe_import("--multi-latent-attention --q-lora-rank 64 --kv-lora-rank 32 --qk-layernorm");
  EXPECT_TRUE(l.unmodelled.empty()) << l.unmodelled.front();
  // Without the flag Megatron builds no latent norms, which the MLA ledger prices: said, not hidden.
  l = moe_import("--multi-latent-attention --q-lora-rank 64 --kv-lora-rank 32");
  EXPECT_TRUE(moe_args_lists(l.unmodelled, "--multi-latent-attention: without --qk-layernorm"));
}

// The two doors agree on Qwen3-30B-A3B: the HF config (tests/data/hf/qwen3-30b-a3b.json) and the Megatron
// arguments slime trains it with (THUDM/slime scripts/models/qwen3-30B-A3B.sh: --qk-layernorm,
// --group-query-attention, 32 heads, 4 groups, kv-channels 128, 48 layers, h 2048, 128 experts of 768, top 8).
TEST(MegatronArgsMoe, HfAndMegatronAgreeOnQwen3QkNorm) {
  const model_spec hf = load_hf_config(std::string(HEADROOM_TEST_DATA) + "/hf/qwen3-30b-a3b.json");
  const auto l = import_megatron_args(
      "--disable-bias-linear --qk-layernorm --group-query-attention --num-attention-heads 32 "
      "--num-query-groups 4 "
      "--kv-channels 128 --num-layers 48 --hidden-size 2048 --ffn-hidden-size 6144 --normalization RMSNorm "
      "--position-embedding-type rope --swiglu --untie-embeddings-and-output-weights --vocab-size 151936 "
      "--moe-ffn-hidden-size 768 --moe-router-topk 8 --num-experts 128 --seq-length 4096 "
      "--max-position-embeddings 40960 --make-vocab-size-divisible-by 1187 --bf16",
      "slime qwen3-30B-A3B.sh");
  ASSERT_TRUE(l.model);
  EXPECT_TRUE(hf.qk_norm);
  EXPECT_EQ(l.model->qk_norm, hf.qk_norm);
  EXPECT_EQ(l.model->head_dim, hf.head_dim);
  EXPECT_EQ(l.model->kv_heads, hf.kv_heads);
  EXPECT_EQ(l.model->moe.expert_ffn, hf.moe.expert_ffn);
  EXPECT_FALSE(moe_args_lists(l.unmodelled, "--qk-layernorm"));
  // By hand, per layer: q and o 2048 x 4096, k and v 2048 x 512, the q/k norms 2 x 128, two RMSNorms of 2048,
  // the router 128 x 2048, 128 experts of 3 x 2048 x 768: 623,120,640; x 48, plus the untied embedding and
  // head 2 x 151936 x 2048 and the final norm 2048: 30,532,122,624 (the model card's 30.5B).
  EXPECT_EQ(count_params(hf).total, 30'532'122'624);
  EXPECT_EQ(count_params(*l.model).total, count_params(hf).total);
}

// optimizer_config.py l.407-414: the master weights stay MCore's unless delayed scaling (or no FP8).
TEST(MegatronArgsMoe, Bf16MomentsByFp8Recipe) {
  const std::string pao =
      "--use-distributed-optimizer --use-precision-aware-optimizer --exp-avg-dtype bf16 "
      "--exp-avg-sq-dtype bf16 ";
  EXPECT_EQ(moe_import(pao).recipe, "megatron-distopt-bf16-moments");
  EXPECT_EQ(moe_import(pao + "--fp8-format e4m3 --fp8-recipe tensorwise").recipe,
            "megatron-distopt-fp8-bf16-moments");
  EXPECT_EQ(moe_import(pao + "--fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather").recipe,
            "megatron-distopt-fp8-param-gather-bf16-moments");
  auto l = moe_import(pao + "--fp8-format hybrid");  // delayed, the default recipe
  EXPECT_EQ(l.recipe, "megatron-distopt-fp8");
  EXPECT_TRUE(moe_args_lists(l.unmodelled, "--use-precision-aware-optimizer: with delayed FP8 scaling"));
  // One moment in bf16 has no recipe: listed, priced fp32.
  l = moe_import(
      "--use-distributed-optimizer --use-precision-aware-optimizer --exp-avg-dtype bf16 "
      "--fp8-format e4m3 --fp8-recipe blockwise");
  EXPECT_EQ(l.recipe, "megatron-distopt-fp8");
  EXPECT_EQ(unmodelled_keys(l), std::vector<std::string>{"--exp-avg-dtype"});
  // Megatron asserts fp32 moments without the precision-aware optimizer (optimizer_config.py l.468-479).
  EXPECT_NE(test::bad_input_of([] {
              moe_import("--use-distributed-optimizer --exp-avg-sq-dtype bf16");
            }).find("--exp-avg-sq-dtype: needs --use-precision-aware-optimizer"),
            std::string::npos);
}

TEST(MegatronArgsMoe, RefusalLineNamesEveryKeyOnce) {
  launch_import l;
  EXPECT_EQ(unmodelled_refusal(l), "");
  l.unmodelled = {"--a: one", "--b: two", "--a: again", "--c: three", "--d: four", "--e: five", "odd word"};
  EXPECT_EQ(unmodelled_keys(l), (std::vector<std::string>{"--a", "--b", "--c", "--d", "--e", "odd word"}));
  EXPECT_EQ(
      unmodelled_refusal(l),
      "--a, --b, --c, --d, --e, odd word change memory and are not modelled: refused (--allow-unmodelled plans "
      "anyway, --explain says why)");
  // A long origin leaves less of the 280-character line: the keys that do not fit are counted whole.
  launch_import far = l;
  far.origin = std::string(129, 'p');  // leaves 30 characters for the list
  const std::string cut = unmodelled_refusal(far);
  EXPECT_NE(cut.find("--a, --b"), std::string::npos) << cut;
  EXPECT_NE(cut.find(" more change memory"), std::string::npos) << cut;
  EXPECT_LE(std::string("headroom: bad input: ").size() + far.origin.size() + 2 + cut.size(), 280u) << cut;
  const auto j = unmodelled_json({l});
  ASSERT_EQ(j.size(), 7u);
  EXPECT_EQ(j[2]["key"], "--a");
  EXPECT_EQ(j[2]["why"], "again");
  EXPECT_EQ(j[6]["why"], "");
}

}  // namespace
}  // namespace headroom
