// imports_target.cpp: the fuzz targets of the three launch importers (planner/imports/): megatron_args (a
// Megatron-LM launch script, argument string or ModelZoo YAML), deepspeed_config (a DeepSpeed JSON config)
// and torchtitan_config (a torchtitan TOML job file with command-line overrides). The contract of each
// importer: any input returns a launch_import or throws bad_input; any other exception escapes the target
// (std::terminate: a finding), as does a crash, a hang or a sanitizer report. What an importer returns is
// checked too: every degree it sets is at least 1, the ZeRO stage is 0-3, sizes and buckets are positive,
// and, where the world size was given, the batch and mesh agree with it.
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_internal.hpp"
#include "planner/errors.hpp"
#include "planner/imports/deepspeed_config.hpp"
#include "planner/imports/megatron_args.hpp"
#include "planner/imports/torchtitan_config.hpp"
#include "planner/model_files.hpp"

namespace headroom::fuzz {
namespace {

bool positive(const std::optional<int>& v) {
  return !v || *v >= 1;
}
bool positive(const std::optional<std::int64_t>& v) {
  return !v || *v >= 1;
}

// The invariants every launch_import holds, whichever importer made it.
void check_import(const launch_import& imp) {
  for (const auto* d :
       {&imp.gpus, &imp.tp, &imp.pp, &imp.cp, &imp.vpp, &imp.ep, &imp.etp, &imp.dp, &imp.dp_replicate})
    require(positive(*d));
  require(!imp.zero || (*imp.zero >= 0 && *imp.zero <= 3));
  require(positive(imp.seq) && positive(imp.micro_batch) && positive(imp.global_batch));
  for (const auto* b :
       {&imp.zero3_live_params, &imp.zero3_prefetch_bucket, &imp.reduce_bucket, &imp.allgather_bucket})
    require(!*b || **b >= 0);
  require(!imp.capacity_factor || (std::isfinite(*imp.capacity_factor) && *imp.capacity_factor >= 0));
}

// Runs `f` (an importer call) and checks what it returns; bad_input is the one accepted refusal.
template <class F>
std::optional<launch_import> import_or_refuse(F&& f) {
  try {
    launch_import imp = f();
    check_import(imp);
    return imp;
  } catch (const bad_input&) {
    return std::nullopt;
  }
}

// The variables Megatron-MoE-ModelZoo's runner sets before envsubst reads its YAML (model_configs/
// benchmarking/*.yaml refer to them), so the real YAML seeds get past "refers to $TP, which nothing sets".
const std::map<std::string, std::string>& modelzoo_env() {
  // Packed by hand: one pair a line would take a screen.
  // clang-format off
  static const std::map<std::string, std::string> env = {
      {"TP", "2"}, {"PP", "2"}, {"EP", "8"}, {"CP", "1"}, {"VPP", "2"}, {"MBS", "1"}, {"GBS", "256"},
      {"SEQ_LEN", "4096"}, {"LAYERS_PER_VP", "2"}, {"MOE_GROUPED_GEMM", "true"},
      {"MOE_TOKEN_DISPATCHER", "alltoall"}, {"TOKENIZER_MODEL", "deepseek-ai/DeepSeek-V3"},
      {"DATA_PATH", "/data"}, {"OUTPUT_PATH", "/out"}, {"LOAD_PATH", "/ckpt"}, {"WORKSPACE", "/ws"},
      {"WANDB_PROJECT", "p"}, {"COMMENT", "c"}};
  // clang-format on
  return env;
}

// torchtitan keys an override may set (torchtitan/config/job_config.py @ 238fa995), and values of every
// kind: in range, out of range, the wrong type, not TOML at all.
// clang-format off
constexpr const char* override_keys[] = {
    "parallelism.data_parallel_shard_degree", "parallelism.data_parallel_replicate_degree",
    "parallelism.tensor_parallel_degree", "parallelism.pipeline_parallel_degree",
    "parallelism.context_parallel_degree", "parallelism.expert_parallel_degree",
    "parallelism.expert_tensor_parallel_degree", "parallelism.fsdp_reshard_after_forward",
    "parallelism.pipeline_parallel_schedule", "parallelism.pipeline_parallel_microbatch_size",
    "training.local_batch_size", "training.global_batch_size", "training.seq_len",
    "activation_checkpoint.mode", "model.name", "no_such.key"};
constexpr const char* override_values[] = {
    "1", "2", "4", "-1", "0", "8", "true", "\"always\"", "never", "[1, 2]", "1e400", "9223372036854775807",
    "-9223372036854775808", "{a = 1}", "\"\"", ""};
// clang-format on

}  // namespace

void fuzz_megatron_args(std::string_view bytes) {
  const std::string text(bytes);
  import_or_refuse([&] { return import_megatron_args(text, "fuzz", {}); });
  import_or_refuse([&] { return import_megatron_args(text, "fuzz", modelzoo_env()); });
  // The YAML path whatever the text: a first line "MODEL_ARGS:" makes the reader take it as ModelZoo's YAML.
  import_or_refuse([&] { return import_megatron_args("MODEL_ARGS:\n" + text, "fuzz", modelzoo_env()); });
}

void fuzz_deepspeed_config(std::string_view bytes) {
  nlohmann::json j;
  try {
    j = parse_json_text(std::string(bytes), "fuzz");
  } catch (const bad_input&) {
    return;
  }
  import_or_refuse([&] { return deepspeed_config_from_json(j, "fuzz", std::nullopt, std::nullopt); });
  for (const int world : {1, 8, 24}) {
    const auto imp = import_or_refuse([&] { return deepspeed_config_from_json(j, "fuzz", 4096, world); });
    if (!imp) continue;
    require(imp->gpus == world);
    // DeepSpeed's batch rule, train = micro x accumulation x world, with a whole accumulation.
    if (imp->micro_batch && imp->global_batch) require(*imp->global_batch % (*imp->micro_batch * world) == 0);
  }
  hf_trainer_args trainer;
  trainer.per_device_train_batch_size = 4;
  trainer.gradient_accumulation_steps = 2;
  trainer.precision = "bf16";
  import_or_refuse([&] { return deepspeed_config_from_json(j, "fuzz", 1, 8, trainer); });
  trainer.precision = "fp16";
  import_or_refuse(
      [&] { return deepspeed_config_from_json(j, "fuzz", std::nullopt, std::nullopt, trainer); });
}

void fuzz_torchtitan_config(std::string_view bytes) {
  // A first byte below 8 (no TOML file starts so) says how many overrides follow, two bytes each: a key and
  // a value from the tables above. Otherwise the whole input is the TOML text, as the real seeds are.
  std::vector<std::string> overrides;
  if (!bytes.empty() && static_cast<unsigned char>(bytes[0]) < 8) {
    byte_reader r(bytes);
    const int n = r.next();
    for (int k = 0; k < n; ++k) {
      const char* key = override_keys[r.next() % std::size(override_keys)];
      const char* value = override_values[r.next() % std::size(override_values)];
      overrides.push_back((k % 2 ? "--" : "") + std::string(key) + "=" + value);
    }
    bytes = r.rest();
  }
  const std::string text(bytes);
  import_or_refuse([&] { return torchtitan_config_from_toml(text, "fuzz", overrides, std::nullopt); });
  for (const int world : {8, 64}) {
    const auto imp =
        import_or_refuse([&] { return torchtitan_config_from_toml(text, "fuzz", overrides, world); });
    if (!imp) continue;
    require(imp->gpus == world);
    // The mesh replicate x shard x cp x tp x pp covers the world exactly (job_config.py l.311-335).
    if (imp->dp && imp->tp && imp->pp && imp->cp)
      require(std::int64_t{*imp->dp} * *imp->tp * *imp->pp * *imp->cp == world);
  }
}

}  // namespace headroom::fuzz
