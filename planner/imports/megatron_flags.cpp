// megatron_flags.cpp: the flag tables of megatron_flags.hpp. Flag names and arities are Megatron-LM's
// (megatron/training/arguments.py and the dataclasses it turns into flags: transformer_config.py,
// model_parallel_config.py, training/config/training_config.py, all at NVIDIA/Megatron-LM d98e8a64).
#include "planner/imports/megatron_flags.hpp"

#include <string>
#include <unordered_map>

namespace headroom::detail {
namespace {

using fa = flag_arity;
constexpr flag_role rd = flag_role::read;

// Flags the importer reads (megatron_args.cpp): the model, the layout, training, precision, recompute.
constexpr megatron_flag read_flags[] = {
    // model shape (transformer_config.py; arguments.py _add_network_size_args)
    {"--num-layers", fa::one, rd, ""},
    {"--hidden-size", fa::one, rd, ""},
    {"--num-attention-heads", fa::one, rd, ""},
    {"--ffn-hidden-size", fa::one, rd, ""},
    {"--kv-channels", fa::one, rd, ""},
    {"--group-query-attention", fa::none, rd, ""},
    {"--num-query-groups", fa::one, rd, ""},
    {"--swiglu", fa::none, rd, ""},
    {"--normalization", fa::one, rd, ""},
    {"--position-embedding-type", fa::one, rd, ""},
    {"--use-rotary-position-embeddings", fa::none, rd, ""},
    {"--no-position-embedding", fa::none, rd, ""},
    {"--untie-embeddings-and-output-weights", fa::none, rd, ""},
    {"--disable-bias-linear", fa::none, rd, ""},
    {"--add-qkv-bias", fa::none, rd, ""},
    {"--vocab-size", fa::one, rd, ""},
    {"--padded-vocab-size", fa::one, rd, ""},
    {"--make-vocab-size-divisible-by", fa::one, rd, ""},
    {"--tokenizer-type", fa::one, rd, ""},
    {"--tokenizer-model", fa::one, rd, ""},
    {"--vocab-file", fa::one, rd, ""},
    {"--merge-file", fa::one, rd, ""},
    {"--max-position-embeddings", fa::one, rd, ""},
    {"--seq-length", fa::one, rd, ""},
    {"--attention-dropout", fa::one, rd, ""},
    {"--hidden-dropout", fa::one, rd, ""},
    // mixture of experts and multi-token prediction
    {"--num-experts", fa::one, rd, ""},
    {"--moe-router-topk", fa::one, rd, ""},
    {"--moe-ffn-hidden-size", fa::one, rd, ""},
    {"--moe-shared-expert-intermediate-size", fa::one, rd, ""},
    {"--moe-shared-expert-gate", fa::none, rd, ""},
    {"--moe-layer-freq", fa::one, rd, ""},
    {"--mtp-num-layers", fa::one, rd, ""},
    {"--moe-router-enable-expert-bias", fa::none, rd, ""},
    {"--moe-token-dispatcher-type", fa::one, rd, ""},
    {"--moe-expert-capacity-factor", fa::one, rd, ""},
    {"--moe-pad-expert-input-to-capacity", fa::none, rd, ""},
    {"--moe-flex-dispatcher-backend", fa::one, rd, ""},
    {"--moe-enable-deepep", fa::none, rd, ""},
    // multi-latent attention
    {"--multi-latent-attention", fa::none, rd, ""},
    {"--q-lora-rank", fa::one, rd, ""},
    {"--kv-lora-rank", fa::one, rd, ""},
    {"--qk-head-dim", fa::one, rd, ""},
    {"--qk-pos-emb-head-dim", fa::one, rd, ""},
    {"--v-head-dim", fa::one, rd, ""},
    {"--qk-layernorm", fa::none, rd, ""},
    // parallelism and the pipeline split
    {"--tensor-model-parallel-size", fa::one, rd, ""},
    {"--pipeline-model-parallel-size", fa::one, rd, ""},
    {"--context-parallel-size", fa::one, rd, ""},
    {"--expert-model-parallel-size", fa::one, rd, ""},
    {"--expert-tensor-parallel-size", fa::one, rd, ""},
    {"--sequence-parallel", fa::none, rd, ""},
    {"--use-distributed-optimizer", fa::none, rd, ""},
    {"--num-distributed-optimizer-instances", fa::one, rd, ""},
    {"--pipeline-model-parallel-layout", fa::one, rd, ""},
    {"--decoder-first-pipeline-num-layers", fa::one, rd, ""},
    {"--decoder-last-pipeline-num-layers", fa::one, rd, ""},
    {"--account-for-embedding-in-pipeline-split", fa::none, rd, ""},
    {"--account-for-loss-in-pipeline-split", fa::none, rd, ""},
    {"--num-layers-per-virtual-pipeline-stage", fa::one, rd, ""},
    {"--num-virtual-stages-per-pipeline-rank", fa::one, rd, ""},
    {"--virtual-pipeline-model-parallel-size", fa::one, rd, ""},
    {"--use-megatron-fsdp", fa::none, rd, ""},
    {"--data-parallel-sharding-strategy", fa::one, rd, ""},
    // training, precision, optimizer, recompute
    {"--micro-batch-size", fa::one, rd, ""},
    {"--global-batch-size", fa::one, rd, ""},
    {"--bf16", fa::none, rd, ""},
    {"--fp16", fa::none, rd, ""},
    {"--fp8-format", fa::one, rd, ""},
    {"--fp8-recipe", fa::one, rd, ""},
    {"--use-precision-aware-optimizer", fa::none, rd, ""},
    {"--exp-avg-dtype", fa::one, rd, ""},
    {"--exp-avg-sq-dtype", fa::one, rd, ""},
    {"--main-grads-dtype", fa::one, rd, ""},
    {"--main-params-dtype", fa::one, rd, ""},
    {"--optimizer-cpu-offload", fa::none, rd, ""},
    {"--optimizer-offload-fraction", fa::one, rd, ""},
    {"--grad-reduce-in-bf16", fa::none, rd, ""},
    {"--accumulate-allreduce-grads-in-fp32", fa::none, rd, ""},
    {"--recompute-granularity", fa::one, rd, ""},
    {"--recompute-method", fa::one, rd, ""},
    {"--recompute-num-layers", fa::one, rd, ""},
    {"--recompute-modules", fa::list, rd, ""},
    {"--recompute-activations", fa::none, rd, ""},
    {"--use-flash-attn", fa::none, rd, ""},
    {"--attention-backend", fa::one, rd, ""},
    {"--moe-grouped-gemm", fa::none, rd, ""},
    {"--deterministic-mode", fa::none, rd, ""},
    {"--cross-entropy-loss-fusion", fa::none, rd, ""},
    {"--cross-entropy-fusion-impl", fa::one, rd, ""},
    // fusions turned off whose unfused path keeps other tensors (megatron_args.cpp read_fusions)
    {"--no-rope-fusion", fa::none, rd, ""},
    {"--no-bias-swiglu-fusion", fa::none, rd, ""},
    {"--no-masked-softmax-fusion", fa::none, rd, ""},
    {"--attention-softmax-in-fp32", fa::none, rd, ""},
    {"--apply-query-key-layer-scaling", fa::none, rd, ""},
    {"--no-create-attention-mask-in-dataloader", fa::none, rd, ""},
};

// Flags that change memory and that the planner does not model: listed, and refused by the CLI unless
// --allow-unmodelled.
constexpr flag_role um = flag_role::unmodelled;
constexpr megatron_flag unmodelled_flags[] = {
    {"--fine-grained-activation-offloading", fa::none, um,
     "activations offloaded to host memory; priced as kept on the GPU"},
    {"--offload-modules", fa::any, um, "activations offloaded to host memory; priced as kept on the GPU"},
    {"--cpu-offloading", fa::none, um,
     "activations / weights offloaded to host memory; priced as kept on the GPU"},
    {"--cpu-offloading-num-layers", fa::any, um,
     "layers offloaded to host memory; priced as kept on the GPU"},
    {"--moe-layer-recompute", fa::none, um,
     "deprecated form of --recompute-modules moe; not read, priced without it"},
    {"--fp8-param-gather", fa::none, rd, ""},
    {"--reuse-grad-buf-for-mxfp8-param-ag", fa::none, um,
     "MXFP8 parameter all-gather in the gradient buffer"},
    {"--tp-comm-overlap", fa::none, um, "TransformerEngine userbuffers for TP overlap; not priced"},
    {"--overlap-moe-expert-parallel-comm", fa::none, um,
     "1F1B A2A overlap keeps two micro-batches in flight"},
    {"--delay-wgrad-compute", fa::none, um, "weight-gradient inputs kept until the delayed wgrad GEMM"},
    {"--use-torch-fsdp2", fa::none, um, "PyTorch FSDP2 sharding; not modelled"},
    {"--fsdp-double-buffer", fa::none, um, "Megatron FSDP double buffers; not modelled"},
    {"--use-nccl-ub", fa::none, um, "NCCL user buffers; not priced"},
    {"--megatron-fsdp-main-grads-dtype", fa::any, um, "Megatron FSDP gradient dtype; not modelled"},
    {"--megatron-fsdp-grad-comm-dtype", fa::any, um, "Megatron FSDP communication dtype; not modelled"},
    {"--moe-router-padding-for-fp8", fa::none, um,
     "routing map padded per expert (up to E x 15 rows); not priced"},
    {"--moe-router-padding-for-quantization", fa::none, um, "routing map padded per expert; not priced"},
    {"--moe-latent-size", fa::any, um, "latent MoE projections; not modelled"},
    {"--distribute-saved-activations", fa::none, um, "saved activations split over TP ranks; not modelled"},
    {"--hybrid-layer-pattern", fa::any, um, "Mamba hybrid layers; not modelled"},
    {"--hybrid-override-pattern", fa::any, um, "Mamba hybrid layers; not modelled"},
    {"--num-virtual-stages-per-pipeline-rank-uneven", fa::any, um, "uneven virtual stages; not modelled"},
    // FP4 (arguments.py l.1100-1109): one edit from the FP8 flags, so listed for what they are, not taken as typos
    {"--fp4-format", fa::any, um, "FP4 (NVFP4) linear layers; not modelled"},
    {"--fp4-recipe", fa::any, um, "FP4 (NVFP4) linear layers; not modelled"},
    {"--fp4-param-gather", fa::none, um, "FP4 parameter all-gather; not modelled"},
};

// Flags that do not change a rank's peak memory: logging, data, tokenizer files, learning rate, seeds,
// checkpoints, kernel choices and fusions that keep the same saved tensors.
constexpr const char* unused_flags[] = {
    "--distributed-timeout-minutes",
    "--overlap-grad-reduce",
    "--overlap-param-gather",
    "--use-mcore-models",
    "--train-samples",
    "--train-iters",
    "--exit-duration-in-mins",
    "--exit-interval",
    "--no-save-optim",
    "--no-save-rng",
    "--no-check-for-nan-in-loss-and-grad",
    "--manual-gc",
    "--manual-gc-interval",
    "--transformer-impl",
    "--data-cache-path",
    "--data-path",
    "--split",
    "--no-mmap-bin-files",
    "--num-workers",
    "--rotary-base",
    "--rotary-percent",
    "--rotary-seq-len-interpolation-factor",
    "--rotary-scaling-factor",
    "--mscale",
    "--mscale-all-dim",
    "--norm-epsilon",
    "--clip-grad",
    "--weight-decay",
    "--lr-decay-samples",
    "--lr-warmup-samples",
    "--lr-warmup-init",
    "--lr",
    "--min-lr",
    "--lr-decay-style",
    "--adam-beta1",
    "--adam-beta2",
    "--adam-eps",
    "--moe-router-load-balancing-type",
    "--moe-aux-loss-coeff",
    "--moe-z-loss-coeff",
    "--moe-router-group-topk",
    "--moe-router-num-groups",
    "--moe-router-topk-scaling-factor",
    "--moe-router-score-function",
    "--moe-router-bias-update-rate",
    "--moe-router-dtype",
    "--moe-permute-fusion",
    // SMs given to the flex dispatcher's kernels (transformer_config.py l.964-975): speed, not memory
    "--moe-flex-dispatcher-num-sms",
    "--moe-deepep-num-sms",
    "--moe-hybridep-num-sms",
    "--moe-router-fusion",
    "--moe-router-pre-softmax",
    "--moe-router-force-load-balancing",
    "--mtp-loss-scaling-factor",
    "--eval-iters",
    "--eval-interval",
    "--finetune",
    "--no-load-optim",
    "--no-load-rng",
    "--auto-detect-ckpt-format",
    "--load",
    "--save",
    "--save-interval",
    "--dist-ckpt-strictness",
    "--ckpt-format",
    "--no-ckpt-fully-parallel-save",
    "--init-method-std",
    "--log-timers-to-tensorboard",
    "--log-memory-to-tensorboard",
    "--log-num-zeros-in-grad",
    "--log-params-norm",
    "--log-validation-ppl-to-tensorboard",
    "--log-throughput",
    "--log-interval",
    "--logging-level",
    "--tensorboard-dir",
    "--wandb-project",
    "--wandb-exp-name",
    "--wandb-save-dir",
    "--enable-experimental",
    "--step-batch-size-schedule",
    "--rampup-batch-size",
    "--lr-warmup-fraction",
    "--lr-decay-iters",
    "--lr-warmup-iters",
    // GeLU: the fused GeLUFunction keeps fc1's output and the bias (fused_bias_gelu.py l.36-40), F.gelu on
    // fc1's output (+ bias) keeps that sum: the same s*b*f/t (mlp.py l.318-333); the routed experts cannot fuse
    // GeLU at all (experts.py l.963-985 raises), and --disable-bias-linear turns it off (arguments.py l.1605-1606).
    "--no-bias-gelu-fusion",
    // Unfused, each weight's gradient is a new weight-shaped tensor (activation dtype) until DDP's hook adds it
    // to main_grad and drops it (distributed_data_parallel.py l.575-579): one weight at a time, the output
    // layer's in the loss's backward (tensor_parallel/layers.py l.713-760). The fused default holds as much or
    // more: TE's cached dummy wgrad, one per weight shape, for the whole run (module/base.py l.134-148,
    // layers.py l.733-760). Neither is priced (docs/model.md, "Megatron's unfused paths"). The exception,
    // left: TEGroupedMLP's experts, whose unfused wgrad holds all local experts at once (grouped_linear.py
    // l.1193-1200).
    "--no-gradient-accumulation-fusion",
    // The same _bias_dropout_add_func eagerly instead of under jit_fuser (fused_bias_dropout.py l.11-80):
    // F.dropout keeps its 1-byte mask, as the ledger prices.
    "--no-bias-dropout-fusion",
    "--calculate-per-token-loss",
    "--init-model-with-meta-device",
    "--profile",
    "--profile-step-start",
    "--profile-step-end",
    "--profile-ranks",
    "--seed",
    "--decoupled-lr",
    "--decoupled-min-lr",
    "--empty-unused-memory-level",
    "--fp8-amax-history-len",
    "--fp8-amax-compute-algo",
    "--mock-data",
    "--tiktoken-pattern",
    "--apply-layernorm-1p",
    "--overlap-cpu-optimizer-d2h-h2d",
    "--use-checkpoint-args",
    "--no-async-tensor-model-parallel-allreduce",
    "--async-save",
    "--use-dist-ckpt",
    "--dataloader-type",
    "--valid-data-path",
    "--train-data-path",
    "--test-data-path",
    "--eod-mask-loss",
    "--reset-position-ids",
    "--reset-attention-mask",
    "--timing-log-level",
    "--log-params-norm",
    "--tensorboard-log-interval",
    "--log-world-size-to-tensorboard",
    "--log-loss-scale-to-tensorboard",
    "--no-persist-layer-norm",
    "--bias-swiglu-fusion",
    "--bias-gelu-fusion",
    "--masked-softmax-fusion",
    "--loss-scale",
    "--initial-loss-scale",
    "--min-loss-scale",
    "--loss-scale-window",
    "--hysteresis",
    "--use-cpu-initialization",
    "--ddp-average-in-collective",
    "--check-weight-hash-across-dp-replicas-interval",
    "--rotary-interleaved",
    "--optimizer",
    "--sgd-momentum",
    "--start-weight-decay",
    "--end-weight-decay",
    "--weight-decay-incr-style",
    "--override-opt_param-scheduler",
    "--use-checkpoint-opt_param-scheduler",
    "--pretrained-checkpoint",
    "--tokenizer-prompt-format",
    "--data-args-path",
    "--per-split-data-args-path",
    "--num-dataset-builder-threads",
    "--object-storage-cache-path",
    "--mid-level-dataset-surplus",
    "--vocab-extra-ids",
    "--moe-use-upcycling",
    "--moe-input-jitter-eps",
    "--moe-per-layer-logging",
    "--moe-router-topk-limited-devices",
    "--use-legacy-models",
    "--spec",
    "--exit-signal-handler",
    "--log-progress",
    "--log-energy",
    "--ckpt-fully-parallel-load",
    "--ckpt-assume-constant-structure",
};

std::unordered_map<std::string_view, megatron_flag> build_index() {
  std::unordered_map<std::string_view, megatron_flag> m;
  for (const auto& f : read_flags) m.emplace(f.name, f);
  for (const auto& f : unmodelled_flags) m.emplace(f.name, f);
  for (const char* n : unused_flags) m.emplace(n, megatron_flag{n, fa::any, flag_role::unused, ""});
  return m;
}

}  // namespace

const std::vector<std::string>& megatron_flag_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& f : read_flags) v.emplace_back(f.name);
    for (const auto& f : unmodelled_flags) v.emplace_back(f.name);
    for (const char* n : unused_flags) v.emplace_back(n);
    return v;
  }();
  return names;
}

const megatron_flag* find_megatron_flag(std::string_view name) {
  static const auto index = build_index();
  const auto it = index.find(name);
  return it == index.end() ? nullptr : &it->second;
}

}  // namespace headroom::detail
