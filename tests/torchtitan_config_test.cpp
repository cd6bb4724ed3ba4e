// torchtitan_config_test.cpp: the torchtitan TOML importer on real job files (tests/data/torchtitan/, each
// with its repository, path and commit in its first line) and on hostile input. Expected numbers are worked
// out here from torchtitan's rules (torchtitan/config/job_config.py @ 238fa995), cited at each test.
#include "planner/imports/torchtitan_config.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "planner/errors.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

std::string torchtitan_data(const std::string& name) {
  return std::string(HEADROOM_TEST_DATA) + "/torchtitan/" + name;
}

bool titan_has_prefix(const std::vector<std::string>& v, const std::string& prefix) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.rfind(prefix, 0) == 0; });
}

launch_import titan_from(const std::string& toml, std::optional<int> world = std::nullopt,
                   const std::vector<std::string>& overrides = {}) {
  return torchtitan_config_from_toml(toml, "test.toml", overrides, world);
}

TEST(TorchtitanConfig, Llama3_405bOn128Gpus) {
  // "a preset for 128 H100 GPUs": tp 8, shard -1 -> 128 / 8 = 16; full AC; local batch 2 -> global 2 x 16.
  const launch_import imp = load_torchtitan_config(torchtitan_data("llama3_405b.toml"), {}, 128);
  EXPECT_EQ(imp.tp, 8);
  EXPECT_EQ(imp.pp, 1);
  EXPECT_EQ(imp.dp, 16);
  EXPECT_EQ(imp.zero, 3);
  EXPECT_EQ(imp.reshard_after_forward, true);  // "default" without PP
  EXPECT_EQ(imp.recompute, recompute_mode::full);
  EXPECT_EQ(imp.micro_batch, 2);
  EXPECT_EQ(imp.global_batch, 32);
  EXPECT_EQ(imp.seq, 8192);
  EXPECT_EQ(imp.fp8, "current");  // converters = ["float8"], tensorwise dynamic scaling
  // enable_fsdp_float8_all_gather = true with dp_shard 16: torchao gathers the linear weights in FP8.
  EXPECT_EQ(imp.recipe, "fsdp2-fp8-allgather");
  EXPECT_FALSE(titan_has_prefix(imp.unmodelled, "float8.enable_fsdp_float8_all_gather"));
  EXPECT_TRUE(titan_has_prefix(imp.unused, "compile.enable"));
  EXPECT_TRUE(titan_has_prefix(imp.unused, "validation.steps"));
}

TEST(TorchtitanConfig, DeepSeekV3_671bSelectiveOpAc) {
  // selective_ac_option 'op' is torchtitan's per-op policy, read as selective-op (its plan refuses it for a
  // MoE model: layout_error); the converters line is commented out, so the [quantize] sections convert nothing.
  const launch_import imp = load_torchtitan_config(torchtitan_data("deepseek_v3_671b.toml"), {}, 64);
  EXPECT_EQ(imp.dp, 64);
  EXPECT_EQ(imp.ep, 1);
  EXPECT_EQ(imp.recompute, recompute_mode::selective_op);
  EXPECT_FALSE(titan_has_prefix(imp.unmodelled, "activation_checkpoint.selective_ac_option"));
  EXPECT_FALSE(imp.fp8.has_value());
  EXPECT_EQ(imp.micro_batch, 4);
  EXPECT_EQ(imp.global_batch, 4 * 64);
  EXPECT_EQ(imp.seq, 4096);
  EXPECT_TRUE(titan_has_prefix(imp.unused, "parallelism.pipeline_parallel_schedule (no pipeline)"));
  EXPECT_TRUE(titan_has_prefix(imp.unused, "quantize.grouped_mm.float8.fqns"));
}

// torchtitan's files of 2025-10 (@ 99fee810b) carry [job] print_args (job_config.py l.22: it only prints the
// config, train.py l.82) beside dump_folder and description: read, no effect. The 16B job on 8 GPUs: shard -1
// takes all 8 (job_config.py l.324-334 rule), expert parallel 8, local batch 8 x 8 ranks.
TEST(TorchtitanConfig, DeepSeekV3_16bOf2025_10JobKeysAreHarmless) {
  const launch_import imp = load_torchtitan_config(torchtitan_data("deepseek_v3_16b_2025-10.toml"), {}, 8);
  EXPECT_TRUE(imp.unmodelled.empty()) << imp.unmodelled.front();
  for (const char* k : {"job.print_args", "job.dump_folder", "job.description"})
    EXPECT_TRUE(titan_has_prefix(imp.unused, k)) << k;
  EXPECT_EQ(imp.dp, 8);
  EXPECT_EQ(imp.ep, 8);
  EXPECT_EQ(imp.micro_batch, 8);
  EXPECT_EQ(imp.global_batch, 8 * 8);
  EXPECT_EQ(imp.recompute, recompute_mode::selective_op);
  // The key is still checked by name: a misspelling is refused as one, naming the key it resembles.
  EXPECT_NE(test::bad_input_of([] {
              titan_from("[job]\nprint_arg = true\n", 8);
            }).find("job.print_arg: unknown key (did you mean 'job.print_args'?)"),
            std::string::npos);
}

TEST(TorchtitanConfig, Llama4MaverickWithPipeline) {
  // tp 8 x pp 4 = 32, so 256 GPUs give dp_shard 8. Under PP the default policy never reshards after
  // forward, the micro-batch is pipeline_parallel_microbatch_size (default 1), and 1F1B has one stage per
  // rank; embedding and output count as one layer each (first/last_stage_less_layers = 1).
  const launch_import imp = load_torchtitan_config(torchtitan_data("llama4_17bx128e.toml"), {}, 256);
  EXPECT_EQ(imp.tp, 8);
  EXPECT_EQ(imp.pp, 4);
  EXPECT_EQ(imp.etp, 8);
  EXPECT_EQ(imp.dp, 8);
  EXPECT_EQ(imp.reshard_after_forward, false);
  EXPECT_EQ(imp.micro_batch, 1);
  EXPECT_EQ(imp.global_batch, 1 * 8);
  EXPECT_EQ(imp.vpp, 1);
  ASSERT_TRUE(imp.split.has_value());
  EXPECT_TRUE(imp.split->embedding_as_layer);
  EXPECT_TRUE(imp.split->loss_as_layer);
  EXPECT_EQ(imp.recompute, recompute_mode::full);
  EXPECT_NE(
      test::bad_input_of([] { load_torchtitan_config(torchtitan_data("llama4_17bx128e.toml"), {}, 100); }).find("multiple of"),
      std::string::npos);
}

TEST(TorchtitanConfig, OlderFileWithTopLevelFloat8Section) {
  // llama3_8b.toml of 2025-06: [float8] before the quantize sections, [training] compile, old checkpoint
  // keys. Nothing there changes memory beyond what is read.
  const launch_import imp = load_torchtitan_config(torchtitan_data("llama3_8b_2025-06.toml"), {}, 64);
  EXPECT_EQ(imp.dp, 64);
  EXPECT_EQ(imp.micro_batch, 1);
  EXPECT_TRUE(titan_has_prefix(imp.unused, "training.compile"));
  EXPECT_TRUE(titan_has_prefix(imp.unused, "float8.filter_fqns"));
  EXPECT_TRUE(titan_has_prefix(imp.unused, "checkpoint.enable_checkpoint"));
  for (const auto& u : imp.unmodelled) EXPECT_EQ(u.find("unknown key"), std::string::npos) << u;
  // mode = "selective", selective_ac_option = "op": the per-op policy, derived and shown, not unmodelled.
  EXPECT_EQ(imp.recompute, recompute_mode::selective_op);
  EXPECT_TRUE(std::any_of(imp.derived.begin(), imp.derived.end(), [](const import_note& n) {
    return n.field == "recompute" && n.value == "selective-op";
  }));
}

TEST(TorchtitanConfig, DottedOverridesAsTheCommandLineTookThem) {
  const launch_import imp =
      load_torchtitan_config(torchtitan_data("llama3_70b.toml"),
                             {"--parallelism.tensor_parallel_degree=4", "activation_checkpoint.mode=none",
                              "training.local_batch_size=2"},
                             16);
  EXPECT_EQ(imp.tp, 4);
  EXPECT_EQ(imp.dp, 4);  // 16 / 4
  EXPECT_EQ(imp.recompute, recompute_mode::none);
  EXPECT_EQ(imp.micro_batch, 2);
  const std::string e = test::bad_input_of(
      [] { load_torchtitan_config(torchtitan_data("llama3_70b.toml"), {"parallelism.tensor_paralel_degree=4"}, 16); });
  EXPECT_NE(e.find("did you mean 'parallelism.tensor_parallel_degree'"), std::string::npos) << e;
  EXPECT_FALSE(
      test::bad_input_of([] { load_torchtitan_config(torchtitan_data("llama3_70b.toml"), {"parallelism"}, 16); }).empty());
}

TEST(TorchtitanConfig, PipelineSchedulesAndAcOptions) {
  const std::string pp =
      "[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_schedule = \"Interleaved1F1B\"\n";
  EXPECT_EQ(titan_from(pp, 8).vpp, 2);  // looped: two stages per rank (pipeline_parallel.py l.111-115)
  EXPECT_TRUE(titan_has_prefix(titan_from(pp, 8, {"parallelism.pipeline_parallel_schedule=ZBVZeroBubble"}).unmodelled,
                         "parallelism.pipeline_parallel_schedule: ZBVZeroBubble"));
  // No [activation_checkpoint]: torchtitan's default, selective every 2nd layer (l.39-40: checkpointed when
  // the block count is a multiple of 2): full-every-2. Up to every 8th is modelled; beyond, it is listed.
  launch_import imp = titan_from("", 8);
  EXPECT_EQ(imp.recompute, recompute_mode::full_every_2);
  EXPECT_FALSE(titan_has_prefix(imp.unmodelled, "activation_checkpoint.selective_ac_option"));
  EXPECT_EQ(titan_from("[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = \"8\"\n", 8).recompute,
            recompute_mode::full_every_8);
  // The count as torchtitan's command line gives it (a number there, a string in the job file): the same.
  EXPECT_EQ(titan_from("[activation_checkpoint]\nmode = \"selective\"\n", 8,
                       {"activation_checkpoint.selective_ac_option=3"})
                .recompute,
            recompute_mode::full_every_3);
  EXPECT_TRUE(titan_has_prefix(
      titan_from("[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = \"9\"\n", 8).unmodelled,
      "activation_checkpoint.selective_ac_option: one layer in 9 fully recomputed"));
  EXPECT_EQ(imp.micro_batch, 8);  // local_batch_size default
  EXPECT_EQ(imp.seq, 2048);
  EXPECT_EQ(titan_from("[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = \"1\"\n", 8).recompute,
            recompute_mode::full);
  EXPECT_TRUE(titan_has_prefix(titan_from("[activation_checkpoint]\nmode = \"memory_budget\"\n", 8).unmodelled,
                         "activation_checkpoint.mode: memory_budget"));
}

TEST(TorchtitanConfig, DataParallelFlavours) {
  // Explicit degrees without a GPU count give it: 2 x 4 x 2 = 16 (HSDP: replicate 2, shard 4).
  launch_import imp = titan_from(
      "[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 4\n"
      "tensor_parallel_degree = 2\n");
  EXPECT_EQ(imp.gpus, 16);
  EXPECT_EQ(imp.dp, 8);
  EXPECT_EQ(imp.dp_replicate, 2);
  EXPECT_EQ(imp.zero, 3);
  // DDP alone (shard 1): no FSDP, mixed precision by autocast over fp32 weights.
  imp = titan_from("[parallelism]\ndata_parallel_replicate_degree = 8\ndata_parallel_shard_degree = 1\n", 8);
  EXPECT_EQ(imp.zero, 0);
  EXPECT_EQ(imp.recipe, "fp32-adam");
  EXPECT_FALSE(imp.reshard_after_forward.has_value());
  // global_batch_size must be a multiple of local x dp (here 8 x 8).
  EXPECT_NE(test::bad_input_of([] { titan_from("[training]\nglobal_batch_size = 100\n", 8); }).find("global_batch_size"),
            std::string::npos);
  EXPECT_EQ(titan_from("[training]\nglobal_batch_size = 128\n", 8).global_batch, 128);
  EXPECT_TRUE(titan_has_prefix(titan_from("[training]\ndtype = \"bfloat16\"\n", 8).unmodelled, "training.dtype"));
  EXPECT_NE(test::bad_input_of([] {
              titan_from("[parallelism]\nexpert_tensor_parallel_degree = 2\ntensor_parallel_degree = 4\n", 8);
            }).find("expert_tensor_parallel_degree"),
            std::string::npos);
}

TEST(TorchtitanConfig, UnknownKeysAreListedNotIgnored) {
  // A misspelling of a known key is refused (planned on, tp would be 1); one far from every key is listed.
  EXPECT_NE(test::bad_input_of([] { titan_from("[parallelism]\ntensor_paralel_degree = 2\n", 8); })
                .find("parallelism.tensor_paralel_degree: unknown key (did you mean "
                      "'parallelism.tensor_parallel_degree'?)"),
            std::string::npos);
  const launch_import imp = titan_from("[parallelism]\ntensor_degree_of_mine = 2\n[mystery]\nx = 1\n", 8);
  EXPECT_TRUE(
      titan_has_prefix(imp.unmodelled, "parallelism.tensor_degree_of_mine: unknown key, may change memory"));
  EXPECT_TRUE(titan_has_prefix(imp.unmodelled, "mystery: unknown key"));
  EXPECT_EQ(imp.tp, 1);
}

TEST(TorchtitanConfig, HostileInputIsOneLineError) {
  const std::string deep = std::string(300, '[') + std::string(300, ']');
  for (const std::string& t :
       {std::string("[parallelism\n"), std::string("[training]\nseq_len = \"long\"\n"),
        std::string("[training]\nseq_len = 9223372036854775807\n"), std::string("training = 5\n"),
        std::string("a = \xff\xfe\n"), "x = " + deep,
        std::string("[parallelism]\ndata_parallel_shard_degree = 0\n"),
        std::string("[parallelism]\ntensor_parallel_degree = 1000000\n"
                    "pipeline_parallel_degree = 1000000\ndata_parallel_shard_degree = 1\n"),
        std::string("[training]\nseq_len = nan\n")}) {
    const std::string e = test::bad_input_of([&] { titan_from(t, 8); });
    EXPECT_FALSE(e.empty()) << t.substr(0, 40);
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  EXPECT_FALSE(test::bad_input_of([] { load_torchtitan_config(torchtitan_data("missing.toml"), {}, 1); }).empty());
  // tomlplusplus overflows its stack on a dotted key of some ten thousand parts: refused before parsing.
  std::string dotted;
  for (int i = 0; i < 100'000; ++i) dotted += "a.";
  EXPECT_NE(test::bad_input_of([&] { titan_from(dotted + "b = 1\n", 8); }).find("nested more than"), std::string::npos);
  EXPECT_NE(test::bad_input_of([&] { titan_from("[" + dotted + "b]\n", 8); }).find("nested more than"), std::string::npos);
}

}  // namespace
}  // namespace headroom
