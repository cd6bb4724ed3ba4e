// cli_options_apply_test.cpp: an option that cannot apply to the plan it is given with is refused in one line
// naming it and what it applies to, never ignored (issue 34, classes E and F; cli/plan_command.cpp,
// check_options_apply); the same options where they apply still plan.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
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
          "'shared_experts' is not a module of mixtral-8x7b (no shared experts)");
  plans(llama + "--recompute selective --recompute-modules mlp,layernorm");
}

// Class F: a sequence a learned position table has no rows for.
TEST(OptionsApply, ASequenceBeyondLearnedPositionsIsRefused) {
  refused("plan --preset gpt3-175b --gpus 64 --tp 8 --pp 8 --seq 4096", "seq: 4096 is beyond gpt3-175b's 2048 learned positions");
  plans("plan --preset gpt3-175b --gpus 64 --tp 8 --pp 8 --seq 2048");
  plans("plan --preset llama3-8b --gpus 8 --seq 32768");  // rotary: no table to run past
}

}  // namespace

namespace {

// Class A: a value a launch file and the command line both state must agree, for every importer; agreeing is
// accepted, a contradiction is refused naming both values and how to change the file's (cli/launch_options.cpp,
// check_agrees).
TEST(OptionsApply, ALaunchFileAndTheCommandLineMustAgree) {
  const std::string ds = scratch("ds_mb8_z3.json");
  std::ofstream(ds) << R"({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1,
                          "zero_optimization": {"stage": 3}, "bf16": {"enabled": true}})";
  const std::string with_ds = llama + "--deepspeed-config " + ds + " ";
  refused(with_ds + "--micro-batch 1", "states --micro-batch 8, the command line --micro-batch 1: drop --micro-batch");
  refused(with_ds + "--zero 1", "states --zero 3, the command line --zero 1");
  EXPECT_NE(run(with_ds + "--zero 1").err.find("or set zero_optimization.stage 1 in the DeepSpeed JSON"),
            std::string::npos);
  plans(with_ds + "--micro-batch 8 --zero 3");
  const std::string tt = data + "/torchtitan/train_configs/llama3/llama3_70b.toml";
  const std::string with_tt = "plan --gpus 64 --torchtitan-config " + tt + " ";
  refused(with_tt + "--tp 4", "states --tp 8, the command line --tp 4");
  EXPECT_NE(run(with_tt + "--tp 4").err.find("--torchtitan-override"), std::string::npos);
  refused(with_tt + "--recompute selective", "states --recompute full, the command line --recompute selective");
  refused(with_tt + "--seq 4096", "states --seq 8192, the command line --seq 4096");
  plans(with_tt + "--tp 8 --torchtitan-override parallelism.tensor_parallel_degree=8");
  plans("plan --gpus 64 --torchtitan-config " + tt + " --torchtitan-override parallelism.tensor_parallel_degree=4");
  refused(llama + "--deepspeed-config " + ds + " --torchtitan-config " + tt,
          "deepspeed-config: and --torchtitan-config describe two different launches");
  const std::string megatron = "--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
                               "--max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 64 --bf16 "
                               "--vocab-size 32000 --tensor-model-parallel-size 2";
  refused("plan --gpus 8 --tp 4 --megatron-args \"" + megatron + "\"", "states --tp 2, the command line --tp 4");
  plans("plan --gpus 8 --megatron-args \"" + megatron + " --tensor-model-parallel-size 4\"");
}

}  // namespace

namespace {

// Class I: errors that name what the user gave, and a script saved with Windows line ends read as written.
TEST(OptionsApply, ErrorsNameWhatTheUserGave) {
  refused(llama + "--pp 4 --first-stage-layers 20 --last-stage-layers 20",
          "first-stage-layers: 20 on the first stage and 20 on the last are more than the model's 32 layers");
  EXPECT_EQ(run(llama + "--pp 4 --first-stage-layers 20 --last-stage-layers 20").err.find("-8"), std::string::npos);
  const std::string crlf = scratch("launch_crlf.sh");
  std::ofstream(crlf) << "#!/bin/bash\r\ntorchrun pretrain_gpt.py \\\r\n  --num-layers 32 --hidden-size 4096 "
                         "--num-attention-heads 32 \\\r\n  --seq-length 4096 --max-position-embeddings 4096 "
                         "--micro-batch-size 1 --global-batch-size 64 --bf16 --vocab-size 32000\r\n";
  const result r = run("plan --gpus 8 --json - --megatron-args " + crlf);
  ASSERT_TRUE(r.status == 0 || r.status == 3) << r.err;
  EXPECT_NE(r.out.find("\"layers\": 32"), std::string::npos);
}

}  // namespace

namespace {

// Class F: launches that cannot run. DeepSpeed reads a stage 0-3 and nobody fills "auto" for it; DeepSeek's
// group-limited routing needs groups that divide the experts and enough of them kept for top-k.
TEST(OptionsApply, LaunchesThatCannotRunAreRefused) {
  const std::string ds = scratch("ds_auto_stage.json");
  std::ofstream(ds) << R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
                          "zero_optimization": {"stage": "auto"}, "bf16": {"enabled": true}})";
  refused(llama + "--deepspeed-config " + ds, "zero_optimization.stage: \"auto\" is not a stage");
  auto deepseek_with = [](const std::string& name, const std::string& edits) {
    auto j = nlohmann::json::parse(slurp(data + "/hf/deepseek-v3.json"));
    j.merge_patch(nlohmann::json::parse(edits));
    const std::string p = scratch(name);
    std::ofstream(p) << j.dump();
    return "plan --gpus 256 --hf-config " + p;
  };
  refused(deepseek_with("g7.json", R"({"n_group": 7})"), "n_group: 7 groups do not divide the 256 routed experts");
  refused(deepseek_with("k9.json", R"({"topk_group": 9})"), "topk_group: keeps 9 groups of n_group 8");
  refused(deepseek_with("reach.json", R"({"topk_group": 1, "num_experts_per_tok": 64})"),
          "64 experts cannot be chosen from the 32 in topk_group groups");
  plans(deepseek_with("ok.json", R"({"n_group": 8, "topk_group": 4})") + " --zero 1 --recompute full --pp 16 --ep 16");
}

}  // namespace

namespace {

// Class E: FSDP2's recipes run at ZeRO 3 only, fsdp2-bf16 as its FP8 siblings (planner/recipe.cpp).
TEST(OptionsApply, Fsdp2RecipesRunAtZero3Only) {
  for (const char* recipe : {"fsdp2-bf16", "fsdp2-fp8", "fsdp2-fp8-allgather"}) {
    refused(llama + "--gpu-type h100-80gb --recipe " + recipe + " --zero 1", "give --zero 3");
    plans(llama + "--gpu-type h100-80gb --recipe " + recipe + " --zero 3");
  }
}

}  // namespace

namespace {

// Issue 31: the first line of a search where nothing fits follows the bound the advice below it proves.
TEST(OptionsApply, NothingFitsSaysWhatTheBoundAllows) {
  const result state = run("plan --preset gpt3-175b --gpus 8 --suggest");
  EXPECT_EQ(state.status, 3);
  EXPECT_NE(state.out.find("nothing fits: add GPUs (state alone exceeds what each GPU leaves"), std::string::npos)
      << state.out;
  EXPECT_EQ(state.out.find("shorten the sequence"), std::string::npos) << state.out;
  const result activations = run("plan --preset llama3-8b --gpus 8 --gpu-type h100-80gb --suggest --seq 1048576");
  EXPECT_EQ(activations.status, 3);
  EXPECT_NE(activations.out.find("nothing fits: add GPUs, shorten the sequence, or cut the micro-batch"),
            std::string::npos)
      << activations.out;
  EXPECT_NE(activations.out.find("bound by activations"), std::string::npos) << activations.out;
}

}  // namespace
