// deepspeed_config_test.cpp: the DeepSpeed JSON importer on real configs (tests/data/deepspeed/SOURCES.md
// names each file's repository, path and commit) and on hostile input. Expected numbers are worked out
// here from DeepSpeed's and transformers' rules, cited at each test.
#include "planner/imports/deepspeed_config.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "planner/errors.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

std::string deepspeed_data(const std::string& name) {
  return std::string(HEADROOM_TEST_DATA) + "/deepspeed/" + name;
}

bool has_prefix(const std::vector<std::string>& v, const std::string& prefix) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.rfind(prefix, 0) == 0; });
}

launch_import from(const nlohmann::json& j, std::optional<int> world = std::nullopt,
                   std::optional<std::int64_t> hidden = std::nullopt, const hf_trainer_args& t = {}) {
  return deepspeed_config_from_json(j, "test.json", hidden, world, t);
}

TEST(DeepSpeedConfig, HuggingFaceZero3FillsAutoFromHiddenAndTrainer) {
  // huggingface/transformers:tests/deepspeed/ds_config_zero3.json: every size "auto". With h = 4096 the Trainer writes
  // reduce_bucket_size = h^2 and, under ZeRO-3, prefetch = int(0.9 h^2), persistence = 10 h.
  hf_trainer_args t{4, 2, "fp16"};
  const launch_import imp = load_deepspeed_config(deepspeed_data("hf_ds_config_zero3.json"), 4096, 8, t);
  EXPECT_EQ(imp.zero, 3);
  EXPECT_EQ(imp.offload_optimizer, true);
  EXPECT_EQ(imp.offload_params, true);
  EXPECT_EQ(imp.recipe, "fp16-adam");
  // ZeRO-3 keeps one contiguous reduce bucket even with overlap_comm (stage3.py l.731-735).
  EXPECT_EQ(imp.reduce_bucket, 4096LL * 4096);
  EXPECT_EQ(imp.zero3_prefetch_bucket, 15099494);   // 0.9 * 16777216 = 15099494.4
  EXPECT_EQ(imp.zero3_live_params, 1'000'000'000);  // written 1e9
  EXPECT_EQ(imp.micro_batch, 4);
  EXPECT_EQ(imp.global_batch, 4 * 2 * 8);
  EXPECT_EQ(imp.gpus, 8);
  // With the optimizer offloaded, sub_group_size does not size a GPU buffer.
  EXPECT_TRUE(imp.unmodelled.empty()) << imp.unmodelled.front();
  EXPECT_TRUE(has_prefix(imp.unused, "zero_optimization.sub_group_size"));
  EXPECT_TRUE(has_prefix(imp.unused, "scheduler"));
  EXPECT_TRUE(std::any_of(imp.derived.begin(), imp.derived.end(), [](const import_note& n) {
    return n.field == "stage3_param_persistence_threshold" && n.value == "40960";
  }));
}

TEST(DeepSpeedConfig, AutoThatCannotBeFilledIsRefusedNamingTheKey) {
  const std::string f = deepspeed_data("hf_ds_config_zero3.json");
  EXPECT_NE(test::bad_input_of([&] {
              load_deepspeed_config(f, std::nullopt, 8, {4, 2, "fp16"});
            }).find("zero_optimization.reduce_bucket_size: \"auto\""),
            std::string::npos);
  EXPECT_NE(test::bad_input_of([&] {
              load_deepspeed_config(f, 4096, 8, {4, 2, std::nullopt});
            }).find("fp16.enabled"),
            std::string::npos);
  const std::string e = test::bad_input_of([&] { load_deepspeed_config(f, 4096, 8, {std::nullopt, 2, "fp16"}); });
  EXPECT_NE(e.find("train_micro_batch_size_per_gpu"), std::string::npos) << e;
  EXPECT_NE(e.find("--micro-batch"), std::string::npos) << e;
}

TEST(DeepSpeedConfig, HuggingFaceZero2DoubleBuffersTheReduceBucket) {
  // ds_config_zero2.json: stage 2, overlap_comm and contiguous_gradients on, reduce_bucket_size 2e8:
  // two flat buffers (stage_1_and_2.py l.2497-2513).
  const launch_import imp =
      load_deepspeed_config(deepspeed_data("hf_ds_config_zero2.json"), std::nullopt, 4, {1, 1, "fp16"});
  EXPECT_EQ(imp.zero, 2);
  EXPECT_EQ(imp.reduce_bucket, 2 * 200'000'000LL);
  EXPECT_EQ(imp.allgather_bucket, 200'000'000);
  EXPECT_EQ(imp.offload_optimizer, true);
  EXPECT_EQ(imp.offload_params, false);
  EXPECT_EQ(imp.global_batch, 4);
}

TEST(DeepSpeedConfig, OldBfloat16SectionNameIsRead) {
  // ds_config_zero3_bf16.json writes "bfloat16" (the old name of "bf16", precision_config.py l.34-38);
  // bf16 under ZeRO-3 accumulates gradients in bf16: the 16-byte bf16-adam recipe.
  const launch_import imp =
      load_deepspeed_config(deepspeed_data("hf_ds_config_zero3_bf16.json"), 5120, 16, {1, 8, "bf16"});
  EXPECT_EQ(imp.recipe, "bf16-adam");
  EXPECT_EQ(imp.global_batch, 1 * 8 * 16);
}

TEST(DeepSpeedConfig, MegatronGpt2Zero2WithAccumulation) {
  // ds_config_func_bs8_zero2_gas3.json: micro 8, accumulation 3; on 4 GPUs train_batch = 8 x 3 x 4 = 96.
  // overlap_comm defaults to off below ZeRO-3 (zero/config.py l.383-386): one 7e6 bucket.
  const launch_import imp =
      load_deepspeed_config(deepspeed_data("ds_config_func_bs8_zero2_gas3.json"), std::nullopt, 4);
  EXPECT_EQ(imp.micro_batch, 8);
  EXPECT_EQ(imp.global_batch, 96);
  EXPECT_EQ(imp.recipe, "fp16-adam");
  EXPECT_EQ(imp.reduce_bucket, 7'000'000);
  EXPECT_TRUE(has_prefix(imp.unmodelled, "activation_checkpointing.partition_activations"));
  EXPECT_TRUE(has_prefix(imp.unmodelled, "activation_checkpointing.contiguous_memory_optimization"));
}

TEST(DeepSpeedConfig, DeprecatedCpuOffloadAndTrainBatchOnly) {
  // ds_config_func_bs4_zero2_offload.json: train_batch 4, accumulation 1, "cpu_offload": true (the old
  // spelling of offload_optimizer {device: cpu}). On 4 GPUs micro = 4 / (1 x 4) = 1.
  const std::string f = deepspeed_data("ds_config_func_bs4_zero2_offload.json");
  const launch_import imp = load_deepspeed_config(f, std::nullopt, 4);
  EXPECT_EQ(imp.offload_optimizer, true);
  EXPECT_EQ(imp.micro_batch, 1);
  EXPECT_EQ(imp.reduce_bucket, 7'000'000);  // offload forces contiguous_gradients (stage_1_and_2.py l.260)
  // 4 sequences cannot be split over 3 GPUs: DeepSpeed's assertion (runtime/config.py l.937-940).
  EXPECT_NE(test::bad_input_of([&] { load_deepspeed_config(f, std::nullopt, 3); }).find("train_batch_size"),
            std::string::npos);
}

TEST(DeepSpeedConfig, Zero3WithoutContiguousGradientsHasNoBucketAndDefaults) {
  // deepspeedai/DeepSpeed:tests/torch_compile/ds_config_z3.json: bf16, ZeRO-3, contiguous_gradients false; the stage 3
  // sizes are not written, so DeepSpeed's defaults apply (zero/config.py l.215, l.238).
  const launch_import imp = load_deepspeed_config(deepspeed_data("ds_config_z3.json"), std::nullopt, 8);
  EXPECT_EQ(imp.reduce_bucket, 0);
  EXPECT_EQ(imp.zero3_prefetch_bucket, 50'000'000);
  EXPECT_EQ(imp.zero3_live_params, 1'000'000'000);
  EXPECT_EQ(imp.micro_batch, 1);  // train_batch 8 alone on 8 GPUs: accumulation 1
  EXPECT_EQ(imp.recipe, "bf16-adam");
  EXPECT_TRUE(has_prefix(imp.unused, "optimizer.type"));
}

TEST(DeepSpeedConfig, DoubleSpelledNumbersAndStage3OnlyKeys) {
  // DeepSpeed examples/sdma_allgather/ds_config_zero3.json: 5e7 and 1e9 written as doubles;
  // allgather_bucket_size is not read by ZeRO-3; sub_group_size 1e12 sizes an fp32 transient there.
  const launch_import imp = load_deepspeed_config(deepspeed_data("ds_sdma_allgather_zero3.json"), std::nullopt, 2);
  EXPECT_EQ(imp.zero3_prefetch_bucket, 50'000'000);
  EXPECT_EQ(imp.reduce_bucket, 50'000'000);
  EXPECT_FALSE(imp.allgather_bucket.has_value());
  EXPECT_TRUE(has_prefix(imp.unused, "zero_optimization.allgather_bucket_size"));
  EXPECT_TRUE(has_prefix(imp.unmodelled, "zero_optimization.sub_group_size"));
  EXPECT_EQ(imp.global_batch, 2);
}

TEST(DeepSpeedConfig, BatchTieDerivesAndRefuses) {
  using nlohmann::json;
  const json three = {
      {"train_batch_size", 40}, {"train_micro_batch_size_per_gpu", 2}, {"gradient_accumulation_steps", 5}};
  EXPECT_EQ(from(three, 4).global_batch, 40);  // 2 x 5 x 4
  EXPECT_NE(test::bad_input_of([&] { from(three, 8); }).find("40 != 2 x 5 x 8"), std::string::npos);
  EXPECT_EQ(from(three).dp, 4);  // no world size: the three give the data-parallel size
  const json two = {{"train_batch_size", 64}, {"train_micro_batch_size_per_gpu", 4}};
  const launch_import imp = from(two, 8);  // accumulation = 64 / (4 x 8) = 2
  EXPECT_TRUE(std::any_of(imp.derived.begin(), imp.derived.end(), [](const import_note& n) {
    return n.field == "batch" && n.value == "64 = 4 x 2 x 8";
  }));
  EXPECT_NE(test::bad_input_of([&] {
              from(json{{"gradient_accumulation_steps", 2}}, 8);
            }).find("neither"),
            std::string::npos);
  EXPECT_NE(test::bad_input_of([&] {
              from(json{{"train_batch_size", 0}}, 8);
            }).find("train_batch_size"),
            std::string::npos);
}

TEST(DeepSpeedConfig, RecipeFollowsTheEnginesChoice) {
  using nlohmann::json;
  const json base = {{"train_micro_batch_size_per_gpu", 1}};
  json bf16_z1 = base;
  bf16_z1["bf16"] = {{"enabled", true}};
  bf16_z1["zero_optimization"] = {{"stage", 1}};
  EXPECT_EQ(from(bf16_z1, 8).recipe, "bf16-adam");
  bf16_z1["data_types"] = {{"grad_accum_dtype", "fp32"}};  // BF16_Optimizer (engine.py l.1994-1996)
  EXPECT_EQ(from(bf16_z1, 8).recipe, "deepspeed-bf16");
  EXPECT_EQ(from(base, 8).recipe, "fp32-adam");
  json both = base;
  both["bf16"] = {{"enabled", true}};
  both["fp16"] = {{"enabled", true}};
  EXPECT_NE(test::bad_input_of([&] { from(both, 8); }).find("both"), std::string::npos);
  json lamb = base;
  lamb["optimizer"] = {{"type", "Lamb"}};
  EXPECT_TRUE(has_prefix(from(lamb, 8).unmodelled, "optimizer.type: lamb"));
}

TEST(DeepSpeedConfig, AliasesDeprecationsAndUnknownKeys) {
  using nlohmann::json;
  json j = {{"train_micro_batch_size_per_gpu", 1},
            {"zero_optimization",
             {{"stage", 3}, {"max_live_parameters", 3e8}, {"offload_param", {{"device", "nvme"}}}}}};
  launch_import imp = from(j, 8);
  EXPECT_EQ(imp.zero3_live_params, 300'000'000);  // the pydantic field name, not the JSON alias
  EXPECT_EQ(imp.offload_params, true);
  EXPECT_TRUE(has_prefix(imp.unmodelled, "zero_optimization.offload_param.device: NVMe"));
  j["zero_optimization"]["stage3_max_live_parameters"] = 1e9;
  EXPECT_NE(test::bad_input_of([&] { from(j, 8); }).find("given twice"), std::string::npos);
  json dep = {{"train_micro_batch_size_per_gpu", 1},
              {"zero_optimization",
               {{"stage", 2}, {"cpu_offload", true}, {"offload_optimizer", {{"device", "cpu"}}}}}};
  EXPECT_NE(test::bad_input_of([&] { from(dep, 8); }).find("cpu_offload"), std::string::npos);
  json typo = {{"train_micro_batch_size_per_gpu", 1},
               {"zero_optimization", {{"stage", 2}, {"reduce_bucket_sise", 5}}}};
  EXPECT_NE(test::bad_input_of([&] { from(typo, 8); })
                .find("zero_optimization.reduce_bucket_sise: unknown key (did you mean "
                      "'zero_optimization.reduce_bucket_size'?)"),
            std::string::npos);
  json far = {{"train_micro_batch_size_per_gpu", 1},
              {"zero_optimization", {{"stage", 2}, {"bucket_of_mine", 5}}}};
  imp = from(far, 8);
  EXPECT_TRUE(has_prefix(imp.unmodelled, "zero_optimization.bucket_of_mine: unknown key, may change memory"));
  EXPECT_EQ(imp.reduce_bucket, 500'000'000);  // the default, recorded in derived
  EXPECT_TRUE(std::any_of(imp.derived.begin(), imp.derived.end(), [](const import_note& n) {
    return n.field == "reduce_bucket_size" && n.value == "500000000";
  }));
}

TEST(DeepSpeedConfig, HostileInputIsOneLineError) {
  using nlohmann::json;
  for (const json& j :
       {json::array(), json{{"zero_optimization", {{"stage", "3"}}}},
        json{{"zero_optimization", {{"stage", 7}}}}, json{{"zero_optimization", 5}},
        json{{"train_micro_batch_size_per_gpu", 1e300}},
        json{{"train_micro_batch_size_per_gpu", 1}, {"bf16", {{"enabled", "yes"}}}},
        json{{"train_micro_batch_size_per_gpu", 1},
             {"zero_optimization", {{"stage", 2}, {"reduce_bucket_size", -1}}}},
        json{{"train_micro_batch_size_per_gpu", 1}, {"zero_optimization", {{"offload_optimizer", "cpu"}}}},
        json{{"train_batch_size", 9'000'000'000'000LL}, {"gradient_accumulation_steps", 1}}}) {
    const std::string e = test::bad_input_of([&] { from(j, 8); });
    EXPECT_FALSE(e.empty()) << j.dump();
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  EXPECT_FALSE(test::bad_input_of([] { load_deepspeed_config(deepspeed_data("missing.json"), std::nullopt, 1); }).empty());
}

}  // namespace
}  // namespace headroom
