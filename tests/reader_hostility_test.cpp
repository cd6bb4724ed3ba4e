// reader_hostility_test.cpp: hand-written hostile inputs for every reader on the import surface, run through the
// built `headroom` binary: the Megatron argument / YAML readers, DeepSpeed JSON, torchtitan TOML, HF MoE configs,
// capture sidecars and observe tables. Each refusal must be exactly one stderr line, exit status 2, naming the
// file, the field, and a fix or the name it resembles. Contradictory launches are refused as the framework
// refuses them; each case cites the framework's check (sources as in planner/imports/megatron_args.cpp).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_support.hpp"

namespace {

// Asserts that `r` is one bad-input line (at most 280 characters plus the newline) holding every one of `says`.
void one_line(const result& r, const std::vector<std::string>& says) {
  EXPECT_EQ(r.status, 2) << r.err << r.out;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(r.err.rfind("headroom: bad input: ", 0), 0u) << r.err;
  EXPECT_LE(r.err.size(), 281u) << r.err;
  for (const auto& s : says) EXPECT_NE(r.err.find(s), std::string::npos) << "wanted '" << s << "' in: " << r.err;
}

std::string file(const std::string& name, const std::string& text) {
  const std::string p = scratch(name);
  std::ofstream(p) << text;
  return p;
}

// A dense Megatron model: 32 layers of 4096 with 32 heads; the flags under test are appended.
const std::string mg_shape =
    "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 "
    "--vocab-size 32000 --micro-batch-size 1 --global-batch-size 64 --bf16 ";
const std::string mg_moe = mg_shape + "--num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 1024 ";

result megatron(const std::string& flags, const std::string& gpus = "8") {
  return run("plan --gpus " + gpus + " --megatron-args \"" + flags + "\"");
}

// ---- the Megatron argument and YAML readers -----------------------------------------------------------------

TEST(ReaderHostility, MegatronMisspeltFlagIsRefusedWithTheFlagItResembles) {
  // argparse with allow_abbrev=False refuses an unknown flag (arguments.py parse_args); planned on, tp would be 1.
  one_line(megatron(mg_shape + "--tensor-model-paralel-size 2"),
           {"megatron arguments: --tensor-model-paralel-size: unknown flag",
            "(did you mean '--tensor-model-parallel-size'?)"});
  const std::string yaml = file("typo.yaml", "--num-layers: 2\n--pipeline-model-paralel-size: 2\n");
  one_line(run("plan --gpus 8 --megatron-args " + yaml),
           {"typo.yaml: --pipeline-model-paralel-size", "did you mean '--pipeline-model-parallel-size'?"});
  // FP4's flags are one edit from FP8's: real flags, listed as not modelled, never taken as typos.
  one_line(megatron(mg_shape + "--fp4-format e2m1"), {"--fp4-format changes memory and is not modelled"});
}

TEST(ReaderHostility, MegatronValueErrorsNameTheLaunch) {
  one_line(megatron(mg_shape + "--tensor-model-parallel-size"),
           {"megatron arguments: --tensor-model-parallel-size: is missing its value"});
  one_line(megatron(mg_shape + "--tensor-model-parallel-size two"),
           {"megatron arguments: --tensor-model-parallel-size: needs an integer, got 'two'"});
  one_line(megatron(mg_moe + "--moe-token-dispatcher-type alltoal"),
           {"--moe-token-dispatcher-type: 'alltoal' is not one of allgather, alltoall, flex",
            "(did you mean 'alltoall'?)"});
  // argparse's choices hold in a dense launch too, where the dispatcher is never read.
  one_line(megatron(mg_shape + "--recompute-method unform"), {"--recompute-method", "(did you mean 'uniform'?)"});
  one_line(megatron(mg_shape + "--num-experts 8 --moe-router-topk 9"),
           {"--moe-router-topk: 9 is outside 1..8: write a value in that range"});
  const std::string yaml = file("switch.yaml", "--num-layers: 2\n--sequence-parallel: ture\n");
  one_line(run("plan --gpus 8 --megatron-args " + yaml),
           {"switch.yaml: --sequence-parallel: is a switch", "(did you mean 'true'?)"});
  const std::string unset = file("unset.yaml", "--num-layers: 2\n--tensor-model-parallel-size: ${TP}\n");
  one_line(run("plan --gpus 8 --megatron-args " + unset), {"unset.yaml: --tensor-model-parallel-size",
                                                             "--megatron-var TP=VALUE sets it"});
}

TEST(ReaderHostility, MegatronContradictionsAreRefusedAsMegatronRefusesThem) {
  // transformer_config.py TransformerConfig.__post_init__: heads % tp == 0.
  one_line(megatron(mg_shape + "--tensor-model-parallel-size 3", "3"),
           {"--tensor-model-parallel-size: 3 does not divide --num-attention-heads 32", "use a tp dividing 32"});
  // The same function: query groups a multiple or a divisor of tp (6 groups, tp 4: neither; 4 groups, tp 8: fine).
  const std::string gqa = "--num-layers 4 --hidden-size 3072 --num-attention-heads 24 --kv-channels 128 "
                          "--vocab-size 32000 --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 "
                          "--group-query-attention ";
  one_line(megatron(gqa + "--num-query-groups 6 --tensor-model-parallel-size 4"),
           {"--num-query-groups: 6 is neither a multiple nor a divisor of --tensor-model-parallel-size 4"});
  EXPECT_EQ(megatron(gqa + "--num-query-groups 4 --tensor-model-parallel-size 8").status, 0);
  // arguments.py validate_args: experts % ep == 0, and ep needs experts.
  one_line(megatron(mg_moe + "--expert-model-parallel-size 3", "3"),
           {"--expert-model-parallel-size: 3 does not divide --num-experts 8", "use an ep dividing it"});
  one_line(megatron(mg_shape + "--expert-model-parallel-size 2"),
           {"--expert-model-parallel-size: 2 needs --num-experts", "add --num-experts N"});
  // arguments.py validate_args: --num-experts 0 is None, a dense model, not a refusal.
  EXPECT_EQ(megatron(mg_shape + "--num-experts 0").status, 0);
  // pipeline_parallel_layer_layout.py: the layout's t layers must be --num-layers.
  one_line(megatron(mg_shape + "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Et*15|t*16L'"),
           {"--pipeline-model-parallel-layout: holds 31 t layers but --num-layers is 32"});
  // arguments.py validate_args: max_position_embeddings >= seq_length, whatever the position embedding.
  one_line(megatron(mg_shape + "--seq-length 8192 --position-embedding-type rope"),
           {"--max-position-embeddings: 4096 is below --seq-length 8192", "raise it to at least 8192"});
  // transformer_config.py __post_init__: full needs a method and a layer count; selective takes neither
  // (arguments.py validate_args for the method).
  one_line(megatron(mg_shape + "--recompute-granularity full"),
           {"--recompute-granularity: full needs --recompute-method",
            "append --recompute-method uniform --recompute-num-layers 1"});
  one_line(megatron(mg_shape + "--recompute-granularity full --recompute-method uniform"),
           {"full needs --recompute-num-layers"});
  one_line(megatron(mg_shape + "--recompute-granularity selective --recompute-method block"),
           {"--recompute-method: applies to --recompute-granularity full only", "drop it"});
  EXPECT_EQ(
      megatron(mg_shape + "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1").status,
      0);
  // num_microbatches_calculator.py: the global batch a multiple of micro-batch x dp (torchrun's world: dp 8).
  const std::string script = file("run.sh", "torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py " + mg_shape +
                                                "--global-batch-size 12\n");
  one_line(run("plan --megatron-args " + script),
           {"run.sh: --global-batch-size: 12 is not a multiple of micro-batch x dp = 8", "make it a multiple"});
}

// ---- DeepSpeed JSON ------------------------------------------------------------------------------------------

result deepspeed(const std::string& name, const std::string& text) {
  return run("plan --preset llama2-7b --gpus 8 --deepspeed-config " + file(name, text));
}

TEST(ReaderHostility, DeepSpeedKeysAutoAndDuplicates) {
  one_line(deepspeed("nested.json", R"({"train_micro_batch_size_per_gpu": 1,
              "zero_optimization": {"stage": 3, "offload_optimizer": {"devic": "cpu"}}})"),
           {"nested.json: zero_optimization.offload_optimizer.devic: unknown key",
            "did you mean 'zero_optimization.offload_optimizer.device'?"});
  one_line(deepspeed("auto.json", R"({"train_micro_batch_size_per_gpu": "auto"})"),
           {"auto.json: train_micro_batch_size_per_gpu: \"auto\"", "pass --micro-batch N"});
  one_line(deepspeed("type.json", R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": "two"}})"),
           {"type.json: zero_optimization.stage: must be a whole number"});
  // runtime/config_utils.py dict_raise_error_on_duplicate_keys: DeepSpeed refuses a key given twice, nested or not;
  // a JSON reader would keep the last silently (ZeRO 3 planned for a file that DeepSpeed never starts).
  one_line(deepspeed("dup.json", R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2, "stage": 3}})"),
           {"dup.json: zero_optimization.stage: given twice", "keep one"});
  one_line(deepspeed("duptop.json", R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
              "bf16": {"enabled": false}})"),
           {"duptop.json: bf16: given twice"});
  // runtime/config.py _batch_assertion: train = micro x accumulation x world (2 x 2 x 8 = 32, not 30).
  one_line(deepspeed("batch.json", R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
              "train_batch_size": 30})"),
           {"batch.json: train_batch_size: 30 != 2 x 2 x 8 GPUs", "fix the three"});
}

// ---- torchtitan TOML -----------------------------------------------------------------------------------------

result torchtitan(const std::string& name, const std::string& text) {
  return run("plan --preset llama3-8b --gpus 8 --torchtitan-config " + file(name, text));
}

TEST(ReaderHostility, TorchtitanTypesTablesAndKeys) {
  one_line(torchtitan("type.toml", "[parallelism]\ntensor_parallel_degree = \"two\"\n"),
           {"type.toml: parallelism.tensor_parallel_degree: must be an integer"});
  one_line(torchtitan("table.toml", "[parallelsm]\ntensor_parallel_degree = 2\n"),
           {"table.toml: parallelsm: unknown key", "did you mean 'parallelism'?"});
  one_line(torchtitan("key.toml", "[parallelism]\ntensor_parallel_degre = 2\n"),
           {"key.toml: parallelism.tensor_parallel_degre", "did you mean 'parallelism.tensor_parallel_degree'?"});
  one_line(torchtitan("mode.toml", "[activation_checkpoint]\nmode = \"ful\"\n"),
           {"mode.toml: activation_checkpoint.mode", "(did you mean 'full'?)"});
  one_line(torchtitan("scalar.toml", "parallelism = 3\n"), {"scalar.toml: parallelism: must be a table"});
  // torchtitan/distributed/parallel_dims.py ParallelDims._validate: the degrees multiply to the world.
  one_line(torchtitan("dims.toml", "[parallelism]\ndata_parallel_shard_degree = 3\n"),
           {"dims.toml: parallelism: the degrees multiply to 3, not the 8 GPUs", "data_parallel_shard_degree = -1"});
  one_line(torchtitan("gbs.toml", "[training]\nlocal_batch_size = 3\nglobal_batch_size = 16\n"),
           {"gbs.toml: training.global_batch_size: 16 is not a multiple of local_batch_size x dp = 24", "or -1"});
}

// ---- HF MoE configs ------------------------------------------------------------------------------------------

result hf(const std::string& name, const std::string& from, const nlohmann::json& patch, const char* drop = nullptr) {
  nlohmann::json c = nlohmann::json::parse(slurp(data + "/hf/" + from));
  c.merge_patch(patch);
  if (drop) c.erase(drop);
  return run("plan --gpus 8 --hf-config " + file(name, c.dump()));
}

TEST(ReaderHostility, HfMoeConfigsThatCannotRun) {
  // transformers routes with torch.topk over the experts: top-k above the count cannot run.
  one_line(hf("topk.json", "mixtral-8x7b.json", {{"num_experts_per_tok", 9}}),
           {"topk.json.num_experts_per_tok: must be at most the number of experts (num_local_experts 8)", "lower it"});
  one_line(hf("zero.json", "mixtral-8x7b.json", {{"num_local_experts", 0}}),
           {"zero.json.num_local_experts: 0 routed experts", "state the checkpoint's expert count"});
  // Qwen3-MoE: layer i is MoE when (i + 1) % decoder_sparse_step == 0; a step past 48 layers leaves none.
  one_line(hf("step.json", "qwen3-30b-a3b.json", {{"decoder_sparse_step", 100}}),
           {"step.json.decoder_sparse_step: places no mixture-of-experts layer among the 48 layers"});
  // A step that does not divide the layers is what transformers builds: floor(48 / 5) = 9 MoE layers, planned.
  const result five = run("plan --gpus 8 --explain --hf-config " +
                          file("five.json", [] {
                            auto c = nlohmann::json::parse(slurp(data + "/hf/qwen3-30b-a3b.json"));
                            c["decoder_sparse_step"] = 5;
                            return c.dump();
                          }()));
  EXPECT_NE(five.out.find("9 of stage 0's 48 layers"), std::string::npos) << five.out << five.err;
  one_line(hf("near.json", "mixtral-8x7b.json", {{"num_local_expert", 8}}, "num_local_experts"),
           {"near.json.num_local_experts: missing", "the config has 'num_local_expert': did you mean it?"});
}

// ---- capture sidecars ------------------------------------------------------------------------------------------

// A sidecar as tools/headroom_capture.py writes it for the small real snapshot (tests/data/snapshots).
nlohmann::json sidecar() {
  return nlohmann::json::parse(R"({"schema": "headroom.capture/1", "snapshot": "snap.pickle",
    "captured_utc": {"start": "a", "end": "b"}, "software": {"torch": "2.8"},
    "gpu": {"name": "NVIDIA H200", "total_memory": 150755819520, "index": 0},
    "allocator": {"PYTORCH_CUDA_ALLOC_CONF": ""}, "placement": {"rank": 0, "world_size": 1},
    "peaks": {"max_memory_reserved": 463470592, "max_memory_allocated": 419430400},
    "at_end": {"outside_allocator": 558000000}, "device_used_at_peak": {"bytes": 1048576000, "how": "x"},
    "problem": null, "ended_by": null})");
}

result snapshot_with(const nlohmann::json& side) {
  const std::string snap = scratch("snap.pickle");
  std::ofstream(snap, std::ios::binary)
      << slurp(data + "/snapshots/NiuHuangxiaozi__forward_memory_snapshot_100.pickle");
  std::ofstream(snap + ".headroom.json") << side.dump();
  return run("snapshot " + snap);
}

TEST(ReaderHostility, CaptureSidecarFieldsNameTheKeyTheyResemble) {
  EXPECT_EQ(snapshot_with(sidecar()).status, 0);
  auto typo = sidecar();
  typo["gpu"]["nmae"] = typo["gpu"]["name"];
  typo["gpu"].erase("name");
  one_line(snapshot_with(typo), {"snap.pickle.headroom.json: gpu.name: missing", "'nmae': did you mean it?"});
  auto block = sidecar();
  block["peak"] = block["peaks"];
  block.erase("peaks");
  one_line(snapshot_with(block), {"snap.pickle.headroom.json: peaks: missing", "'peak': did you mean it?"});
  auto gone = sidecar();
  gone["at_end"].erase("outside_allocator");
  one_line(snapshot_with(gone), {"at_end.outside_allocator: missing", "capture again, or add it"});
  auto kind = sidecar();
  kind["problem"] = {{"kind", "fil"}};
  one_line(snapshot_with(kind), {"problem.kind: 'fil' is neither", "(did you mean 'file'?)"});
  auto schema = sidecar();
  schema["schema"] = "headroom.capture/2";
  one_line(snapshot_with(schema), {"schema: 'headroom.capture/2' is not headroom.capture/1", "capture with"});
}

// ---- observe tables ------------------------------------------------------------------------------------------

const std::string obs_header = "name,problem,figure,value,unit,gpu\n";
const std::string obs_run = "a,--preset llama3-8b --gpus 8 --zero 3 --seq 8192 --recompute full,";

TEST(ReaderHostility, ObserveCellsNameTheValueTheyResemble) {
  const auto observe = [](const std::string& name, const std::string& text) {
    return run("observe " + file(name, text) + " -o " + scratch(name + ".out"));
  };
  one_line(observe("fig.csv", obs_header + obs_run + "reserved_pek,23.9,GiB,NVIDIA H100 80GB HBM3\n"),
           {"fig.csv: row 1, column 'figure': unknown figure 'reserved_pek' (did you mean 'reserved_peak'?)"});
  one_line(observe("unit.csv", obs_header + obs_run + "reserved_peak,23.9,Gib,NVIDIA H100 80GB HBM3\n"),
           {"unit.csv: row 1, column 'unit': unknown unit 'Gib' (did you mean 'GiB'?)"});
  one_line(observe("col.csv", "nme,problem,figure,value,unit\n" + obs_run + "reserved_peak,23.9,GiB\n"),
           {"col.csv: header, column 'nme': unknown column (did you mean 'name'?)"});
  one_line(observe("fields.csv", obs_header + obs_run + "reserved_peak,23.9,GiB\n"),
           {"fields.csv: row 1: 5 fields for 6 columns", "give one per header column"});
  one_line(observe("big.csv", obs_header + obs_run + "reserved_peak,230,GiB,NVIDIA H100 80GB HBM3\n"),
           {"big.csv: row 1, column 'value'", "check the figure's unit, or the gpu cell"});
}

}  // namespace
