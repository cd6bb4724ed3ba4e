// launch.hpp: one launch as an importer reads it (a Megatron-LM command line, a DeepSpeed JSON config, a
// torchtitan TOML job file). Each importer fills what its source states, records what it derived and every
// default it filled (printed by --explain), the keys it read but that do not change memory, and the keys that
// change memory and are not modelled (refused by the CLI unless --allow-unmodelled). The CLI turns a
// launch_import into the one canonical problem + layout (a command-line flag must agree with what it states:
// cli/launch_options.cpp, check_agrees).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "planner/layout.hpp"
#include "planner/model_spec.hpp"
#include "planner/workspaces.hpp"

namespace headroom {

// One line of what an importer derived or filled: the field set, its value, and the rule or default that
// gave it ("ffn_hidden", "14336", "Megatron's SwiGLU rule: floor(8h/3 / 64) * 64").
struct import_note {
  std::string field;
  std::string value;
  std::string why;
};

struct launch_import {
  std::string origin;               // the file or "megatron arguments"
  // How a user changes a value this launch states, for the refusal of a command-line flag that contradicts it
  // ("with --torchtitan-override section.key=value").
  std::string change_hint = "in the file";
  std::optional<model_spec> model;  // when the launch states the model's shape (Megatron arguments, a
                                    // torchtitan flavor)
  std::string model_named;          // the model the file names by name ("llama3/8B"), "" when none
  // A model the file names and the importer cannot find (a flavor outside the table): why, with the nearest
  // names. The CLI refuses it unless the command line names the model to plan.
  std::string model_unknown;
  std::optional<std::string> recipe;  // a built-in recipe name (recipe.hpp), when the launch implies one
  std::optional<std::string> fp8;     // "delayed", "current", "blockwise", "mxfp8" (FP8 training requested)
  // Layout pieces the launch states (unset: not stated; the CLI's flags or defaults apply).
  std::optional<int> gpus, tp, pp, cp, vpp, ep, etp, dp, zero, dp_replicate;
  // Megatron: the flag that states the virtual pipeline when it is not --num-virtual-stages-per-pipeline-rank
  // ("--num-layers-per-virtual-pipeline-stage" or "--pipeline-model-parallel-layout"; Megatron takes one of the
  // three, so a lever changing vpp drops it). "" otherwise.
  std::string vpp_flag;
  std::optional<recompute_mode> recompute;
  std::vector<std::string> recompute_modules;  // Megatron's --recompute-modules, as named there
  std::optional<bool> sequence_parallel, offload_optimizer, offload_params, reshard_after_forward;
  std::optional<std::int64_t> zero3_live_params;  // DeepSpeed stage3_max_live_parameters (elements)
  std::optional<std::int64_t> zero3_prefetch_bucket, reduce_bucket, allgather_bucket;  // elements
  std::optional<std::int64_t> seq, micro_batch, global_batch;
  std::optional<attention_kind> attention;  // Megatron's --attention-backend / --use-flash-attn
  std::optional<loss_kind> loss;            // how the framework computes the loss (torchtitan: unfused)
  std::optional<pipeline_split> split;
  std::optional<std::string> dispatcher;   // MoE token dispatcher: "alltoall", "allgather", "flex"
  std::optional<double> capacity_factor;   // MoE expert capacity factor (with padding: padded rows)
  bool pad_to_capacity = false;
  std::optional<std::string>
      alloc_conf;  // PYTORCH_CUDA_ALLOC_CONF as the launch sets it (ModelZoo's ENV_VARS)
  std::optional<workspace_use> workspaces;  // the libraries with workspaces it runs (planner/workspaces.hpp)
  // The framework refuses a layer count that does not divide over the pipeline stages when no split is stated
  // (Megatron: arguments.py l.985-998); the CLI checks the pp it plans.
  bool needs_even_split = false;
  std::vector<import_note> derived;      // every value derived or defaulted, for --explain
  std::vector<std::string> unused;       // keys read that do not change memory (listed, not refused)
  std::vector<std::string> unmodelled;   // keys that change memory and are not modelled: "key: why"
};

// Returns the distinct keys of imp.unmodelled (each "key: why" gives "key"), in the order first listed.
std::vector<std::string> unmodelled_keys(const launch_import& imp);
// Returns why the CLI refuses `imp` without --allow-unmodelled, as one line naming every unmodelled key (the
// reasons are in --explain and in unmodelled_json); "" when nothing is unmodelled.
std::string unmodelled_refusal(const launch_import& imp);
// Returns every unmodelled key of `imports` as [{"origin", "key", "why"}], for a plan's JSON.
nlohmann::json unmodelled_json(const std::vector<launch_import>& imports);

}  // namespace headroom
