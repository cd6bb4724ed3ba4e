// deepspeed_keys.cpp: the key tables of the DeepSpeed JSON importer (deepspeed_keys.hpp), one row per key of
// DeepSpeed's config models (deepspeedai/DeepSpeed @ edaa7221, 2026-08-22) with what headroom does with it.
#include "planner/imports/deepspeed_keys.hpp"

namespace headroom::detail {

// Top-level keys (runtime/constants.py, runtime/config.py). Read ones are handled below.
const std::vector<key_rule>& deepspeed_top_keys() {
  using namespace key_uses;
  // One row per key would make the table several screens long: rows are packed by hand.
  // clang-format off
  static const std::vector<key_rule> t = {
      {"train_batch_size", R}, {"train_micro_batch_size_per_gpu", R}, {"gradient_accumulation_steps", R},
      {"zero_optimization", R}, {"bf16", R}, {"bfloat16", R}, {"fp16", R}, {"data_types", R},
      {"activation_checkpointing", R}, {"optimizer", R}, {"communication_data_type", R},
      // the pre-dict "zero_optimization": true form (zero/config.py l.58-66)
      {"allgather_size", R}, {"amp", X, "Apex AMP keeps fp32 weights and casts per op: not a modelled recipe"},
      {"torch_autocast", X, "torch.autocast keeps fp32 weights and casts per op: not a modelled recipe"},
      {"sequence_parallel_size", X, "Ulysses sequence parallelism divides activations: not read from this file"},
      {"tensor_parallel", X, "AutoTP tensor parallelism: pass --tp (the file's degree is not read)"},
      {"pipeline", X, "pipeline stages come from the script's PipelineModule: pass --pp"},
      {"elasticity", X, "elastic training chooses the batch sizes at launch"},
      {"sparse_attention", X, "block-sparse attention changes activation memory"},
      {"hybrid_engine", X, "the RLHF hybrid engine keeps inference buffers"},
      {"compression_training", X, "quantized or pruned training changes weight bytes"},
      {"quantize_training", X, "quantized training changes weight bytes"},
      {"weight_quantization", X, "quantized weights change weight bytes"}, {"steps_per_print", U},
      {"wall_clock_breakdown", U}, {"gradient_clipping", U}, {"scheduler", U}, {"prescale_gradients", U},
      {"gradient_predivide_factor", U}, {"dump_state", U}, {"flops_profiler", U}, {"tensorboard", U},
      {"wandb", U}, {"csv_monitor", U}, {"comet", U}, {"comms_logger", U}, {"checkpoint", U},
      {"zero_allow_untested_optimizer", U}, {"zero_force_ds_cpu_optimizer", U}, {"memory_breakdown", U},
      {"sparse_gradients", U}, {"disable_allgather", U}, {"dataloader_drop_last", U}, {"eigenvalue", U},
      {"progressive_layer_drop", U}, {"curriculum_learning", U}, {"data_efficiency", U}, {"autotuning", U},
      {"aio", U}, {"seq_parallel_communication_data_type", U}, {"gradient_allreduce_op", U},
      {"graph_harvesting", U}, {"use_data_before_expert_parallelism", U}, {"timers", U}, {"compile", U},
      {"nebula", U}, {"load_universal_checkpoint", U}, {"use_node_local_storage", U}};
  // clang-format on
  return t;
}

// zero_optimization keys (zero/config.py l.95-400). The stage 3 ones accept their field name too
// (pydantic populate_by_name, runtime/config_utils.py l.101-109): both spellings are listed.
const std::vector<key_rule>& deepspeed_zero_keys() {
  using namespace key_uses;
  // One row per key would make the table several screens long: rows are packed by hand.
  // clang-format off
  static const std::vector<key_rule> t = {
      {"stage", R}, {"contiguous_gradients", R}, {"reduce_bucket_size", R}, {"allgather_bucket_size", R},
      {"overlap_comm", R}, {"offload_param", R}, {"offload_optimizer", R}, {"cpu_offload", R},
      {"cpu_offload_param", R}, {"stage3_prefetch_bucket_size", R}, {"prefetch_bucket_size", R},
      {"stage3_param_persistence_threshold", R}, {"param_persistence_threshold", R},
      {"stage3_max_live_parameters", R}, {"max_live_parameters", R}, {"sub_group_size", R},
      {"reduce_scatter", U}, {"use_multi_rank_bucket_allreduce", U}, {"allgather_partitions", U},
      {"load_from_fp32_weights", U}, {"elastic_checkpoint", U}, {"cpu_offload_use_pin_memory", U},
      {"stage3_max_reuse_distance", U}, {"max_reuse_distance", U}, {"ignore_unused_parameters", U},
      {"stage3_gather_16bit_weights_on_model_save", U}, {"gather_16bit_weights_on_model_save", U},
      {"stage3_gather_fp16_weights_on_model_save", U}, {"stage3_module_granularity_threshold", U},
      {"module_granularity_threshold", U}, {"stage3_use_all_reduce_for_fetch_params", U},
      {"use_all_reduce_for_fetch_params", U}, {"round_robin_gradients", U}, {"log_trace_cache_warnings", U},
      {"enable_sanity_checks", U}, {"pipeline_loading_checkpoint", U}, {"override_module_apply", U},
      {"memory_efficient_linear", U}, {"save_muon_momentum_buffer_in_memory", U}, {"leaf_module", U},
      {"stage3_allgather_sequential", X, "gathers parameters one by one without the flat bucket"},
      {"allgather_sequential", X, "gathers parameters one by one without the flat bucket"},
      {"stage3_model_persistence_threshold", X, "caps the unpartitioned small parameters"},
      {"model_persistence_threshold", X, "caps the unpartitioned small parameters"},
      {"zero_hpz_partition_size", X, "ZeRO++ hpZ keeps a secondary copy of the parameters per node"},
      {"zero_quantized_weights", X, "ZeRO++ qwZ gathers int8 weights"},
      {"zero_quantized_nontrainable_weights", X, "frozen weights stored quantized"},
      {"zero_quantized_gradients", X, "ZeRO++ qgZ reduces int4 gradients"},
      {"zeropp_loco_param", X, "LoCo keeps error-feedback buffers"},
      {"mics_shard_size", X, "MiCS shards over a sub-group, not the whole data-parallel group"},
      {"mics_hierarchical_params_gather", X, "MiCS hierarchical gather buffers"},
      {"zenflow", X, "ZenFlow keeps important gradients on the GPU"},
      {"legacy_stage1", X, "the pre-0.5.9 ZeRO-1, refused by DeepSpeed itself"}};
  // clang-format on
  return t;
}

// activation_checkpointing keys (runtime/activation_checkpointing/config.py l.27-53). They configure
// deepspeed.checkpointing, which Megatron-DeepSpeed calls; they do not turn recomputation on.
const std::vector<key_rule>& deepspeed_ac_keys() {
  using namespace key_uses;
  // One row per key would make the table several screens long: rows are packed by hand.
  // clang-format off
  static const std::vector<key_rule> t = {
      {"partition_activations", X, "splits saved checkpoints across the model-parallel group"},
      {"cpu_checkpointing", X, "moves saved checkpoints to host memory"},
      {"contiguous_memory_optimization", X, "preallocates one buffer for all checkpoints"},
      {"number_checkpoints", U}, {"synchronize_checkpoint_boundary", U}, {"profile", U}};
  // clang-format on
  return t;
}

// offload_param / offload_optimizer keys (zero/offload_config.py l.21-105).
const std::vector<key_rule>& deepspeed_offload_keys() {
  using namespace key_uses;
  // clang-format off
  static const std::vector<key_rule> t = {
      {"device", R}, {"ratio", R}, {"nvme_path", U}, {"buffer_count", U}, {"buffer_size", U}, {"max_in_cpu", U},
      {"pin_memory", U}, {"pipeline_read", U}, {"pipeline_write", U}, {"fast_init", U}, {"pipeline", U},
      {"super_offload", U}, {"cpuadam_cores_perc", U}};
  // clang-format on
  return t;
}

const std::vector<key_rule>& deepspeed_bf16_keys() {
  using namespace key_uses;
  // One row per key would make the table several screens long: rows are packed by hand.
  // clang-format off
  static const std::vector<key_rule> t = {
      {"enabled", R}, {"immediate_grad_update", U}, {"check_grad_overflow", U},
      {"bf16_master_weights_and_grads", X, "fp32 master weights and gradients replaced by bf16"},
      {"bf16_optimizer_states", X, "Adam states in bf16"}};
  // clang-format on
  return t;
}

const std::vector<key_rule>& deepspeed_fp16_keys() {
  using namespace key_uses;
  // One row per key would make the table several screens long: rows are packed by hand.
  // clang-format off
  static const std::vector<key_rule> t = {
      {"enabled", R}, {"auto_cast", U}, {"loss_scale", U}, {"initial_scale_power", U}, {"loss_scale_window", U},
      {"hysteresis", U}, {"consecutive_hysteresis", U}, {"min_loss_scale", U},
      {"fp16_master_weights_and_grads", X, "fp32 master weights and gradients replaced by fp16"}};
  // clang-format on
  return t;
}

}  // namespace headroom::detail
