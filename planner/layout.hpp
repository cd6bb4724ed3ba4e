// layout.hpp: how a job is laid out over GPUs (tp, pp, cp, dp, ZeRO stage, recompute) and the training
// and device settings a plan is made for. One `problem` plus one `layout` is one plan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "enum_names.hpp"
#include "errors.hpp"
#include "model_spec.hpp"
#include "recipe.hpp"
#include "reserve.hpp"
#include "units.hpp"

namespace headroom {

// none, selective (Korthikanti et al.: the attention core recomputed), full (only the layer input kept),
// selective_op: torchtitan's per-op selective checkpointing (mode = "selective", selective_ac_option = "op"),
// which keeps the outputs of the ops on its save list except every second matmul (ledger.hpp, docs/model.md,
// "torchtitan's per-op policy"), and full_every_2 .. full_every_8: torchtitan's layer policy
// (selective_ac_option = N), every N-th block of a stage fully recomputed and the others not at all.
enum class recompute_mode {
  none,
  selective,
  full,
  selective_op,
  full_every_2,
  full_every_3,
  full_every_4,
  full_every_5,
  full_every_6,
  full_every_7,
  full_every_8,
};
// The number of recompute modes (arrays indexed by recompute_mode).
inline constexpr std::size_t recompute_mode_count = 11;
// Returns N of full_every_N, or 0 for the modes that treat every layer alike.
constexpr int full_every(recompute_mode r) {
  const int i = static_cast<int>(r) - static_cast<int>(recompute_mode::full_every_2);
  return i >= 0 ? i + 2 : 0;
}
// The largest N a mode names (torchtitan's selective_ac_option beyond it is not modelled).
inline constexpr int max_full_every = 8;
// Returns full_every_N for 2 <= n <= max_full_every.
constexpr recompute_mode full_every_mode(int n) {
  return static_cast<recompute_mode>(static_cast<int>(recompute_mode::full_every_2) + n - 2);
}
// Returns the mode layer `j` (0-based, counted over the layers of one stage) runs under `r`: under
// full_every_N the N-th, 2N-th, ... are fully recomputed, the others not (torchtitan counts its blocks from
// 1 and checkpoints those whose count is a multiple of N); any other mode is the same for every layer.
constexpr recompute_mode mode_of_layer(recompute_mode r, std::int64_t j) {
  const int n = full_every(r);
  if (n == 0) return r;
  return (j + 1) % n == 0 ? recompute_mode::full : recompute_mode::none;
}
// Returns the layers of a stage of `layers` layers that `r` fully recomputes: layers / N under full_every_N.
constexpr std::int64_t fully_recomputed_layers(recompute_mode r, std::int64_t layers) {
  const int n = full_every(r);
  return n == 0 ? (r == recompute_mode::full ? layers : 0) : layers / n;
}
// eager: the s x s scores kept; flash: a fused kernel (SDPA's flash, cuDNN or memory-efficient kernels) that
// keeps its output and a log-sum-exp; flex: PyTorch's compiled flex_attention, which keeps the same, and under
// torchtitan's per-op policy its compiled region's inputs q, k, v too (ledger.cpp, op_policy_entries).
enum class attention_kind { eager, flash, flex };
// How the loss holds the logits (docs/model.md, "The output phase"): fused = Megatron's vocab-parallel
// cross-entropy (an fp32 copy turned into the softmax in place, saved for backward); compiled = the same steps
// under torch.compile (Megatron's --cross-entropy-loss-fusion, its native implementation), measured to hold
// one more fp32 logits-sized tensor (output_phase.cpp); unfused = PyTorch's F.cross_entropy on
// upcast logits (log_softmax keeps its own fp32 output, backward makes two more).
enum class loss_kind { fused, compiled, unfused };

// The modes the layout search tries when --recompute is not given (search_space.cpp iterates this table): the
// three every framework runs. selective-op is torchtitan's alone, so the search tries it only when asked.
inline constexpr enum_name<recompute_mode> recompute_names[] = {
    {recompute_mode::none, "none"}, {recompute_mode::selective, "selective"}, {recompute_mode::full, "full"}};
// Every mode a user, a problem file or an importer may name: the searched three and torchtitan's policies.
inline constexpr enum_name<recompute_mode> recompute_mode_names[] = {
    {recompute_mode::none, "none"},
    {recompute_mode::selective, "selective"},
    {recompute_mode::full, "full"},
    {recompute_mode::selective_op, "selective-op"},
    {recompute_mode::full_every_2, "full-every-2"},
    {recompute_mode::full_every_3, "full-every-3"},
    {recompute_mode::full_every_4, "full-every-4"},
    {recompute_mode::full_every_5, "full-every-5"},
    {recompute_mode::full_every_6, "full-every-6"},
    {recompute_mode::full_every_7, "full-every-7"},
    {recompute_mode::full_every_8, "full-every-8"}};
static_assert(std::size(recompute_mode_names) == recompute_mode_count);
inline constexpr enum_name<attention_kind> attention_names[] = {
    {attention_kind::eager, "eager"}, {attention_kind::flash, "flash"}, {attention_kind::flex, "flex"}};
inline constexpr enum_name<loss_kind> loss_names[] = {
    {loss_kind::fused, "fused"}, {loss_kind::compiled, "compiled"}, {loss_kind::unfused, "unfused"}};
// Returns the name table of E (chosen by the argument's type; its value is ignored).
constexpr std::span<const enum_name<recompute_mode>> name_table(recompute_mode) {
  return recompute_mode_names;
}
constexpr std::span<const enum_name<attention_kind>> name_table(attention_kind) {
  return attention_names;
}
constexpr std::span<const enum_name<loss_kind>> name_table(loss_kind) {
  return loss_names;
}

// Megatron-Core's recompute modules (--recompute-modules; transformer_config.py): what selective
// recomputation drops. A set is a bitmask of 1 << module. The default, as Megatron's, is core_attn alone.
enum class recompute_module : std::uint8_t {
  core_attn,       // the attention core's internals (act_role::attention_core)
  layernorm,       // the norms' outputs
  mla_up_proj,     // multi-latent attention: q, k, v after the up projections
  moe_act,         // the routed (and shared) experts' activation outputs
  mlp,             // a dense MLP's internals
  moe,             // a MoE MLP's internals: router, dispatch, experts, shared experts
  shared_experts,  // the shared experts' internals
};
inline constexpr enum_name<recompute_module> recompute_module_names[] = {
    {recompute_module::core_attn, "core_attn"},     {recompute_module::layernorm, "layernorm"},
    {recompute_module::mla_up_proj, "mla_up_proj"}, {recompute_module::moe_act, "moe_act"},
    {recompute_module::mlp, "mlp"},                 {recompute_module::moe, "moe"},
    {recompute_module::shared_experts, "shared_experts"}};
constexpr std::span<const enum_name<recompute_module>> name_table(recompute_module) {
  return recompute_module_names;
}
// Returns the bit of module `m` in a recompute-module set.
constexpr std::uint32_t module_bit(recompute_module m) {
  return 1u << static_cast<unsigned>(m);
}
inline constexpr std::uint32_t default_recompute_modules = 1u;  // {core_attn}

// How the MoE token dispatcher moves routed tokens (Megatron-Core token_dispatcher.py).
enum class dispatcher_kind { alltoall, allgather };
inline constexpr enum_name<dispatcher_kind> dispatcher_names[] = {{dispatcher_kind::alltoall, "alltoall"},
                                                                  {dispatcher_kind::allgather, "allgather"}};
constexpr std::span<const enum_name<dispatcher_kind>> name_table(dispatcher_kind) {
  return dispatcher_names;
}

// The routing settings the routed-token activations depend on (docs/model.md, "Routed tokens").
struct moe_routing {
  // Routed rows on the busiest rank over the balanced k * tokens * etp (Megatron logs it as the overload
  // factor, PR #4110): 1 = perfectly balanced, the default; at most ep * min(k, E/ep) / k.
  double imbalance = 1.0;
  double capacity_factor = 0;  // > 0 with pad_to_capacity: every expert gets its padded capacity
  bool pad_to_capacity = false;
  dispatcher_kind dispatcher = dispatcher_kind::alltoall;
};

// How the layers are cut into pipeline stages (planner/schedule.hpp). All defaults: a balanced split.
struct pipeline_split {
  std::vector<std::int64_t> layers;  // --pp-layout: one count per stage
  std::int64_t first_stage = 0;      // --first-stage-layers (Megatron's decoder-first-pipeline-num-layers)
  std::int64_t last_stage = 0;       // --last-stage-layers
  bool embedding_as_layer = false;   // Megatron's account-for-embedding-in-pipeline-split, BLOOM's partition
  bool loss_as_layer = false;        // Megatron's account-for-loss-in-pipeline-split
  // Returns whether this is the default: DeepSpeed's uniform split of the transformer layers alone.
  bool is_balanced() const {
    return layers.empty() && first_stage == 0 && last_stage == 0 && !embedding_as_layer && !loss_as_layer;
  }
};

struct training_spec {
  std::int64_t seq = 2048;
  std::int64_t micro_batch = 1;
  std::int64_t global_batch =
      1536;  // sequences per step; sets the micro-batches per step (GPT-3: 1536 x 2048)
  attention_kind attention = attention_kind::eager;
  loss_kind loss = loss_kind::fused;
  pipeline_split split;
  std::uint32_t recompute_modules = default_recompute_modules;  // what selective recomputation drops
  moe_routing routing;                                            // mixture-of-experts models only
};

struct device_spec {
  std::string gpu_type;               // --gpu-type's name, when the capacity came from it ("" otherwise)
  std::int64_t capacity = 192 * gib;  // bytes of one GPU
  // No GPU type or memory was given: the capacity is the default above, an assumption the titles state.
  bool capacity_assumed = false;
  reserve_model
      reserve;  // kept back for context, NCCL, fragmentation (planner/reserve.hpp; 10 GiB by default)
  // Library workspaces allocated through the caching allocator at first use and kept all run (PyTorch's two
  // cuBLAS workspaces, TransformerEngine's when the launch uses it: planner/workspaces.hpp); inside allocated
  // and reserved memory, so the step peak counts them and the step trace allocates them first. Default:
  // PyTorch's two of 32 MiB (sm90, or an unknown GPU); --gpu-type and a launch's libraries size them.
  std::int64_t allocator_workspaces = 64 * mib;
  // Memory outside the allocator that the step peak must leave room for: CUDA context (512 MiB) and NCCL
  // buffers (512 MiB): a documented default until `probe overheads` measures it (docs/fixed-overheads.md).
  std::int64_t fixed_overheads = 1024 * mib;
  int gpus_per_node = 8;
};

struct layout {
  int gpus = 1;
  int tp = 1;
  int pp = 1;
  int cp = 1;
  int vpp = 1;  // virtual (interleaved) stages per pipeline rank
  int zero = 0;
  recompute_mode recompute = recompute_mode::none;
  bool sequence_parallel = true;   // only meaningful when tp > 1
  bool offload_optimizer = false;  // ZeRO-Offload: master and optimizer states in host memory
  bool offload_params = false;     // ZeRO-3 parameter offload (DeepSpeed offload_param): the sharded
                                   // parameters in host memory, gathered to the GPU layer by layer
  int zero3_inflight_units = 2;    // unsharded layers gathered at once under ZeRO-3
  // DeepSpeed's stage3_max_live_parameters: gathered parameters alive at once (0: no limit); it caps the
  // layers in flight at the whole layers that fit in it.
  std::int64_t zero3_live_params = 0;
  // FSDP's reshard_after_forward: false keeps every gathered layer from its forward to its backward, so the
  // stage's whole unsharded parameters are the transient (ZeRO-2-like parameter memory).
  bool reshard_after_forward = true;
  int ep = 1;   // expert parallelism: routed experts divided over ep ranks (carved out of dp * tp * cp)
  int etp = 0;  // expert tensor parallelism; 0: the same as tp (Megatron's default)
  // Hybrid sharding (HSDP, Megatron's num_distributed_optimizer_instances): the data-parallel ranks form
  // dp_replicate replicas, and ZeRO shards over the dp * cp / dp_replicate ranks of one replica.
  int dp_replicate = 1;
  // DeepSpeed's communication buckets, in elements (0: none, as Megatron and FSDP; an imported DeepSpeed
  // config sets them): the gradient reduce buckets resident on the GPU (with overlap_comm two of
  // reduce_bucket_size; planner/imports/deepspeed_config.cpp derives it) and ZeRO-3's prefetch bucket
  // (deepspeed/runtime/zero/config.py; docs/model.md, "DeepSpeed buckets"). The all-gather bucket allocates
  // nothing: parameters are gathered in place.
  std::int64_t reduce_bucket = 0, prefetch_bucket = 0;

  // Returns the data-parallel degree N / (tp * pp * cp).
  int dp() const { return gpus / (tp * pp * cp); }
  // Returns the number of ranks ZeRO shards the dense state over: dp * cp (as Megatron's distributed optimizer
  // does at run time, over its intra_dp_cp_group), divided by the HSDP replicas.
  int shard_degree() const { return dp() * cp / dp_replicate; }
  // Returns the expert tensor-parallel degree (tp unless stated).
  int expert_tp() const { return etp > 0 ? etp : tp; }
  // Returns the expert data-parallel degree dp * tp * cp / (ep * etp) (Megatron-Core parallel_state.py's
  // expert_data_parallel_size, per pipeline stage), divided by the HSDP replicas: what the experts' state
  // shards over. 1 when ep * etp does not divide (layout_error refuses such a layout).
  int expert_shard_degree() const {
    const long long ranks = static_cast<long long>(dp()) * tp * cp, expert = static_cast<long long>(ep) * expert_tp();
    return expert > 0 && ranks % expert == 0 ? static_cast<int>(ranks / expert) / dp_replicate : 1;
  }
  bool sp() const { return sequence_parallel && tp > 1; }
};

struct problem {
  model_spec model;
  recipe precision;  // bytes per parameter of each buffer, and of activations
  training_spec training;
  device_spec device;
};

// Returns the smallest GPU count of at least `n` that a job takes in whole nodes of `gpus_per_node`: within
// one node a count that divides it (1, 2, 4, 8 for nodes of 8), beyond one a multiple of it (16, 24, 32, ...).
// --min-gpus rounds to it, and says so.
constexpr int whole_node_count(int n, int gpus_per_node) {
  if (gpus_per_node < 1) return n;
  if (n > gpus_per_node) return (n + gpus_per_node - 1) / gpus_per_node * gpus_per_node;
  int d = n < 1 ? 1 : n;
  while (gpus_per_node % d != 0) ++d;
  return d;
}

// Bounds on counts a user gives (README, limits): beyond them a number is a typo, and the search's cost grows
// with them. GPUs in a job; GPUs per node (the search tries every tp up to it).
inline constexpr int max_gpus = 10'000'000;
inline constexpr int max_gpus_per_node = 1024;

// Returns the first of the layout's sharding settings that is out of range or contradicts another, as the
// bad_input to throw, or nullopt: ZeRO stage 0-3, ZeRO-3 in-flight units 1-1000 (the layer in use is always
// gathered), live parameters not negative, optimizer offload only with ZeRO 1-3. layout_error asks it first;
// the search asks it of the user's fixed settings.
std::optional<bad_input> sharding_error(const layout& l);

// Returns the refusal of ZeRO stage `zero` for recipe `r`: the stages it runs with (recipe::lowest_zero,
// highest_zero) and why. layout_error returns it where data parallelism shards; the search for a fixed stage.
bad_input recipe_zero_error(const recipe& r, int zero);

// Returns why model `m` cannot run a sequence of `t.seq` tokens whatever the layout, as the bad_input to throw,
// or nullopt: a learned position table has max_positions rows and no embedding past them. The CLI asks it of
// the problem it reads (cli/plan_command.cpp, problem_from) and the search of the sequence it is given; the
// planner's own callers (tests, max-fit's trial values) may price a longer sequence.
std::optional<bad_input> sequence_error(const model_spec& m, const training_spec& t);

// Returns the first field of the layout that does not fit the model or the GPU count, as the bad_input
// to throw, or nullopt: heads or kv heads not divisible by tp, layers not divisible by pp (or by pp * vpp),
// tp * pp * cp not dividing N, tp beyond one node, sequence not divisible by cp (or by tp under sequence
// parallelism), torchtitan's per-op recompute (selective-op) on a layer it is not modelled for (eager
// attention: torchtitan runs SDPA or flex; FP8 linears). With schedule_error, the one
// statement of what a valid layout is; --suggest enumerates by both.
std::optional<bad_input> layout_error(const problem& p, const layout& l);
// Returns the first expert-parallel or hybrid-sharding field of `l` that does not fit `p`, or nullopt (the
// last check of layout_error): ep, etp or dp-replicate on a dense model; routed experts not divisible by ep;
// the expert ffn by expert tp; ep x expert tp not dividing the dp * tp * cp ranks of a stage; replicas not
// dividing dp * cp (or the expert data-parallel ranks); tp > 1 without sequence parallelism on a MoE model.
std::optional<bad_input> expert_error(const problem& p, const layout& l);

// Returns the micro-batches per step of `l` (a layout without layout_error): ceil(global batch /
// (micro-batch x dp)), at least 1. A count.
inline std::int64_t microbatches_per_step(const problem& p, const layout& l) {
  const std::int64_t per_step = p.training.micro_batch * l.dp();
  const std::int64_t m = (p.training.global_batch + per_step - 1) / per_step;
  return m < 1 ? 1 : m;
}
// Returns whether the pipeline schedule can run `l` with `microbatches` micro-batches per step:
// Megatron-LM's interleaved schedule (vpp > 1) runs rounds of pp micro-batches, so it needs them
// divisible by pp. No allocation: the search's inner loop asks it; schedule_error says why not.
inline bool schedule_runs(const layout& l, std::int64_t microbatches) {
  return l.vpp <= 1 || microbatches % l.pp == 0;
}
// Returns whether the global batch splits over the data-parallel ranks in micro-batches: micro-batch x dp is
// at most the global batch (no rank without a sample), and, for a micro-batch b > 1, divides it (Megatron-LM's
// assertion in its micro-batch calculator; DeepSpeed's and torchtitan's gradient accumulation ask the same).
// Micro-batch 1 keeps the reference case's ceil(G / dp) micro-batches per step where dp does not divide G
// (docs/model.md). No allocation: the search's inner loop asks it; schedule_error says why not.
inline bool batch_splits(const problem& p, const layout& l) {
  const std::int64_t per_round = p.training.micro_batch * l.dp();
  return per_round <= p.training.global_batch &&
         (p.training.micro_batch == 1 || p.training.global_batch % per_round == 0);
}
// Returns why the step cannot run `l` (a layout without layout_error) for `p`, as the bad_input to throw, or
// nullopt: the global batch does not split (batch_splits), or the interleaved schedule needs the micro-batches
// per step divisible by pp. `plan`, --suggest, --min-gpus, `trace` and `probe` all refuse by it (validate()
// throws it).
std::optional<bad_input> schedule_error(const problem& p, const layout& l);

// Throws layout_error(p, l), then schedule_error(p, l), when there is one.
void validate(const problem& p, const layout& l);

// The recipe a problem has unless one is given (16 bytes per parameter).
inline constexpr const char* default_recipe = "bf16-adam";
// Returns a problem for `m` with the reference defaults: default_recipe, the model's own sequence length,
// and training_spec's and device_spec's defaults (micro-batch 1, global batch 1536, 192 GiB GPUs with a
// 10 GiB reserve, 1024 MiB of fixed overheads, 64 MiB of library workspaces, 8 GPUs per node). The CLI's defaults read these.
problem default_problem(model_spec m);
// Throws bad_input when the training or device settings are non-positive or absurd.
void validate(const training_spec& t, const device_spec& d);

// Return the value's name from its name table ("none", "flash", "fused", ...).
const char* to_string(recompute_mode r);
const char* to_string(attention_kind a);
const char* to_string(loss_kind k);
const char* to_string(dispatcher_kind k);
const char* to_string(recompute_module m);
// Returns "tp=2 pp=1 dp=16" plus " cp=2", " vpp=2", " sp" when they apply.
std::string axes_string(const layout& l);
// Returns whether ep x expert tp divides the dp * tp * cp ranks of a stage (no allocation: the search asks it).
inline bool expert_grid_fits(const layout& l) {
  const long long ranks = static_cast<long long>(l.dp()) * l.tp * l.cp,
                  expert = static_cast<long long>(l.ep) * l.expert_tp();
  return ranks % expert == 0 && (ranks / expert) % l.dp_replicate == 0 &&
         (static_cast<long long>(l.dp()) * l.cp) % l.dp_replicate == 0;
}
// Returns the reference case's strategy name: "DDP", "ZeRO-1".."ZeRO-3" (+ " + offload").
std::string zero_name(const layout& l);

}  // namespace headroom
