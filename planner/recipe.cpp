// recipe.cpp: the built-in precision recipes and the JSON format of custom ones.
#include "recipe.hpp"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "errors.hpp"
#include "json_fields.hpp"
#include "model_files.hpp"

namespace headroom {

std::int64_t recipe::bytes_per_param() const {
  std::int64_t s = 0;
  for (const auto& b : buffers) s += b.bytes;
  return s;
}

int recipe::lowest_zero() const {
  return min_zero;
}

int recipe::highest_zero() const {
  for (const auto& b : buffers)
    if (b.shard_from > 3) return std::min(max_zero, 1);
  return max_zero;
}

std::int64_t recipe::bytes_of(buffer_kind k) const {
  std::int64_t s = 0;
  for (const auto& b : buffers)
    if (b.kind == k) s += b.bytes;
  return s;
}

const char* to_string(buffer_kind k) {
  switch (k) {
    case buffer_kind::params:
      return "params";
    case buffer_kind::grads:
      return "grads";
    case buffer_kind::master:
      return "master";
    case buffer_kind::optimizer:
      return "optimizer";
  }
  return "?";
}

std::vector<std::string> builtin_recipes() {
  return {"bf16-adam",     "fp32-adam",        "fp16-adam",      "bf16-adam-fp32-grads",
          "bf16-adam8bit", "megatron-distopt", "deepspeed-bf16", "fp16-nomaster", "fsdp2-bf16",
          "megatron-distopt-fp8", "megatron-distopt-fp8-param-gather", "megatron-distopt-bf16-moments",
          "megatron-distopt-bf16-grads", "megatron-distopt-fp8-bf16-grads",
          "megatron-distopt-fp8-param-gather-bf16-grads", "megatron-distopt-fp8-bf16-moments",
          "megatron-distopt-fp8-param-gather-bf16-moments", "megatron-fp8", "fsdp2-fp8", "fsdp2-fp8-allgather"};
}

namespace {
// Returns `r` as Megatron's distributed optimizer runs it: its optimizer state is always sharded, so from
// ZeRO 1 (the ZeRO 0 of this recipe is no configuration Megatron has). An empty `r` stays empty.
recipe distributed_optimizer(recipe r) {
  if (r.name.empty()) return r;
  r.min_zero = std::max(r.min_zero, 1);
  r.zero_note = "--use-distributed-optimizer is ZeRO 1: give --zero 1";
  return r;
}

// Returns the distributed optimizer's FP8 and precision-aware variants (empty when `name` is none of them).
recipe megatron_variant(const std::string& name) {
  using k = buffer_kind;
  if (name == "megatron-distopt-fp8" || name == "megatron-distopt-fp8-param-gather" ||
      name == "megatron-distopt-fp8-bf16-grads" || name == "megatron-distopt-fp8-param-gather-bf16-grads" ||
      name == "megatron-distopt-fp8-bf16-moments" || name == "megatron-distopt-fp8-param-gather-bf16-moments") {
    // FP8 training with TransformerEngine (delayed or current scaling) under Megatron's distributed optimizer.
    // FP8 adds before it subtracts: the bf16 weights stay and every linear weight gains an FP8 copy and, on
    // Hopper, its FP8 transpose for the backward GEMMs (TransformerEngine issues #1261, #257: "TE keeps both
    // high-precision and FP8 copies by default"; MXFP8 on Blackwell keeps two scaling layouts, also 2 bytes,
    // issue #1880). With --fp8-param-gather the fp32 master is cast straight into the FP8 weights, and no bf16
    // copy exists (issue #1764). Saved linear inputs are FP8 (1 byte; issue #1764: the FP8 data or its
    // transpose). The amax histories (1024 fp32 entries per FP8 tensor) are a few MiB, left to the reserve.
    // With --grad-reduce-in-bf16 the gradients are kept as megatron-distopt-bf16-grads keeps them (below): a
    // bf16 buffer and the fp32 cast of the rank's shard for the step. NVIDIA's FP8 examples run all three
    // (Megatron-LM examples/llama/train_llama3_8b_h100_fp8.sh: --use-distributed-optimizer, --fp8-param-gather,
    // --grad-reduce-in-bf16).
    // -bf16-moments: Megatron-MoE-ModelZoo's FP8 (sbatch_benchmarking.sh @ e865051 l.85-92: blockwise FP8,
    // --fp8-param-gather, --use-precision-aware-optimizer, --main-params-dtype fp32, --exp-avg-dtype bf16
    // --exp-avg-sq-dtype bf16). With FP8 other than delayed scaling and fp32 main params,
    // use_precision_aware_optimizer_no_fp8_or_ds_fp8 is false (Megatron-LM optimizer_config.py l.407-414 @
    // d98e8a64), so MCore keeps the fp32 master shard itself (distrib_optimizer.py l.421-455: a float() clone of
    // the rank's shard) and TransformerEngine's FusedAdam gets no master_weights, only the moment dtypes
    // (optimizer/__init__.py l.564-585); FusedAdam allocates exp_avg and exp_avg_sq in them (TransformerEngine
    // fused_adam.py l.393-416, 452-460 @ d0067d0d): 2 bytes each, sharded. The fp32 grad buffer is unchanged.
    const bool gather = name.find("-param-gather") != std::string::npos;
    const bool bf16_grads = name.ends_with("-bf16-grads");
    const std::int64_t moment = name.ends_with("-bf16-moments") ? 2 : 4;
    const std::string moment_dtype = moment == 2 ? "bf16" : "fp32";
    recipe r{name, {}, 2, 0, 0, 0, true};
    if (!gather) r.buffers.push_back({"bf16 parameters", k::params, 2, 4});
    r.buffers.push_back({"FP8 weights + transposes (linear layers)", k::params, 2, 4});
    if (gather) r.buffers.push_back({"bf16 parameters (embedding, head, norms)", k::params, 2, 4});
    if (bf16_grads) {
      r.buffers.push_back({"bf16 main gradients (unsharded)", k::grads, 2, 4});
      r.buffers.push_back({"fp32 gradient shard (optimizer step)", k::grads, 4, 1});
    } else {
      r.buffers.push_back({"fp32 main gradients (unsharded)", k::grads, 4, 4});
    }
    r.buffers.push_back({"fp32 master weights", k::master, 4, 1});
    r.buffers.push_back({"Adam m (" + moment_dtype + ")", k::optimizer, moment, 1});
    r.buffers.push_back({"Adam v (" + moment_dtype + ")", k::optimizer, moment, 1});
    r.linear_only = gather ? 1u << 0 : 1u << 1;  // the FP8 buffer
    if (gather) r.other_only = 1u << 1;          // the bf16 remainder
    return r;
  }
  if (name == "megatron-distopt-bf16-grads")
    // --grad-reduce-in-bf16 under the distributed optimizer: the DDP grad buffer takes the parameters' dtype
    // (bf16, 2 bytes, unsharded), and before the step each rank casts its shard to fp32 for the optimizer
    // (megatron/core/optimizer/distrib_optimizer.py, _copy_model_grads_to_main_grads:
    // `shard_main_param.grad = shard_model_grad.float()`, a copy when the buffer is bf16 and the same tensor
    // when it is fp32). That shard lives from the cast until the next zero_grad; counted as state
    // (conservative by at most 4/d bytes outside the optimizer step). 4 + 16/d bytes per parameter.
    return {name,
            {{"bf16 parameters", k::params, 2, 4},
             {"bf16 main gradients (unsharded)", k::grads, 2, 4},
             {"fp32 gradient shard (optimizer step)", k::grads, 4, 1},
             {"fp32 master weights", k::master, 4, 1},
             {"Adam m (fp32)", k::optimizer, 4, 1},
             {"Adam v (fp32)", k::optimizer, 4, 1}},
            2, 0, 0, 0, false};
  if (name == "megatron-distopt-bf16-moments")
    // Megatron's precision-aware optimizer (--use-precision-aware-optimizer --exp-avg-dtype bf16
    // --exp-avg-sq-dtype bf16; megatron/core/transformer/moe/README.md l.364): Adam's moments in bf16. Without
    // FP8 TransformerEngine's FusedAdam holds the master weights (optimizer/__init__.py l.571-585) with
    // store_param_remainders (optimizer_config.py l.192, on from TE 2.1, no flag turns it off): only the 16 bits
    // of each fp32 master that its bf16 parameter lacks, an int16 (TransformerEngine fused_adam.py l.414-415).
    return {name,
            {{"bf16 parameters", k::params, 2, 4},
             {"fp32 main gradients (unsharded)", k::grads, 4, 4},
             {"fp32 master remainders (int16)", k::master, 2, 1},
             {"Adam m (bf16)", k::optimizer, 2, 1},
             {"Adam v (bf16)", k::optimizer, 2, 1}},
            2, 0, 0, 0, false};
  return {};
}

// Returns FP8 training without Megatron's distributed optimizer (empty when `name` is none of them). Sources:
// NVIDIA/Megatron-LM @ d98e8a64, NVIDIA/TransformerEngine @ d0067d0d, pytorch/ao @ 36027d82, pytorch/torchtitan
// @ 238fa995 (the last commit with TOML job files).
recipe fp8_variant(const std::string& name) {
  using k = buffer_kind;
  if (name == "megatron-fp8") {
    // Megatron's DDP with TransformerEngine FP8 (--fp8-format without --use-distributed-optimizer). Nothing is
    // sharded: Float16OptimizerWithFloat16Params keeps an fp32 clone of every bf16 parameter as the master and
    // Adam's state on it (megatron/core/optimizer/optimizer.py l.1012); --bf16 accumulates and reduces the
    // gradients in an fp32 main_grad buffer (megatron/training/arguments.py l.1209-1216), which the step uses
    // as the master's gradient without a copy (optimizer.py l.1097, .float() of an fp32 tensor). Each linear
    // weight gains a cached FP8 copy (rowwise) and, for the backward GEMM, its transpose (columnwise),
    // 1 + 1 bytes (TE transformer_engine/pytorch/module/linear.py l.467-475): Megatron passes
    // is_first_microbatch (megatron/core/extensions/transformer_engine.py l.1338-1345), so TE keeps them in
    // the module's _fp8_workspaces across micro-batches and steps (linear.py l.1958, l.2068-2071; base.py
    // l.915). The amax history (TE base.py l.1139: 3 fp32 entries per GEMM forward and 2 backward, times
    // --fp8-amax-history-len, 1 by default, transformer_config.py l.621) is under 3 MiB for a 7B model even at
    // TE's 1024 (common/recipe/__init__.py l.255): left to the reserve.
    recipe r{name, {}, 2, 0, 0, 0, true};
    r.buffers = {{"bf16 parameters", k::params, 2, 4},
                 {"FP8 weights + transposes (linear layers)", k::params, 2, 4},
                 {"fp32 main gradients", k::grads, 4, 4},
                 {"fp32 master weights", k::master, 4, 4},
                 {"Adam m (fp32)", k::optimizer, 4, 4},
                 {"Adam v (fp32)", k::optimizer, 4, 4}};
    r.linear_only = 1u << 1;
    r.max_zero = 0;
    r.zero_note = "Megatron's DDP shards nothing; --use-distributed-optimizer is megatron-distopt-fp8 with --zero 1";
    r.source = "Megatron-LM optimizer.py l.1012, arguments.py l.1209-1216; TransformerEngine linear.py "
               "l.467-475, l.1958, l.2068-2071 (FP8 weight + transpose cached); TE issues #257, #1261, #1429";
    return r;
  }
  if (name == "fsdp2-fp8" || name == "fsdp2-fp8-allgather") {
    // torchtitan's Float8 converter over FSDP2 (torchao Float8Linear, tensorwise dynamic scaling): the state is
    // fsdp2-bf16's, fp32 parameter shards as the master, fp32 gradients, fp32 Adam state, all sharded. torchao
    // casts to FP8 per GEMM and saves the high-precision input and weight for backward (torchao
    // float8/float8_linear.py l.45), so activations stay 2 bytes and no FP8 copy persists; dynamic scaling
    // keeps no amax history (delayed scaling was removed, float8_linear.py l.323). With
    // enable_fsdp_float8_all_gather (only with dp_shard > 1 and the tensorwise recipe: torchtitan
    // components/quantization/float8.py l.65-69, l.87-93) each fp32 shard is cast to FP8 before the
    // all-gather and the gathered weight is FP8, 1 byte (torchao float8/fsdp_utils.py l.228-251,
    // fsdp_post_all_gather l.253-285); the embedding, norms and the output head, which torchtitan's configs
    // leave out (filter_fqns = ["output"], llama3_405b.toml l.64), gather in bf16.
    const bool ag = name == "fsdp2-fp8-allgather";
    recipe r{name, {}, 2, 0, 0, 0, false};
    r.buffers = {{"fp32 parameters (sharded, the master)", k::params, 4, 3},
                 {"fp32 gradients", k::grads, 4, 2},
                 {"Adam m (fp32)", k::optimizer, 4, 1},
                 {"Adam v (fp32)", k::optimizer, 4, 1}};
    r.gather_bytes = ag ? 1 : 2;
    r.gather_bytes_other = ag ? 2 : 0;
    r.fp8_gemms = true;
    r.min_zero = 3;
    r.zero_note = "FSDP2's fully_shard shards parameters, gradients and optimizer state: give --zero 3";
    r.source = ag ? "torchao float8_linear.py l.45, fsdp_utils.py l.228-285; torchtitan float8.py l.87-93"
                  : "torchao float8_linear.py l.45 (high-precision input and weight saved; FP8 casts per GEMM)";
    return r;
  }
  return {};
}

recipe builtin(const std::string& name) {
  using k = buffer_kind;
  if (name == "bf16-adam")  // docs/reference-case.md (a): ZeRO's 16Ψ
    return {name,
            {{"bf16 parameters", k::params, 2, 3},
             {"bf16 gradients", k::grads, 2, 2},
             {"fp32 master weights", k::master, 4, 1},
             {"Adam m (fp32)", k::optimizer, 4, 1},
             {"Adam v (fp32)", k::optimizer, 4, 1}},
            2, 0, 0, 0, false};
  if (name == "fp32-adam")  // no master copy: the weights are the master
    return {name,
            {{"fp32 parameters", k::params, 4, 3},
             {"fp32 gradients", k::grads, 4, 2},
             {"Adam m (fp32)", k::optimizer, 4, 1},
             {"Adam v (fp32)", k::optimizer, 4, 1}},
            4};
  if (name == "fp16-adam")  // mixed precision with loss scaling: same bytes as bf16
    return {name,
            {{"fp16 parameters", k::params, 2, 3},
             {"fp16 gradients", k::grads, 2, 2},
             {"fp32 master weights", k::master, 4, 1},
             {"Adam m (fp32)", k::optimizer, 4, 1},
             {"Adam v (fp32)", k::optimizer, 4, 1}},
            2, 0, 0, 0, false};
  if (name == "bf16-adam-fp32-grads")  // Megatron --accumulate-allreduce-grads-in-fp32: main_grad is fp32
    return {name,
            {{"bf16 parameters", k::params, 2, 3},
             {"fp32 gradient accumulation buffer", k::grads, 4, 2},
             {"fp32 master weights", k::master, 4, 1},
             {"Adam m (fp32)", k::optimizer, 4, 1},
             {"Adam v (fp32)", k::optimizer, 4, 1}},
            2, 0, 0, 0, false};
  if (name == "bf16-adam8bit")  // bitsandbytes 8-bit Adam: one byte per state (block scales ignored)
    return {name,
            {{"bf16 parameters", k::params, 2, 3},
             {"bf16 gradients", k::grads, 2, 2},
             {"fp32 master weights", k::master, 4, 1},
             {"Adam m (8-bit)", k::optimizer, 1, 1},
             {"Adam v (8-bit)", k::optimizer, 1, 1}},
            2, 0, 0, 0, false};
  if (name == "megatron-distopt")
    // the distributed optimizer (--use-distributed-optimizer, Megatron-LM:docs/source/distrib_optimizer.md):
    // bf16 parameters and fp32 main gradients stay whole on every rank (gradients accumulate across
    // micro-batches), fp32 master weights and Adam's two states are sharded: 6 + 12/d bytes per parameter.
    // Use it with --zero 1.
    return distributed_optimizer({name,
                                  {{"bf16 parameters", k::params, 2, 4},
                                   {"fp32 main gradients (unsharded)", k::grads, 4, 4},
                                   {"fp32 master weights", k::master, 4, 1},
                                   {"Adam m (fp32)", k::optimizer, 4, 1},
                                   {"Adam v (fp32)", k::optimizer, 4, 1}},
                                  2, 0, 0, 0, false});
  if (name == "deepspeed-bf16")
    // DeepSpeed's BF16_Optimizer (bf16.enabled with ZeRO-1 or pipeline parallelism): the bf16 gradients,
    // plus an fp32 gradient accumulation buffer as large as the model, unsharded; master and Adam sharded.
    return {name,
            {{"bf16 parameters", k::params, 2, 3},
             {"bf16 gradients", k::grads, 2, 2},
             {"fp32 gradient accumulation (unsharded)", k::grads, 4, 4},
             {"fp32 master weights", k::master, 4, 1},
             {"Adam m (fp32)", k::optimizer, 4, 1},
             {"Adam v (fp32)", k::optimizer, 4, 1}},
            2, 0, 0, 0, false};
  if (name == "fsdp2-bf16") {
    // torchtitan's FSDP2 (fully_shard with MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32),
    // torchtitan/distributed/parallel_dims.py and parallelize.py): the fp32 parameters are the master copy,
    // sharded; gradients fp32, reduce-scattered; Adam's two states fp32. The bf16 copy exists only gathered:
    // the ZeRO-3 transient is priced at 2 bytes per parameter (gather_bytes). fully_shard shards all three,
    // so the recipe runs at ZeRO 3 only, as its FP8 siblings (fp8_variant) do; without FSDP torchtitan trains
    // fp32 weights under autocast, fp32-adam (planner/imports/torchtitan_config.cpp, read_training).
    recipe r{name,
             {{"fp32 parameters (sharded, the master)", k::params, 4, 3},
              {"fp32 gradients", k::grads, 4, 2},
              {"Adam m (fp32)", k::optimizer, 4, 1},
              {"Adam v (fp32)", k::optimizer, 4, 1}},
             2, 0, 0, 0, false};
    r.gather_bytes = 2;
    r.min_zero = 3;
    r.zero_note = "FSDP2's fully_shard shards parameters, gradients and optimizer state: give --zero 3";
    return r;
  }
  if (name.rfind("megatron-distopt-", 0) == 0) return distributed_optimizer(megatron_variant(name));
  if (name == "megatron-fp8" || name.rfind("fsdp2-fp8", 0) == 0) return fp8_variant(name);
  if (name == "fp16-nomaster")
    // OPT-175B (Zhang et al., arXiv 2205.01068, section 2.5): fp16 weights, Adam state in fp32, no fp32
    // master copy; dynamic loss scaling: 2 + 2 + 8 = 12 bytes per parameter.
    return {name,
            {{"fp16 parameters", k::params, 2, 3},
             {"fp16 gradients", k::grads, 2, 2},
             {"Adam m (fp32)", k::optimizer, 4, 1},
             {"Adam v (fp32)", k::optimizer, 4, 1}},
            2, 0, 0, 0, false};
  return {};
}
}  // namespace

std::string describe_sharding(const recipe_buffer& b) {
  switch (b.shard_from) {
    case 1:
      return "sharded from ZeRO-1";
    case 2:
      return "sharded from ZeRO-2";
    case 3:
      return "sharded from ZeRO-3";
    default:
      return "never sharded";
  }
}

recipe recipe_from_json(const nlohmann::json& j, const std::string& origin) {
  using namespace detail;
  if (!j.is_object()) throw bad_input(origin, "expected a JSON object");
  require_known_keys(j,
                     {"name", "source", "note", "activation_bytes", "buffers", "gather_bytes", "gather_bytes_other",
                      "fp8_activations", "fp8_gemms", "zero_stages", "bytes_per_param"},
                     origin);
  recipe r;
  r.name = opt_string_field(j, "name", origin).value_or(origin);
  r.source = opt_string_field(j, "source", origin).value_or("");
  r.activation_bytes = opt_int_field(j, "activation_bytes", origin, 1, 8).value_or(2);
  r.gather_bytes = opt_int_field(j, "gather_bytes", origin, 0, 64).value_or(0);
  r.gather_bytes_other = opt_int_field(j, "gather_bytes_other", origin, 0, 64).value_or(0);
  if (auto z = j.find("zero_stages"); z != j.end()) {  // [lowest, highest], as `headroom recipes --json` writes
    if (!z->is_array() || z->size() != 2 || !(*z)[0].is_number_integer() || !(*z)[1].is_number_integer() ||
        (*z)[0].get<std::int64_t>() < 0 || (*z)[1].get<std::int64_t>() > 3 || (*z)[0] > (*z)[1])
      throw bad_input(origin + ".zero_stages", "must be [lowest, highest] with 0 <= lowest <= highest <= 3");
    r.min_zero = (*z)[0].get<int>();
    r.max_zero = (*z)[1].get<int>();
  }
  r.fp8_activations = opt_bool_field(j, "fp8_activations", origin).value_or(false);
  r.fp8_gemms = opt_bool_field(j, "fp8_gemms", origin).value_or(false);
  auto it = j.find("buffers");
  if (it == j.end() || !it->is_array() || it->empty())
    throw bad_input(origin + ".buffers", "must be a non-empty array");
  if (it->size() > max_recipe_buffers)
    throw bad_input(origin + ".buffers", "at most " + std::to_string(max_recipe_buffers) + " buffers");
  int i = 0;
  for (const auto& b : *it) {
    std::string where = origin + ".buffers[" + std::to_string(i++) + "]";
    if (!b.is_object()) throw bad_input(where, "expected a buffer object (name, kind, bytes, shard_from)");
    require_known_keys(b, {"name", "kind", "bytes", "shard_from", "holds"}, where);
    if (auto h = opt_string_field(b, "holds", where)) {  // "linear" or "other": what recipe::linear_only says
      const std::uint32_t bit = 1u << (i - 1);
      if (*h == "linear")
        r.linear_only |= bit;
      else if (*h == "other")
        r.other_only |= bit;
      else if (*h != "all")
        throw bad_input(where + ".holds", "must be all, linear (the layers' linear weights) or other");
    }
    recipe_buffer rb;
    rb.name = opt_string_field(b, "name", where).value_or("buffer");
    auto kind = opt_string_field(b, "kind", where);
    if (!kind) throw bad_input(where + ".kind", "missing (params, grads, master or optimizer)");
    if (*kind == "params")
      rb.kind = buffer_kind::params;
    else if (*kind == "grads")
      rb.kind = buffer_kind::grads;
    else if (*kind == "master")
      rb.kind = buffer_kind::master;
    else if (*kind == "optimizer")
      rb.kind = buffer_kind::optimizer;
    else
      throw bad_input(where + ".kind", "must be params, grads, master or optimizer, got '" + *kind + "'");
    rb.bytes = int_field(b, "bytes", where, 1, 64);
    int dflt = rb.kind == buffer_kind::params ? 3 : rb.kind == buffer_kind::grads ? 2 : 1;
    rb.shard_from = static_cast<int>(opt_int_field(b, "shard_from", where, 1, 4).value_or(dflt));
    r.buffers.push_back(rb);
  }
  // `headroom recipes --json` writes each recipe's bytes per parameter beside its buffers, so that its output
  // reads back as a recipe: a figure there must be the buffers' sum (an edited buffer with a stale sum is
  // refused, not half-believed).
  if (const auto bpp = opt_int_field(j, "bytes_per_param", origin, 1, static_cast<std::int64_t>(64 * max_recipe_buffers));
      bpp && *bpp != r.bytes_per_param())
    throw bad_input(origin + ".bytes_per_param", std::to_string(*bpp) + " is not the buffers' sum, " +
                                                     std::to_string(r.bytes_per_param()));
  // Stages the buffers cannot run with (a buffer never sharded stops at ZeRO 1) against the stated range.
  if (r.lowest_zero() > r.highest_zero())
    throw bad_input(origin + ".zero_stages", "starts at ZeRO " + std::to_string(r.lowest_zero()) +
                                                 ", but a buffer that is never sharded (shard_from 4) stops the "
                                                 "recipe at ZeRO " + std::to_string(r.highest_zero()));
  return r;
}

nlohmann::json recipe_to_json(const recipe& r) {
  nlohmann::json b = nlohmann::json::array();
  for (std::size_t i = 0; i < r.buffers.size(); ++i) {
    const auto& x = r.buffers[i];
    nlohmann::json e = {{"name", x.name}, {"kind", to_string(x.kind)}, {"bytes", x.bytes}, {"shard_from", x.shard_from}};
    if (r.linear_only >> i & 1) e["holds"] = "linear";
    if (r.other_only >> i & 1) e["holds"] = "other";
    b.push_back(std::move(e));
  }
  nlohmann::json j = {{"name", r.name}, {"activation_bytes", r.activation_bytes}, {"buffers", b}};
  if (r.gather_bytes) j["gather_bytes"] = r.gather_bytes;
  if (r.gather_bytes_other) j["gather_bytes_other"] = r.gather_bytes_other;
  if (!r.source.empty()) j["source"] = r.source;
  if (r.min_zero != 0 || r.max_zero != 3) j["zero_stages"] = {r.lowest_zero(), r.highest_zero()};
  if (r.fp8_activations) j["fp8_activations"] = true;
  if (r.fp8_gemms) j["fp8_gemms"] = true;
  return j;
}

recipe load_recipe(const std::string& name_or_path) {
  recipe r = builtin(name_or_path);
  if (!r.buffers.empty()) return r;
  // Not built in: a file, if something is there. The error_code form, so a name no file can have (too
  // long, a NUL-free oddity) is "unknown", never a filesystem exception; what is there is read as every
  // input is (a directory or a FIFO is refused by read_json_file).
  std::error_code ec;
  const auto st = std::filesystem::symlink_status(name_or_path, ec);
  if (!name_or_path.empty() && !ec && std::filesystem::exists(st))
    return recipe_from_json(read_json_file(name_or_path),
                            shown_name(std::filesystem::path(name_or_path).filename().string()));
  // The built-in names are listed by `headroom recipes`; sixteen of them no longer fit one readable line.
  const std::string near = detail::closest_name(name_or_path, builtin_recipes());
  throw bad_input("recipe", "unknown recipe '" + shown_name(name_or_path) + "'" +
                                (near.empty() ? "" : " (did you mean '" + near + "'?)") +
                                " (`headroom recipes` lists the built-in ones; or a JSON file)");
}

}  // namespace headroom
