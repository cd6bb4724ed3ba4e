// import_refusals_test.cpp: the launch importers' refusals and the fixes they name (issue 35): a misspelt key
// is an error naming the key it resembles, never "not modelled"; every refusal names a flag or a key that
// exists; and the ModelZoo runner's own settings (DISPATCHER, PP_FIRST / PP_LAST, ENV_VARS, the flags after
// the YAML) can be stated. Expected values are worked out here from the frameworks' rules, cited at each test.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "planner/errors.hpp"
#include "planner/imports/config_file.hpp"
#include "planner/imports/deepspeed_config.hpp"
#include "planner/imports/megatron_args.hpp"
#include "planner/imports/torchtitan_config.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

using nlohmann::json;

bool noted(const launch_import& l, const std::string& field, const std::string& value) {
  return std::any_of(l.derived.begin(), l.derived.end(),
                     [&](const import_note& n) { return n.field == field && n.value == value; });
}

bool listed(const std::vector<std::string>& v, const std::string& prefix) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.starts_with(prefix); });
}

std::string zoo(const std::string& name) {
  return std::string(HEADROOM_TEST_DATA) + "/megatron/" + name;
}

// Mixtral-8x7B.yaml's variables as runtime.conf gives them (ModelZoo @ e8650517), at pp 4 and ep 8.
std::map<std::string, std::string> mixtral_vars() {
  return {{"TP", "1"},
          {"PP", "4"},
          {"EP", "8"},
          {"CP", "1"},
          {"LAYERS_PER_VP", "4"},
          {"MBS", "1"},
          {"GBS", "256"},
          {"SEQ_LEN", "4096"},
          {"MOE_TOKEN_DISPATCHER", "alltoall"},
          {"MOE_GROUPED_GEMM", "true"}};
}

// ---- item 1: a near miss of a known key is an error naming it --------------------------------------------

TEST(ImportRefusals, NearMissIsTwoEditsAtMostAndOnePerTwoCharacters) {
  EXPECT_TRUE(detail::is_near_miss("stgae", "stage"));  // a transposition: 2 edits in 5 characters
  EXPECT_TRUE(detail::is_near_miss("tensor_paralel_degree", "tensor_parallel_degree"));
  EXPECT_FALSE(detail::is_near_miss("sequence_parallel_size", "sequence_parallel"));  // 5 edits: another key
  EXPECT_FALSE(detail::is_near_miss("ab", "cd"));  // 2 edits of 2 characters: everything
}

TEST(ImportRefusals, DeepSpeedTypoOfStageIsAnErrorNotZeroZero) {
  // Listed as not modelled, --allow-unmodelled would have planned ZeRO 0 for a ZeRO-2 file.
  const json typo = {{"train_micro_batch_size_per_gpu", 1}, {"zero_optimization", {{"stgae", 2}}}};
  const std::string e = test::bad_input_of([&] { deepspeed_config_from_json(typo, "ds.json", std::nullopt, 8); });
  EXPECT_NE(e.find("ds.json: zero_optimization.stgae: unknown key (did you mean 'zero_optimization.stage'?)"),
            std::string::npos)
      << e;
  const json top = {{"train_micro_batch_size_per_gpu", 1}, {"zero_optimisation", {{"stage", 2}}}};
  EXPECT_NE(test::bad_input_of([&] {
              deepspeed_config_from_json(top, "ds.json", std::nullopt, 8);
            }).find("did you mean 'zero_optimization'?"),
            std::string::npos);
}

TEST(ImportRefusals, TorchtitanTypoOfDegreeIsAnErrorNotTp1) {
  const std::string e = test::bad_input_of(
      [] { torchtitan_config_from_toml("[parallelism]\ntensor_paralel_degree = 8\n", "job.toml", {}, 64); });
  EXPECT_NE(e.find("job.toml: parallelism.tensor_paralel_degree: unknown key (did you mean "
                   "'parallelism.tensor_parallel_degree'?)"),
            std::string::npos)
      << e;
  EXPECT_NE(test::bad_input_of([] {
              torchtitan_config_from_toml("[parallelsim]\n", "job.toml", {}, 8);
            }).find("did you mean 'parallelism'?"),
            std::string::npos);
  // A key far from every known one stays listed, as it may be a setting of a later torchtitan.
  const launch_import far = torchtitan_config_from_toml("[mystery]\nx = 1\n", "job.toml", {}, 8);
  EXPECT_TRUE(listed(far.unmodelled, "mystery: unknown key"));
}

// ---- item 2: the vocabulary refusal names the launch's flag, and the variable a YAML leaves open -------------

TEST(ImportRefusals, VocabularyRefusalNamesTheLaunchFlagOrTheTokenizerVariable) {
  const std::string shape =
      "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --max-position-embeddings "
      "128 ";
  const std::string e = test::bad_input_of([&] { import_megatron_args(shape, "megatron arguments"); });
  EXPECT_NE(e.find("--vocab-size: not stated"), std::string::npos) << e;
  EXPECT_NE(e.find("to the Megatron arguments (pretrain_gpt.py's flags, not headroom's)"), std::string::npos)
      << e;
  const std::string yaml =
      "--num-layers: 2\n--hidden-size: 64\n--num-attention-heads: 4\n"
      "--tokenizer-type: HuggingFaceTokenizer\n--tokenizer-model: ${TOKENIZER_MODEL}\n";
  const std::string v = test::bad_input_of([&] { import_megatron_args(yaml, "m.yaml"); });
  EXPECT_NE(v.find("--megatron-var TOKENIZER_MODEL=deepseek-ai/DeepSeek-V3"), std::string::npos) << v;
  // ... and that fix works: DeepSeek-V3's vocabulary, 129,280, padded to 128 (build_tokenizer.py l.133-146).
  const auto fixed = import_megatron_args(yaml, "m.yaml", {{"TOKENIZER_MODEL", "deepseek-ai/DeepSeek-V3"}});
  ASSERT_TRUE(fixed.model);
  EXPECT_EQ(fixed.model->vocab, 129280);
}

// ---- item 3: --micro-batch fills an absent micro-batch; the refusals name the flags ------------------------

TEST(ImportRefusals, MicroBatchFillsAnAbsentTrainMicroBatch) {
  hf_trainer_args t;
  t.per_device_train_batch_size = 4;
  // Only the stage: DeepSpeed's rule with the micro-batch alone, gas 1 and train = 4 x 8 (runtime/config.py
  // l.978-980).
  const json bare = {{"zero_optimization", {{"stage", 2}}}};
  const launch_import a = deepspeed_config_from_json(bare, "ds.json", std::nullopt, 8, t);
  EXPECT_EQ(a.micro_batch, 4);
  EXPECT_EQ(a.global_batch, 32);
  EXPECT_TRUE(noted(a, "train_micro_batch_size_per_gpu", "4"));
  // train_batch_size 64 with the micro-batch 4 on 8 GPUs: gas = 64 / 4 / 8 = 2 (l.955-958).
  const json train = {{"train_batch_size", 64}, {"zero_optimization", {{"stage", 2}}}};
  const launch_import b = deepspeed_config_from_json(train, "ds.json", std::nullopt, 8, t);
  EXPECT_EQ(b.micro_batch, 4);
  EXPECT_EQ(b.global_batch, 64);
  EXPECT_TRUE(noted(b, "batch", "64 = 4 x 2 x 8"));
  // Without it, DeepSpeed's assertion (l.982-986), with the flag that answers it.
  EXPECT_NE(test::bad_input_of([&] {
              deepspeed_config_from_json(bare, "ds.json", std::nullopt, 8);
            }).find("pass --micro-batch N or write one"),
            std::string::npos);
}

TEST(ImportRefusals, AutoRefusalsNameTheHeadroomFlags) {
  const json precision = {{"train_micro_batch_size_per_gpu", 1}, {"bf16", {{"enabled", "auto"}}}};
  EXPECT_NE(test::bad_input_of([&] {
              deepspeed_config_from_json(precision, "ds.json", std::nullopt, 8);
            }).find("pass --trainer-precision bf16|fp16|fp32"),
            std::string::npos);
  const json gas = {{"train_micro_batch_size_per_gpu", 1}, {"gradient_accumulation_steps", "auto"}};
  EXPECT_NE(test::bad_input_of([&] {
              deepspeed_config_from_json(gas, "ds.json", std::nullopt, 8);
            }).find("pass --gradient-accumulation-steps N"),
            std::string::npos);
  const json micro = {{"train_micro_batch_size_per_gpu", "auto"}};
  EXPECT_NE(test::bad_input_of([&] {
              deepspeed_config_from_json(micro, "ds.json", std::nullopt, 8);
            }).find("pass --micro-batch N"),
            std::string::npos);
}

// ---- item 4: Megatron's pipeline split ----------------------------------------------------------------

const std::string dsv3_shape =
    "--num-layers 61 --hidden-size 1024 --num-attention-heads 8 --vocab-size 32000 --seq-length 1024 "
    "--max-position-embeddings 1024 --pipeline-model-parallel-size 4 ";

TEST(ImportRefusals, UnevenMegatronSplitIsStatedAsMegatronBuildsIt) {
  // transformer_block.py l.103-146: the first stage takes 16, the three others share 45 evenly.
  const auto l = import_megatron_args(dsv3_shape + "--decoder-first-pipeline-num-layers 16", "m");
  EXPECT_TRUE(noted(l, "split.layers", "16/15/15/15"));
  EXPECT_FALSE(l.needs_even_split);
  // 61 - 15 = 46 over 3 stages does not divide (l.130-133); nor may account-for-* join them (l.108-112).
  EXPECT_NE(test::bad_input_of([] {
              import_megatron_args(dsv3_shape + "--decoder-first-pipeline-num-layers 15", "m");
            }).find("must share them evenly"),
            std::string::npos);
  EXPECT_NE(test::bad_input_of([] {
              import_megatron_args(dsv3_shape +
                                       "--decoder-first-pipeline-num-layers 16 "
                                       "--account-for-loss-in-pipeline-split",
                                   "m");
            }).find("transformer_block.py l.108-112"),
            std::string::npos);
  // No split flags: the CLI refuses a pp that does not divide (arguments.py l.985-998).
  EXPECT_TRUE(import_megatron_args(dsv3_shape, "m").needs_even_split);
}

TEST(ImportRefusals, ModelZooPpFirstAndPpLastAppendTheUnevenFlags) {
  // sbatch_benchmarking.sh l.63-67 with runtime.conf's DeepSeek-V3 row: PP 16, PP_FIRST 4, PP_LAST 1.
  std::map<std::string, std::string> env = {
      {"TP", "1"},       {"PP", "16"},    {"EP", "64"},        {"CP", "1"},
      {"MBS", "1"},      {"GBS", "8192"}, {"SEQ_LEN", "4096"}, {"MOE_GROUPED_GEMM", "true"},
      {"PP_FIRST", "4"}, {"PP_LAST", "1"}};
  const auto l = load_megatron_args(zoo("DeepSeek-V3.yaml"), env);
  ASSERT_TRUE(l.split);
  EXPECT_EQ(l.split->first_stage, 4);
  EXPECT_EQ(l.split->last_stage, 1);
  EXPECT_TRUE(noted(l, "split.layers", "4/4/4/4/4/4/4/4/4/4/4/4/4/4/4/1"));
}

// ---- item 6: the ModelZoo runner ---------------------------------------------------------------------

// best_practice/qwen3/run_h100_235b.sh @ e8650517 l.27, with the variables before it (l.1-24 shortened).
const std::string run_h100 =
    "export MODEL=${MODEL:-Qwen3-235B-A22B}\nexport MBS=1\nexport SEQ_LEN=4096\n"
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True NCCL_GRAPH_REGISTER=0 DISPATCHER=deepep A2A_OVERLAP=1 "
    "TP=2 "
    "PP=8 VPP=4 EP=32 NNODES=32 GBS=2048 bash ./sbatch_benchmarking.sh --recompute-granularity selective "
    "--recompute-modules moe_act layernorm --moe-router-force-load-balancing --cuda-graph-impl "
    "transformer_engine "
    "--cuda-graph-scope moe_router moe_preprocess\n";

TEST(ImportRefusals, WrapperScriptPointsToTheYamlItLaunches) {
  const std::string e = test::bad_input_of([] { import_megatron_args(run_h100, "run_h100_235b.sh"); });
  EXPECT_NE(e.find("line 4 runs sbatch_benchmarking.sh, which launches "
                   "model_configs/benchmarking/Qwen3-235B-A22B.yaml"),
            std::string::npos)
      << e;
  EXPECT_NE(
      e.find("--megatron-args \"THAT.yaml --flag ...\" (its 5 flags), --megatron-var NAME=VALUE for the 10 "
             "variables it sets"),
      std::string::npos)
      << e;
  EXPECT_LE(e.size() + std::string("headroom: bad input: ").size(), 280u) << e;
  const std::string other = test::bad_input_of([] { import_megatron_args("bash ./train.sh --tp 2\n", "run.sh"); });
  EXPECT_NE(other.find("run.sh: line 1 runs train.sh with 1 flag, not pretrain_gpt.py"), std::string::npos)
      << other;
  EXPECT_NE(test::bad_input_of([] {
              import_megatron_args("echo hello\n", "run.sh");
            }).find("give --megatron-args the script"),
            std::string::npos);
}

TEST(ImportRefusals, FlagsAfterTheYamlAreAppendedAsTheRunnerDoes) {
  const auto l = load_megatron_args(
      zoo("Mixtral-8x7B.yaml") +
          " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 --micro-batch-size 2",
      mixtral_vars());
  EXPECT_EQ(l.recompute, recompute_mode::full);
  EXPECT_EQ(l.micro_batch, 2);  // after the YAML's --micro-batch-size ${MBS}: argparse keeps the last
  EXPECT_EQ(l.origin, zoo("Mixtral-8x7B.yaml"));
}

TEST(ImportRefusals, YamlSwitchWithAWrongValueSaysTrueOrFalse) {
  const std::string e = test::bad_input_of([] { import_megatron_args("--sequence-parallel: ture\n", "m.yaml"); });
  EXPECT_NE(
      e.find("--sequence-parallel: is a switch: write true or false in the YAML, got 'ture' (did you mean "
             "'true'?)"),
      std::string::npos)
      << e;
  EXPECT_NE(test::bad_input_of([] { import_megatron_args("--sequence-parallel yes", "m"); }).find("remove the value"),
            std::string::npos);
}

TEST(ImportRefusals, YamlEnvVarsReachTheLaunch) {
  const auto l = load_megatron_args(zoo("Mixtral-8x7B.yaml"), mixtral_vars());
  EXPECT_EQ(l.alloc_conf, "expandable_segments:True");
  EXPECT_TRUE(noted(l, "PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"));
  const auto script = import_megatron_args(
      "export PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512\ntorchrun pretrain_gpt.py "
      "--tensor-model-parallel-size 2\n",
      "s.sh");
  EXPECT_EQ(script.alloc_conf, "max_split_size_mb:512");
}

TEST(ImportRefusals, YamlDispatcherIsStatedAsTheRunnerAppendsIt) {
  // sbatch_benchmarking.sh l.75-82: deepep is flex with the deepep backend, priced as alltoall and listed.
  auto env = mixtral_vars();
  env["DISPATCHER"] = "deepep";
  const auto l = load_megatron_args(zoo("Mixtral-8x7B.yaml"), env);
  EXPECT_EQ(l.dispatcher, "alltoall");
  EXPECT_TRUE(listed(l.unmodelled, "--moe-token-dispatcher-type: flex: the deepep backend"));
  env["DISPATCHER"] = "alltoall";
  EXPECT_TRUE(load_megatron_args(zoo("Mixtral-8x7B.yaml"), env).unmodelled.empty());
  env["DISPATCHER"] = "nccl";
  EXPECT_NE(test::bad_input_of([&] { load_megatron_args(zoo("Mixtral-8x7B.yaml"), env); })
                .find("--megatron-var DISPATCHER: 'nccl' is not one sbatch_benchmarking.sh knows: alltoall, "
                      "deepep or hybridep"),
            std::string::npos);
}

}  // namespace
}  // namespace headroom
