// plan_command.hpp: `headroom plan`: options, and turning them into a problem and a layout.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "planner/cost_model.hpp"
#include "planner/layout.hpp"
#include "planner/suggest.hpp"
#include "planner/workspaces.hpp"

namespace headroom::cli {

// The defaults are the library's (default_problem(), training_spec, device_spec, layout): stated there once.
struct plan_options {
  std::string preset, model_file, hf_config;
  std::optional<model_spec> inline_model;  // set by `validate` for a pack row that carries its model
  std::optional<std::int64_t> seq;
  std::int64_t micro_batch = training_spec{}.micro_batch, global_batch = training_spec{}.global_batch;
  std::string recipe = default_recipe;
  std::optional<int> gpus;
  int tp = layout{}.tp, pp = layout{}.pp, cp = layout{}.cp, vpp = layout{}.vpp, zero = layout{}.zero,
      units = layout{}.zero3_inflight_units;
  std::string recompute = to_string(layout{}.recompute), attention = to_string(training_spec{}.attention),
              loss = to_string(training_spec{}.loss);
  bool offload_params = layout{}.offload_params;
  bool sequence_parallel = layout{}.sequence_parallel, offload = layout{}.offload_optimizer,
       reshard_after_forward = layout{}.reshard_after_forward;
  std::int64_t zero3_live_params = layout{}.zero3_live_params;
  double gpu_mem_gib = to_gib(device_spec{}.capacity), reserve_gib = to_gib(device_spec{}.reserve.fixed),
         fixed_overheads_gib = to_gib(device_spec{}.fixed_overheads);
  int gpus_per_node = device_spec{}.gpus_per_node;
  std::string calibration;  // --calibration FILE
  bool strict_calibration = false;
  std::string target_gpu, target_driver;
  std::string gpu_type;  // --gpu-type: capacity, rate and links by name (planner/gpu_types.hpp)
  // Mixture-of-experts and hybrid sharding.
  int ep = layout{}.ep, etp = layout{}.etp, dp_replicate = layout{}.dp_replicate;
  double moe_imbalance = moe_routing{}.imbalance, capacity_factor = moe_routing{}.capacity_factor;
  bool pad_to_capacity = false;
  std::string dispatcher = to_string(moe_routing{}.dispatcher);
  std::vector<std::string> recompute_modules;  // --recompute-modules (Megatron's names); empty: core_attn
  // Launch importers (planner/imports/): their values fill what the command line does not state.
  std::string megatron_args, deepspeed_config, torchtitan_config;
  std::vector<std::string> torchtitan_overrides;
  std::vector<std::string> megatron_vars;
  // What the Hugging Face Trainer would fill DeepSpeed's "auto" values with (--bf16 / --fp16 and
  // --gradient_accumulation_steps; the micro-batch is --micro-batch).
  std::string trainer_precision;
  std::optional<std::int64_t> gradient_accumulation;  // --megatron-var NAME=VALUE: what a launcher sets before the text
  bool allow_unmodelled = false;
  std::vector<std::string> imported;  // options an importer set (given() counts them as given)
  std::string megatron_vpp_flag;      // launch_import::vpp_flag: how a Megatron launch states its vpp
  bool imports_applied = false;       // apply_imports ran (only `plan` runs it; the others refuse importers)
  bool calibration_notes_in_output = false;  // `plan` prints the calibration's notes under its title
  std::int64_t reduce_bucket = 0, prefetch_bucket = 0;  // DeepSpeed's, from its config
  std::string alloc_conf, alloc_conf_from;  // PYTORCH_CUDA_ALLOC_CONF a launch sets, and which launch
  workspace_use workspaces;  // the libraries with workspaces a launch runs (Megatron: TransformerEngine)
  std::vector<std::int64_t> pp_layout;
  std::int64_t first_stage_layers = 0, last_stage_layers = 0;
  bool embedding_as_layer = false, loss_as_layer = false;
  std::string json_out, csv_out;  // --json [FILE|-], --csv [FILE|-]: "" when not asked
  bool force = false;             // replace output files that exist
  bool explain = false, suggest = false, min_gpus = false;
  std::string max_fit;                  // --max-fit micro-batch|seq|layers: the planner's largest value
  std::int64_t max_fit_limit = 0;       // 0: the axis's default (planner/max_fit.hpp)
  bool allow_offload = false;           // --suggest also searches optimizer offload
  std::vector<std::string> recipes;     // --suggest: the recipes searched (default: --recipe)
  // --search AXES: the axes of an imported launch --suggest / --min-gpus search (launch_options.hpp), and the
  // flags of the axes that frees (free_searched_axes fills it; fixed_for_search reads it).
  std::vector<std::string> search, freed;
  std::int64_t top = 20;
  int max_gpus = 16384;
  cost_model costs;
  CLI::App* app = nullptr;  // to ask which options were given (given())
};

// Returns whether option `name` ("--reserve") was given on the command line.
bool given(const plan_options& o, const char* name);
// Returns whether the attention kernel is --hf-config's default: flash (SDPA's fused kernels, what
// transformers runs by default since it took SDPA as its attn_implementation) when neither --attention nor a
// launch file names one. Presets and model files keep the reference case's eager attention.
bool hf_default_attention(const plan_options& o);

// Adds the model, training, layout and device options that plan, trace and probe share.
void add_problem_options(CLI::App* c, plan_options& o);

// Adds the `plan` subcommand to `app`; its options fill `o`.
CLI::App* add_plan_command(CLI::App& app, plan_options& o);

// Returns the layout the options describe (not yet validated against the model).
layout layout_from(const plan_options& o);

// Runs `headroom plan`; returns the exit status (exit_codes.hpp). Throws bad_input.
int run_plan(const plan_options& o);

// Returns the problem the options describe. Throws bad_input.
problem problem_from(const plan_options& o);

}  // namespace headroom::cli
