// cli_import_fixes_test.cpp: the launch importers through the built `headroom` (issue 35): each refusal is one
// line naming the file, the field and a fix that exists, and that fix, run, plans. The files are the copies of
// public launch files in tests/data/ (each folder names its sources), or the few lines a test writes.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_support.hpp"

namespace {

// Asserts that `r` is one bad-input refusal (exit 2, one line of at most 280 characters) holding `says`.
void refused_with(const result& r, const std::string& says) {
  EXPECT_EQ(r.status, 2) << r.err << r.out;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_LE(r.err.size(), 281u) << r.err;  // 280 and the newline
  EXPECT_NE(r.err.find(says), std::string::npos) << "wanted '" << says << "' in: " << r.err;
}

// Asserts that `r` planned: fits (0) or does not fit (3), not refused.
void planned(const result& r) {
  EXPECT_TRUE(r.status == 0 || r.status == 3) << r.status << " " << r.err;
}

std::string written(const std::string& name, const std::string& text) {
  const std::string p = scratch(name);
  std::ofstream(p) << text;
  return p;
}

// Item 5: torchtitan's per-op policy where it is not priced: FP8 linear layers (torch._scaled_mm is not on its
// save list). A float8 Llama 3 8B job file with selective_ac_option "op".
std::string op_fp8_titan() {
  return "plan --torchtitan-config " +
         written("op_fp8.toml",
                 "[model]\nname = \"llama3\"\nflavor = \"8B\"\nconverters = [\"quantize.linear.float8\"]\n"
                 "[training]\nlocal_batch_size = 1\nseq_len = 8192\n"
                 "[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = \"op\"\n") +
         " --gpus 8 --gpu-type h100-80gb ";
}

TEST(CliImportFixes, PerOpPolicyWhereUnpricedNamesRecomputeAndTheOverride) {
  const std::string titan = op_fp8_titan();
  refused_with(run(titan),
               "op_fp8.toml: activation_checkpoint.selective_ac_option: \"op\" is not modelled for "
               "FP8 linear layers: --torchtitan-override activation_checkpoint.mode=full (or none, or "
               "selective_ac_option=N), or --allow-unmodelled");
  // The command line's --recompute contradicts the file's policy: refused, not planned over it (issue 34, A).
  // The refusal spells the change as the launch makes it (cli/launch_levers.cpp, launch_change).
  refused_with(run(titan + "--recompute full"), "drop --recompute to plan the file's, or --torchtitan-override "
                                                "activation_checkpoint.mode=full");
  planned(run(titan + "--torchtitan-override activation_checkpoint.mode=full"));
  const result allowed = run(titan + "--allow-unmodelled --explain");
  planned(allowed);
  EXPECT_NE(allowed.out.find(
                "NOT MODELLED (allowed by --allow-unmodelled): activation_checkpoint.selective_ac_option"),
            std::string::npos)
      << allowed.out;
  EXPECT_NE(allowed.out.find("ZeRO-3 + no recompute"), std::string::npos) << allowed.out;
}

const std::string layers61 =
    "--num-layers 61 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
    "--max-position-embeddings 4096 --vocab-size 32000 --micro-batch-size 1 --global-batch-size 64 --bf16 "
    "--use-distributed-optimizer ";

// Item 4: 61 layers on pp 4, as Megatron does (arguments.py l.985-998; transformer_block.py l.103-146).
TEST(CliImportFixes, LayersThatDoNotDivideOverPpAreRefusedAsMegatronDoes) {
  const std::string at = "plan --gpu-type h100-80gb --gpus 8 --megatron-args \"" + layers61;
  refused_with(
      run(at + "--pipeline-model-parallel-size 4\""),
      "megatron arguments: --num-layers: 61 layers do not divide over pp 4, as Megatron requires "
      "(arguments.py l.985-998): add --decoder-first/last-pipeline-num-layers N (a YAML: --megatron-var "
      "PP_FIRST=N PP_LAST=N) or --first-stage-layers N");
  const result uneven =
      run(at + "--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 16\" --explain");
  planned(uneven);
  EXPECT_NE(uneven.out.find("split.layers = 16/15/15/15"), std::string::npos) << uneven.out;
  const result j =
      run(at + "--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 16\" --json");
  planned(j);
  std::vector<std::int64_t> per_stage;
  const auto doc = nlohmann::json::parse(j.out);
  for (const auto& s : doc["stages"]) per_stage.push_back(s["layers"].get<std::int64_t>());
  EXPECT_EQ(per_stage, (std::vector<std::int64_t>{16, 15, 15, 15}));
  // A --pp over the launch is checked too, and --first-stage-layers states the split here.
  refused_with(run(at + "\" --pp 4"), "61 layers do not divide over pp 4");
  planned(run(at + "\" --pp 4 --first-stage-layers 16"));
  // ModelZoo's DeepSeek-V3 on pp 16 (runtime.conf: PP_FIRST 4, PP_LAST 1, which sbatch_benchmarking.sh appends).
  const std::string zoo =
      "plan --gpu-type h100-80gb --gpus 1024 --allow-unmodelled --megatron-args " + data +
      "/megatron/DeepSeek-V3.yaml --megatron-var TP=1 --megatron-var PP=16 --megatron-var EP=64 "
      "--megatron-var CP=1 --megatron-var MBS=1 --megatron-var GBS=8192 --megatron-var "
      "SEQ_LEN=4096 --megatron-var MOE_GROUPED_GEMM=true";
  refused_with(run(zoo), "--num-layers: 61 layers do not divide over pp 16");
  const result split = run(zoo + " --megatron-var PP_FIRST=4 --megatron-var PP_LAST=1 --json");
  planned(split);
  const auto stages = nlohmann::json::parse(split.out)["stages"];
  ASSERT_EQ(stages.size(), 16u);
  EXPECT_EQ(stages[0]["layers"], 4);
  EXPECT_EQ(stages[14]["layers"], 4);
  EXPECT_EQ(stages[15]["layers"], 1);
}

// Item 3: --micro-batch fills a DeepSpeed config's absent micro-batch; the refusal names it.
TEST(CliImportFixes, MicroBatchFillsAnAbsentDeepSpeedMicroBatch) {
  const std::string ds =
      written("stage2.json", R"({"zero_optimization": {"stage": 2}, "bf16": {"enabled": true}})");
  const std::string at = "plan --preset llama2-7b --gpu-type h100-80gb --gpus 8 --deepspeed-config " + ds;
  refused_with(run(at),
               "stage2.json: train_batch_size: neither train_batch_size nor train_micro_batch_size_per_gpu "
               "is given (DeepSpeed requires one, runtime/config.py l.982-986); pass --micro-batch N");
  const result r = run(at + " --micro-batch 2");
  planned(r);
  EXPECT_NE(r.out.find("micro-batch 2"), std::string::npos) << r.out;
  const std::string autos =
      written("auto.json", R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": "auto"}})");
  refused_with(run("plan --preset llama2-7b --gpus 8 --deepspeed-config " + autos),
               "bf16.enabled: \"auto\" is the Hugging Face Trainer's --bf16/--fp16, not known here; pass "
               "--trainer-precision bf16|fp16|fp32");
}

// Item 1: a misspelt key is an error whatever --allow-unmodelled says.
TEST(CliImportFixes, MisspeltKeysAreRefusedEvenWithAllowUnmodelled) {
  const std::string ds =
      written("typo.json", R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stgae": 2}})");
  refused_with(run("plan --preset llama2-7b --gpus 8 --allow-unmodelled --deepspeed-config " + ds),
               "typo.json: zero_optimization.stgae: unknown key (did you mean 'zero_optimization.stage'?)");
  const std::string toml = written("typo.toml", "[parallelism]\ntensor_paralel_degree = 8\n");
  refused_with(run("plan --preset llama3-8b --gpus 8 --allow-unmodelled --torchtitan-config " + toml),
               "typo.toml: parallelism.tensor_paralel_degree: unknown key (did you mean "
               "'parallelism.tensor_parallel_degree'?)");
}

const std::string mixtral_vars =
    " --megatron-var TP=1 --megatron-var PP=4 --megatron-var EP=8 --megatron-var CP=1 --megatron-var "
    "LAYERS_PER_VP=4 "
    "--megatron-var MBS=1 --megatron-var GBS=256 --megatron-var SEQ_LEN=4096 --megatron-var "
    "MOE_GROUPED_GEMM=true ";

// Item 6: the ModelZoo runner: ENV_VARS in the assumptions, DISPATCHER, the flags after the YAML, wrappers.
TEST(CliImportFixes, ModelZooYamlStatesWhatItsRunnerSets) {
  const std::string yaml = data + "/megatron/Mixtral-8x7B.yaml";
  const std::string at = "plan --gpu-type h100-80gb --gpus 64 --megatron-args ";
  const result r = run(at + yaml + mixtral_vars + "--megatron-var MOE_TOKEN_DISPATCHER=alltoall");
  planned(r);
  EXPECT_NE(r.out.find("  allocator   PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, from " + yaml),
            std::string::npos)
      << r.out;
  // DISPATCHER=deepep appends flex with the deepep backend (sbatch_benchmarking.sh l.75-82): listed, not priced.
  refused_with(run(at + yaml + mixtral_vars +
                   "--megatron-var MOE_TOKEN_DISPATCHER=alltoall --megatron-var DISPATCHER=deepep"),
               "--moe-token-dispatcher-type changes memory and is not modelled");
  planned(run(at + "\"" + yaml + " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1\"" +
              mixtral_vars +
              "--megatron-var MOE_TOKEN_DISPATCHER=alltoall"));
  refused_with(
      run(at + written("bad.yaml", "--num-layers: 2\n--sequence-parallel: ture\n")),
      "--sequence-parallel: is a switch: write true or false in the YAML, got 'ture' (did you mean 'true'?)");
  const std::string wrapper =
      written("r.sh",
              "export MODEL=${MODEL:-Qwen3-235B-A22B}\nPYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
              "DISPATCHER=deepep "
              "TP=2 PP=8 VPP=4 EP=32 NNODES=32 GBS=2048 bash ./sbatch_benchmarking.sh "
              "--recompute-granularity selective "
              "--recompute-modules moe_act layernorm\n");
  refused_with(run(at + wrapper),
               "line 2 runs sbatch_benchmarking.sh, which launches "
               "model_configs/benchmarking/Qwen3-235B-A22B.yaml: give --megatron-args");
}

// A setting a Megatron launch leaves to its default (attention: TE's fused kernels) is still the launch's: a
// contradicting flag is refused with the Megatron flag that changes it, and that flag, appended, plans.
TEST(CliImportFixes, AttentionAgainstAMegatronLaunchNamesItsBackendFlag) {
  const std::string args =
      "--num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 --max-position-embeddings 1024 "
      "--micro-batch-size 1 --global-batch-size 8 --vocab-size 32000 --bf16";
  const std::string at = "plan --gpus 8 --megatron-args \"" + args;
  refused_with(run(at + "\" --attention eager"),
               "drop --attention to plan the file's, or append --attention-backend unfused to --megatron-args");
  const result appended = run(at + " --attention-backend unfused\" --attention eager");
  planned(appended);
  EXPECT_NE(appended.out.find("eager attention"), std::string::npos) << appended.out;
}

}  // namespace

namespace {

// Under a pipeline torchtitan's micro-batch is parallelism.pipeline_parallel_microbatch_size (local_batch_size is
// the rank's batch the schedule splits): the refusal of a contradicting --micro-batch spells it so, and the
// spelled override plans the micro-batch asked for.
TEST(CliImportFixes, TorchtitanMicroBatchUnderAPipelineIsTheScheduleKey) {
  const std::string titan = "plan --torchtitan-config " + data + "/torchtitan/llama3_8b_2025-06.toml --gpus 16 ";
  const std::string pp2 = "--torchtitan-override parallelism.pipeline_parallel_degree=2 ";
  refused_with(run(titan + pp2 + "--micro-batch 2"),
               "drop --micro-batch to plan the file's, or --torchtitan-override "
               "parallelism.pipeline_parallel_microbatch_size=2");
  // (torchtitan's local batch must be a multiple of the pipeline's micro-batch: job_config.py, as the importer checks.)
  const result fixed = run(titan + pp2 + "--torchtitan-override parallelism.pipeline_parallel_microbatch_size=2 "
                           "--torchtitan-override training.local_batch_size=4");
  EXPECT_NE(fixed.out.find("micro-batch 2"), std::string::npos) << fixed.out << fixed.err;
  refused_with(run(titan + "--micro-batch 2"),
               "drop --micro-batch to plan the file's, or --torchtitan-override training.local_batch_size=2");
}

}  // namespace

namespace {

// Megatron takes one of --pipeline-model-parallel-layout, --num-layers-per-virtual-pipeline-stage and
// --num-virtual-stages-per-pipeline-rank (arguments.py): a vpp change under a launch stating vpp by layers per
// virtual stage drops that flag for the one it appends, and the launch so changed plans the vpp asked for.
TEST(CliImportFixes, AVppChangeDropsTheLaunchsOwnVppFlag) {
  const std::string args = "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
                           "--max-position-embeddings 4096 --vocab-size 32000 --micro-batch-size 1 "
                           "--global-batch-size 64 --bf16 --use-distributed-optimizer --pipeline-model-parallel-size 2 ";
  refused_with(run("plan --gpus 8 --megatron-args \"" + args + "--num-layers-per-virtual-pipeline-stage 4\" --vpp 2"),
               "append --num-virtual-stages-per-pipeline-rank 2 to --megatron-args and drop "
               "--num-layers-per-virtual-pipeline-stage from it");
  const result changed = run("plan --gpus 8 --megatron-args \"" + args + "--num-virtual-stages-per-pipeline-rank 2\"");
  planned(changed);
  EXPECT_NE(changed.out.find("vpp=2"), std::string::npos) << changed.out;
  // A launch stating vpp by the flag appended: nothing to drop.
  const result same = run("plan --gpus 8 --megatron-args \"" + args + "--num-virtual-stages-per-pipeline-rank 4\" --vpp 2");
  refused_with(same, "or append --num-virtual-stages-per-pipeline-rank 2 to --megatron-args");
  EXPECT_EQ(same.err.find("and drop"), std::string::npos) << same.err;
}

}  // namespace

namespace {

// A layout refusal of a setting the launch states (ep 8 does not divide 12 ranks: planner/layout.cpp) names the
// launch file and how to change the setting there, in one line.
TEST(CliImportFixes, ALayoutRefusalNamesTheLaunchAndItsChange) {
  const std::string qwen =
      "plan --megatron-args " + data + "/megatron/Qwen3-30B-A3B.yaml --megatron-var TP=1 --megatron-var PP=1 "
      "--megatron-var EP=8 --megatron-var CP=1 --megatron-var LAYERS_PER_VP=false --megatron-var MBS=1 "
      "--megatron-var GBS=256 --megatron-var SEQ_LEN=4096 --megatron-var MOE_TOKEN_DISPATCHER=alltoall "
      "--megatron-var MOE_GROUPED_GEMM=true --gpu-type h100-80gb ";
  refused_with(run(qwen + "--gpus 12"), "Qwen3-30B-A3B.yaml: ep: ep x expert tp = 8 does not divide dp*tp*cp = 12");
  refused_with(run(qwen + "--gpus 12"),
               "(the launch's --ep): plan another --gpus, or append --expert-model-parallel-size N to --megatron-args");
  // Without a launch the planner's own line stands.
  const result plain = run("plan --hf-config " + data + "/hf/qwen3-30b-a3b.json --gpus 12 --ep 8");
  EXPECT_EQ(plain.status, 2);
  EXPECT_EQ(plain.err.find("the launch's"), std::string::npos) << plain.err;
}

}  // namespace

namespace {

// A Megatron launch with --cross-entropy-loss-fusion plans the compiled loss (10 bytes per logit), and the
// command line's --loss may not contradict it: the refusal names the launch's own flag to drop or append, and
// that launch, run, plans the other loss.
TEST(ImportFixes, MegatronLossFusionIsTheCompiledLossAndItsFixesPlan) {
  const std::string model =
      "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --vocab-size 1000 "
      "--seq-length 128 --micro-batch-size 2 --bf16";
  const std::string tail = " --gpus 1 --gpu-mem 80 --json";
  const auto fused = run("plan --megatron-args \"" + model + " --cross-entropy-loss-fusion\"" + tail);
  planned(fused);
  const auto j = nlohmann::json::parse(fused.out);
  EXPECT_EQ(j["training"]["loss"], "compiled");
  // 128 x 2 tokens x 1024 columns (1000 padded to Megatron's multiple of 128) x (4 softmax + 4 the compiled
  // result + 2 gradient) + 13 bytes a token.
  EXPECT_EQ(j["stages"][0]["output_phase_bytes"], 128 * 2 * 1024 * 10 + 128 * 2 * 13);
  refused_with(run("plan --megatron-args \"" + model + " --cross-entropy-loss-fusion\" --loss fused" + tail),
               "drop --cross-entropy-loss-fusion from --megatron-args");
  refused_with(run("plan --megatron-args \"" + model + "\" --loss compiled" + tail),
               "append --cross-entropy-loss-fusion --cross-entropy-fusion-impl native to --megatron-args");
  const auto native = run("plan --megatron-args \"" + model +
                          " --cross-entropy-loss-fusion --cross-entropy-fusion-impl native\"" + tail);
  planned(native);
  EXPECT_EQ(nlohmann::json::parse(native.out)["training"]["loss"], "compiled");
  refused_with(run("plan --megatron-args \"" + model +
                   " --cross-entropy-loss-fusion --cross-entropy-fusion-impl cudnn\"" + tail),
               "--cross-entropy-fusion-impl");
}

}  // namespace
