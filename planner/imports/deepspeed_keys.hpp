// deepspeed_keys.hpp: the key tables of the DeepSpeed JSON importer (deepspeed_config.cpp): for each section of
// a DeepSpeed config, every key DeepSpeed reads, sorted into read, unused or unmodelled (config_file.hpp).
#pragma once

#include <vector>

#include "planner/imports/config_file.hpp"

namespace headroom::detail {

const std::vector<key_rule>& deepspeed_top_keys();  // the top level (runtime/constants.py, runtime/config.py)
const std::vector<key_rule>& deepspeed_zero_keys();     // zero_optimization (zero/config.py)
const std::vector<key_rule>& deepspeed_ac_keys();       // activation_checkpointing
const std::vector<key_rule>& deepspeed_offload_keys();  // offload_param / offload_optimizer
const std::vector<key_rule>& deepspeed_bf16_keys();     // bf16
const std::vector<key_rule>& deepspeed_fp16_keys();     // fp16

}  // namespace headroom::detail
