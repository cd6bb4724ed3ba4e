// torchtitan_keys.cpp: the key tables of the torchtitan TOML importer (torchtitan_keys.hpp), section by
// section as torchtitan/config/job_config.py @ 238fa995 declares them, with what headroom does with each key.
#include "planner/imports/torchtitan_keys.hpp"

namespace headroom::detail {

const std::vector<section_rules>& torchtitan_sections() {
  using namespace key_uses;
  // One row per key would make the table several screens long: rows are packed by hand.
  // clang-format off
  static const std::vector<section_rules> t = {
      // print_args: the 2025 spelling of print_config (job_config.py l.22 @ 99fee810b; train.py l.82 logs the
      // config when set), in the 2025-09/10 TOML files beside description and dump_folder.
      {"job", {{"config_file", U}, {"dump_folder", U}, {"description", U}, {"print_config", U},
      {"print_args", U}, {"save_config_file", U}, {"custom_config_module", U}, {"use_for_integration_test", U}}},
      {"profiling", {{"enable_profiling", U}, {"save_traces_folder", U}, {"profile_freq", U},
      {"profiler_active", U}, {"profiler_warmup", U}, {"enable_memory_snapshot", U},
      {"save_memory_snapshot_folder", U}}},
      {"metrics", {{"log_freq", U}, {"enable_tensorboard", U}, {"disable_color_printing", U},
      {"save_tb_folder", U}, {"save_for_all_ranks", U}, {"enable_wandb", U}, {"rank_0_only", U}}},
      {"model", {{"name", R}, {"flavor", R}, {"converters", R}, {"hf_assets_path", U}, {"tokenizer_path", U},
      {"print_after_conversion", U}}},
      {"optimizer", {{"name", R}, {"lr", U}, {"eps", U}, {"weight_decay", U}, {"beta1", U}, {"beta2", U},
      {"implementation", U},
      {"early_step_in_backward", X, "steps the optimizer per parameter in backward, freeing gradients"}}},
      {"lr_scheduler", {{"warmup_steps", U}, {"total_steps", U}, {"decay_ratio", U}, {"decay_type", U},
      {"min_lr_factor", U}, {"lr_min", U}}},
      {"training", {{"local_batch_size", R}, {"batch_size", R}, {"global_batch_size", R}, {"seq_len", R},
      {"mixed_precision_param", R}, {"mixed_precision_reduce", R}, {"enable_cpu_offload", R}, {"dtype", R},
      {"dataset", U}, {"dataset_path", U}, {"max_norm", U}, {"steps", U}, {"gc_freq", U}, {"gc_debug", U},
      {"dataloader", U}, {"seed", U}, {"deterministic", U}, {"compile", U},
      // compile and warmup_steps: spellings of 2025
      {"warmup_steps", U},
      // Before 785c34c99 (PR #980, 2025-03-18), read as the [parallelism] keys they became (read_moved_keys).
      {"data_parallel_replicate_degree", R}, {"data_parallel_shard_degree", R}, {"tensor_parallel_degree", R},
      {"disable_loss_parallel", R}, {"fsdp_reshard_after_forward", R}}},
      {"parallelism", {{"data_parallel_replicate_degree", R}, {"data_parallel_shard_degree", R},
      {"fsdp_reshard_after_forward", R}, {"tensor_parallel_degree", R}, {"pipeline_parallel_degree", R},
      {"context_parallel_degree", R}, {"expert_parallel_degree", R}, {"expert_tensor_parallel_degree", R},
      {"pipeline_parallel_schedule", R}, {"pipeline_parallel_microbatch_size", R},
      {"pipeline_parallel_first_stage_less_layers", R}, {"pipeline_parallel_last_stage_less_layers", R},
      {"pipeline_parallel_layers_per_stage", R}, {"module_fqns_per_model_part", R},
      {"pipeline_parallel_split_points", R},
      {"pipeline_parallel_schedule_csv", X, "a custom pipeline schedule from a file"},
      {"disable_loss_parallel", X, "the loss gathers whole-vocabulary logits on every tensor-parallel rank"},
      {"expert_parallel_comm_backend", R}, {"enable_async_tensor_parallel", U},
      {"pipeline_parallel_expert_parallel_overlap", U}, {"context_parallel_load_balancer", U},
      {"context_parallel_rotate_method", U}, {"enable_compiled_autograd", U}}},
      {"activation_checkpoint", {{"mode", R}, {"selective_ac_option", R}, {"memory_budget", R},
      {"per_op_sac_force_recompute_mm_shapes_by_fqns", U}, {"early_stop", U},
      {"visualize_memory_budget_pareto", U}, {"preserve_rng_state", U}, {"determinism_check", U},
      {"debug", U}}},
      {"compile", {{"enable", U}, {"components", U}, {"backend", U}, {"model_backend_override", U}}},
      {"quantize", {{"linear", R}, {"grouped_mm", R}}},
      {"quantize.linear", {{"float8", R}, {"mx", R}}},
      {"quantize.grouped_mm", {{"float8", R}, {"mx", R}}},
      // [float8] and [mx] are the sections before torchtitan PR #1763 (2025-09-30) moved them under quantize.
      {"float8", {{"enable_fsdp_float8_all_gather", R}, {"precompute_float8_dynamic_scale_for_fsdp", U},
      {"recipe_name", R}, {"filter_fqns", U}, {"emulate", U}, {"moe_fqns_prototype", U},
      {"force_recompute_fp8_weight_in_bwd", U}}},
      {"quantize.linear.float8", {{"enable_fsdp_float8_all_gather", R},
      {"precompute_float8_dynamic_scale_for_fsdp", U}, {"recipe_name", R}, {"filter_fqns", U}, {"emulate", U}}},
      {"quantize.grouped_mm.float8", {{"fqns", U}}},
      {"mx", {{"mxfp8_dim1_cast_kernel_choice", U}, {"recipe_name", U}, {"filter_fqns", U}}},
      {"quantize.linear.mx", {{"mxfp8_dim1_cast_kernel_choice", U}, {"recipe_name", U}, {"filter_fqns", U}}},
      {"quantize.grouped_mm.mx", {{"recipe_name", U}, {"fqns", U}}},
      {"checkpoint", {{"enable", U}, {"enable_checkpoint", U}, {"enable_ft_dataloader_checkpoints", U},
      {"folder", U}, {"interval", U}, {"interval_type", U}, {"initial_load_path", U},
      {"initial_load_model_only", U}, {"initial_load_in_hf", U}, {"initial_load_in_hf_quantized", U},
      {"last_save_model_only", U}, {"last_save_in_hf", U}, {"export_dtype", U}, {"async_mode", U},
      {"keep_latest_k", U}, {"load_step", U}, {"exclude_from_loading", U}, {"enable_first_step_checkpoint", U},
      {"create_seed_checkpoint", U}, {"load_only", U}, {"model_weights_only", U},
      {"last_save_model_weights_only", U}}},
      {"comm", {{"init_timeout_seconds", U}, {"train_timeout_seconds", U}, {"trace_buf_size", U},
      {"save_traces_folder", U}, {"save_traces_file_prefix", U}, {"mode", U}}},
      {"memory_estimation", {{"enable", U}, {"disable_fake_mode", U}}},
      {"fault_tolerance", {{"enable", U}, {"process_group", U}, {"process_group_timeout_ms", U},
      {"replica_id", U}, {"group_size", U}, {"min_replica_size", U}, {"sync_steps", U}, {"should_quantize", U},
      {"fragment_sync_delay", U}, {"fragment_update_alpha", U},
      {"semi_sync_method", X, "DiLoCo / local SGD keep an outer copy of the model"}}},
      {"experimental", {{"custom_import", X, "imports user code that may register another model or trainer"},
      {"custom_args_module", X, "imports user code that may add memory-changing options"},
      // Where torchtitan kept these before 785c34c99 (PR #980, 2025-03-18): the importer reads them as the
      // [parallelism] keys they became (torchtitan_config.cpp, read_moved_keys) before this table is consulted;
      // listed so a command-line override may still spell them so.
      {"context_parallel_degree", R}, {"context_parallel_rotate_method", R}, {"pipeline_parallel_degree", R},
      {"pipeline_parallel_schedule", R}, {"pipeline_parallel_schedule_csv", R},
      {"pipeline_parallel_split_points", R}, {"enable_compiled_autograd", R},
      {"pipeline_parallel_microbatches", X,
       "a count of micro-batches per step, replaced by parallelism.pipeline_parallel_microbatch_size "
       "(a size) in torchtitan 5e2033c75 (PR #1073, 2025-04-07)"},
      {"enable_async_tensor_parallel", U}}},
      {"validation", {{"enable", U}, {"dataset", U}, {"dataset_path", U}, {"local_batch_size", U},
      {"seq_len", U}, {"freq", U}, {"steps", U}, {"dataloader", U}}},
      {"debug", {{"seed", U}, {"deterministic", U}, {"deterministic_warn_only", U},
      {"moe_force_load_balance", U}}}};
  // clang-format on
  return t;
}

const section_rules* find_section(const std::string& name) {
  for (const auto& s : torchtitan_sections())
    if (name == s.name) return &s;
  return nullptr;
}

}  // namespace headroom::detail
