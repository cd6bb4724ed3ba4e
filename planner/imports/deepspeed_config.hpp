// deepspeed_config.hpp: the DeepSpeed JSON config importer (--deepspeed-config). It reads what a DeepSpeed
// config states about memory (ZeRO stage, offload, buckets, batch sizes, precision), fills the Hugging Face
// Trainer's "auto" values the way transformers does, and sorts every other key into `unused` (no memory
// effect) or `unmodelled` (changes memory, not modelled). The model itself comes from elsewhere.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "planner/imports/launch.hpp"

namespace headroom {

// What the Hugging Face Trainer would put in place of "auto" (transformers integrations/deepspeed.py,
// HfTrainerDeepSpeedConfig.trainer_config_process): unset means not known, and an "auto" that needs it is
// refused naming the key.
struct hf_trainer_args {
  std::optional<std::int64_t> per_device_train_batch_size;  // --per_device_train_batch_size
  std::optional<std::int64_t> gradient_accumulation_steps;  // --gradient_accumulation_steps
  std::optional<std::string> precision;                     // "bf16", "fp16" or "fp32" (--bf16 / --fp16)
};

// Returns the launch a DeepSpeed JSON config at `path` describes. `hidden` (the model's hidden size) fills
// the hidden-size "auto" keys; `world_size` (GPUs, which DeepSpeed's batch rule reads as the data-parallel
// size: this importer models no tensor or pipeline parallelism from the file) ties train_batch_size =
// micro * accumulation * world. Bucket sizes and live parameters are in elements. Throws bad_input naming
// the file and key on a malformed file, a wrong type, an "auto" that cannot be filled, or a contradiction.
launch_import load_deepspeed_config(const std::string& path, std::optional<std::int64_t> hidden,
                                    std::optional<int> world_size, const hf_trainer_args& trainer = {});

// As load_deepspeed_config, from a parsed config; `origin` names it in errors and in the result.
launch_import deepspeed_config_from_json(const nlohmann::json& config, const std::string& origin,
                                         std::optional<std::int64_t> hidden, std::optional<int> world_size,
                                         const hf_trainer_args& trainer = {});

}  // namespace headroom
