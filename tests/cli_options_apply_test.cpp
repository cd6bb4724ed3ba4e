// cli_options_apply_test.cpp: an option that cannot apply to the plan it is given with is refused in one line
// naming it and what it applies to, never ignored (issue 34, classes E and F; cli/plan_command.cpp,
// check_options_apply); the same options where they apply still plan.
#include <gtest/gtest.h>

#include <string>

#include "cli_support.hpp"

namespace {

void refused(const std::string& args, const std::string& says) {
  SCOPED_TRACE(args);
  const result r = run(args);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(says), std::string::npos) << "wanted '" << says << "' in: " << r.err;
}

void plans(const std::string& args) {
  SCOPED_TRACE(args);
  const result r = run(args);
  EXPECT_TRUE(r.status == 0 || r.status == 3) << r.status << " " << r.err;
}

const std::string llama = "plan --preset llama3-8b --gpus 8 ";

TEST(OptionsApply, Zero3OptionsNeedZero3) {
  refused(llama + "--zero 1 --zero3-live-params 1000000", "zero3-live-params: applies to ZeRO-3 / FSDP (--zero 3), not --zero 1");
  refused(llama + "--zero 2 --zero3-inflight-units 3", "zero3-inflight-units: applies to ZeRO-3");
  refused(llama + "--zero 0 --no-reshard-after-forward", "reshard-after-forward: applies to ZeRO-3");
  refused(llama + "--zero 1 --offload-params", "offload-params: applies to ZeRO-3");
  plans(llama + "--zero 3 --zero3-live-params 1000000 --no-reshard-after-forward");
}

TEST(OptionsApply, HybridShardingNeedsSharding) {
  refused(llama + "--zero 0 --dp-replicate 2", "dp-replicate: hybrid sharding replicates over groups that shard");
  plans(llama + "--zero 3 --dp-replicate 2");
}

TEST(OptionsApply, ExpertTensorParallelismIsAtLeastOne) {
  refused("plan --preset mixtral-8x7b --gpus 8 --ep 8 --etp 0", "etp: must be at least 1");
  plans("plan --preset mixtral-8x7b --gpus 8 --ep 8 --etp 1 --zero 1 --recompute full");
}

TEST(OptionsApply, RecomputeModulesNeedSelectiveAndAModuleTheModelHas) {
  refused(llama + "--recompute full --recompute-modules mlp", "recompute-modules: applies to --recompute selective, not --recompute full");
  refused(llama + "--recompute selective --recompute-modules moe_act", "'moe_act' is not a module of llama3-8b (no experts)");
  refused(llama + "--recompute selective --recompute-modules mla_up_proj",
          "'mla_up_proj' is not a module of llama3-8b (no multi-latent attention)");
  refused("plan --preset mixtral-8x7b --gpus 8 --recompute selective --recompute-modules shared_experts",
          "'shared_experts' is not a module of mixtral-8x7b (no experts shared)");
  plans(llama + "--recompute selective --recompute-modules mlp,layernorm");
}

// Class F: a sequence a learned position table has no rows for.
TEST(OptionsApply, ASequenceBeyondLearnedPositionsIsRefused) {
  refused("plan --preset gpt3-175b --gpus 64 --tp 8 --pp 8 --seq 4096", "seq: 4096 is beyond gpt3-175b's 2048 learned positions");
  plans("plan --preset gpt3-175b --gpus 64 --tp 8 --pp 8 --seq 2048");
  plans("plan --preset llama3-8b --gpus 8 --seq 32768");  // rotary: no table to run past
}

}  // namespace
