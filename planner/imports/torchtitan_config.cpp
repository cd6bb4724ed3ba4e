// torchtitan_config.cpp: reads a torchtitan TOML job file into a launch_import (torchtitan_config.hpp).
// Field names, defaults and rules are torchtitan's torchtitan/config/job_config.py @ 238fa995 (2026-02-23,
// the last commit with TOML job files) unless a comment names another file. The TOML is read as JSON
// (config_file.hpp), so the typed field readers of planner/json_fields.hpp apply.
#include "planner/imports/torchtitan_config.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "planner/errors.hpp"
#include "planner/imports/config_file.hpp"
#include "planner/imports/torchtitan_flavors.hpp"
#include "planner/imports/torchtitan_keys.hpp"
#include "planner/json_fields.hpp"
#include "planner/model_files.hpp"

namespace headroom {

namespace {

using detail::find_section;
using detail::key_rule;
using detail::key_use;
using detail::section_rules;
using nlohmann::json;
constexpr auto R = key_use::read;

// Applies one command-line override "section.key=value" (torchtitan's CLI: --parallelism.tensor_parallel_degree 4).
void apply_override(json& root, const std::string& raw) {
  std::string s = raw.rfind("--", 0) == 0 ? raw.substr(2) : raw;
  const auto eq = s.find('=');
  if (eq == std::string::npos)
    throw bad_input("override '" + shown_name(raw) + "'", "expected section.key=value");
  const std::string path = s.substr(0, eq), value = s.substr(eq + 1);
  const auto dot = path.rfind('.');
  const std::string section = dot == std::string::npos ? "" : path.substr(0, dot);
  const std::string key = dot == std::string::npos ? path : path.substr(dot + 1);
  const section_rules* rules = find_section(section);
  std::vector<std::string> known;
  for (const auto& sec : detail::torchtitan_sections())
    for (const auto& k : sec.keys) known.push_back(std::string(sec.name) + "." + k.key);
  const bool ok = rules && std::any_of(rules->keys.begin(), rules->keys.end(),
                                       [&](const key_rule& r) { return key == r.key; });
  if (!ok) {
    const std::string near = detail::closest_name(path, known);
    throw bad_input("override '" + shown_name(path) + "'",
                    "unknown key" + (near.empty() ? "" : " (did you mean '" + near + "'?)"));
  }
  const json v = detail::toml_value_to_json(value);  // a bare word is a string: --model.name llama3
  json* node = &root;
  for (std::size_t from = 0;;) {  // walk or create the section's tables
    const auto next = section.find('.', from);
    const std::string part =
        section.substr(from, next == std::string::npos ? std::string::npos : next - from);
    if (!node->contains(part) || !(*node)[part].is_object()) (*node)[part] = json::object();
    node = &(*node)[part];
    if (next == std::string::npos) break;
    from = next + 1;
  }
  (*node)[key] = v;
}

// Sorts every key of the file: sections by their tables, nested sections recursively.
void classify_all(const json& root, launch_import& imp) {
  std::vector<std::string> names;
  for (const auto& s : detail::torchtitan_sections())
    if (std::string(s.name).find('.') == std::string::npos) names.emplace_back(s.name);
  std::vector<key_rule> top;
  for (const auto& n : names) top.push_back({find_section(n)->name, R});
  detail::classify_keys(root, top, "", imp);
  for (const auto& s : detail::torchtitan_sections()) {
    const json* node = &root;
    std::string name = s.name;
    for (std::size_t from = 0; node && from <= name.size();) {
      const auto next = name.find('.', from);
      const std::string part = name.substr(from, next == std::string::npos ? std::string::npos : next - from);
      auto it = node->find(part);
      node = it != node->end() && it->is_object() ? &*it : nullptr;
      if (next == std::string::npos) break;
      from = next + 1;
    }
    if (node) detail::classify_keys(*node, s.keys, s.name, imp);
  }
}

const json& section_of(const json& root, const char* name) {
  static const json empty = json::object();
  auto it = root.find(name);
  if (it == root.end()) return empty;
  if (!it->is_object()) throw bad_input(name, "must be a table ([" + std::string(name) + "])");
  return *it;
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

std::int64_t opt_int(const json& sec, const char* key, const char* where, std::int64_t dflt, std::int64_t lo,
                     std::int64_t hi) {
  return detail::opt_int_field(sec, key, where, lo, hi).value_or(dflt);
}

std::string opt_str(const json& sec, const char* key, const char* where, const char* dflt) {
  return detail::opt_string_field(sec, key, where).value_or(dflt);
}

constexpr std::int64_t max_degree = 1'000'000;

struct degrees {
  std::int64_t replicate = 1, shard = -1, tp = 1, pp = 1, cp = 1, ep = 1, etp = 1;
};

// [parallelism]: the mesh is dp_replicate x dp_shard x cp x tp x pp = world, dp_shard = -1 taking the rest
// (job_config.py l.311-335; torchtitan/distributed/parallel_dims.py). Experts borrow their ranks from the
// others, so ep and etp do not enter the product; etp is 1 or tp (job_config.py l.454-472).
degrees read_degrees(const json& p, std::optional<int> world, launch_import& imp) {
  const char* w = "parallelism";
  degrees d;
  d.replicate = opt_int(p, "data_parallel_replicate_degree", w, 1, 1, max_degree);
  d.shard = opt_int(p, "data_parallel_shard_degree", w, -1, -1, max_degree);
  if (d.shard == 0) throw bad_input("parallelism.data_parallel_shard_degree", "must be -1 or at least 1");
  d.tp = opt_int(p, "tensor_parallel_degree", w, 1, 1, max_degree);
  d.pp = opt_int(p, "pipeline_parallel_degree", w, 1, 1, max_degree);
  d.cp = opt_int(p, "context_parallel_degree", w, 1, 1, max_degree);
  d.ep = opt_int(p, "expert_parallel_degree", w, 1, 1, max_degree);
  d.etp = opt_int(p, "expert_tensor_parallel_degree", w, 1, 1, max_degree);
  if (d.etp != 1 && d.etp != d.tp)
    throw bad_input("parallelism.expert_tensor_parallel_degree",
                    "must be 1 or the tensor-parallel degree (" + std::to_string(d.tp) + ")");
  const std::int64_t others =
      detail::checked_mul(detail::checked_mul(d.replicate, d.tp, "parallelism"),
                          detail::checked_mul(d.pp, d.cp, "parallelism"), "parallelism");
  if (d.shard == -1 && world) {
    if (*world % others != 0)
      throw bad_input("parallelism",
                      std::to_string(*world) +
                          " GPUs are not a multiple of replicate x tp x pp x cp = " + std::to_string(others) +
                          ", which torchtitan refuses (parallel_dims.py _validate): change a degree or --gpus");
    d.shard = *world / others;
    imp.derived.push_back({"data_parallel_shard_degree", std::to_string(d.shard),
                           "-1: the GPUs left after replicate x tp x pp x cp (job_config.py l.324-334)"});
  } else if (d.shard > 0) {
    const std::int64_t total = detail::checked_mul(others, d.shard, "parallelism");
    if (world && total != *world)
      throw bad_input("parallelism", "the degrees multiply to " + std::to_string(total) + ", not the " +
                                         std::to_string(*world) + " GPUs, which torchtitan refuses (parallel_dims.py "
                                         "_validate): data_parallel_shard_degree = -1 takes the rest");
    if (total > max_degree)
      throw bad_input("parallelism", "the degrees multiply to more than a million GPUs");
    imp.gpus = static_cast<int>(total);
  }
  imp.tp = static_cast<int>(d.tp);
  imp.pp = static_cast<int>(d.pp);
  imp.cp = static_cast<int>(d.cp);
  imp.ep = static_cast<int>(d.ep);
  imp.etp = static_cast<int>(d.etp);
  imp.dp_replicate = static_cast<int>(d.replicate);
  if (d.shard > 0)
    imp.dp = static_cast<int>(d.replicate * d.shard);
  else
    imp.derived.push_back(
        {"data_parallel_shard_degree", "-1", "the rest of the GPUs; set when the GPU count is known"});
  imp.sequence_parallel = d.tp > 1;  // torchtitan's TP plans shard norms and dropout over the sequence
  // FSDP2 is applied when data_parallel_shard_degree > 1 or context_parallel_degree > 1 (job_config.py
  // l.282-288): parameters, gradients and optimizer state shard over dp_shard x cp, ZeRO-3-like.
  const bool fsdp = d.shard != 1 || d.cp > 1;
  imp.zero = fsdp ? 3 : 0;
  return d;
}

// fsdp_reshard_after_forward (llama3/infra/parallelize.py @ 238fa995 l.319-356): "always" reshards, "never"
// keeps every gathered block until its backward, "default" reshards except under PP (not to gather again
// per micro-batch). Under "default" one piece stays gathered anyway: the last transformer block before
// torchtitan PR #1094 (2025-07-28), the final norm and output projection after it.
void read_reshard(const json& p, const degrees& d, launch_import& imp) {
  const std::string policy = opt_str(p, "fsdp_reshard_after_forward", "parallelism", "default");
  if (policy != "default" && policy != "always" && policy != "never")
    throw bad_input("parallelism.fsdp_reshard_after_forward", "must be \"default\", \"always\" or \"never\"" +
                                                                  detail::did_you_mean(policy, {"default", "always", "never"}));
  if (imp.zero != 3) return;
  imp.reshard_after_forward = policy == "always" || (policy == "default" && d.pp == 1);
  imp.derived.push_back(
      {"reshard_after_forward", *imp.reshard_after_forward ? "true" : "false",
       "fsdp_reshard_after_forward \"" + policy + "\"" +
           (policy == "default" ? std::string(d.pp == 1 ? " without PP" : " with PP: never") +
                                      "; the last block (or, since torchtitan #1094, the final "
                                      "norm and output) is not resharded"
                                : "")});
}

// Pipeline schedule and split: looped schedules put two stages on each rank unless
// pipeline_parallel_layers_per_stage says otherwise (distributed/pipeline_parallel.py @ 238fa995 l.58-115);
// the first and last stage count the embedding and the output as one layer each by default
// (pipeline_parallel_first/last_stage_less_layers = 1).
void read_pipeline(const json& p, const degrees& d, launch_import& imp) {
  const char* w = "parallelism";
  std::string sched = opt_str(p, "pipeline_parallel_schedule", w, "1F1B");
  const std::int64_t mbs = opt_int(p, "pipeline_parallel_microbatch_size", w, 1, 1, std::int64_t{1} << 30);
  if (d.pp == 1) {
    for (const char* k : {"pipeline_parallel_schedule", "pipeline_parallel_microbatch_size",
                          "pipeline_parallel_first_stage_less_layers",
                          "pipeline_parallel_last_stage_less_layers", "pipeline_parallel_layers_per_stage",
                          "module_fqns_per_model_part", "pipeline_parallel_split_points"})
      if (p.contains(k)) imp.unused.push_back(std::string("parallelism.") + k + " (no pipeline)");
    return;
  }
  std::string lower = sched;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  const bool looped = lower == "interleaved1f1b" || lower == "loopedbfs" ||
                      lower == "interleavedzerobubble" || lower == "zbvzerobubble" || lower == "dualpipev";
  if (lower != "1f1b" && lower != "interleaved1f1b")
    imp.unmodelled.push_back("parallelism.pipeline_parallel_schedule: " + shown_name(sched) +
                             " holds activations differently from 1F1B");
  if (p.contains("pipeline_parallel_layers_per_stage") || p.contains("module_fqns_per_model_part") ||
      p.contains("pipeline_parallel_split_points")) {
    imp.unmodelled.push_back("parallelism: an explicit stage split (layers per stage or module lists)");
  } else {
    imp.vpp = looped ? 2 : 1;
    imp.derived.push_back({"vpp", std::to_string(*imp.vpp),
                           sched + (looped ? ": two stages per rank" : ": one stage per rank") +
                               " (pipeline_parallel.py l.111-115)"});
    const std::int64_t first = opt_int(p, "pipeline_parallel_first_stage_less_layers", w, 1, 0, 1'000'000);
    const std::int64_t last = opt_int(p, "pipeline_parallel_last_stage_less_layers", w, 1, 0, 1'000'000);
    if (first > 1 || last > 1) {
      imp.unmodelled.push_back(
          "parallelism.pipeline_parallel_first/last_stage_less_layers: more than one layer");
    } else {
      pipeline_split split;
      split.embedding_as_layer = first == 1;
      split.loss_as_layer = last == 1;
      imp.split = split;
    }
  }
  imp.micro_batch = mbs;
  imp.derived.push_back(
      {"micro_batch", std::to_string(mbs), "pipeline_parallel_microbatch_size (default 1)"});
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

// [training]: batch, sequence, precision (job_config.py l.242-307). local_batch_size (batch_size before
// torchtitan renamed it) is per data-parallel rank; global_batch_size -1 means local x dp, a larger one
// accumulates gradients over global / (local x dp) steps and must divide (train.py asserts it).
void read_training(const json& t, const degrees& d, launch_import& imp) {
  const char* w = "training";
  constexpr std::int64_t most = std::int64_t{1} << 30;
  const char* local_key =
      t.contains("local_batch_size") || !t.contains("batch_size") ? "local_batch_size" : "batch_size";
  const std::int64_t local = opt_int(t, local_key, w, 8, 1, most);
  if (!t.contains(local_key)) imp.derived.push_back({"local_batch_size", "8", "torchtitan's default"});
  const std::int64_t global = opt_int(t, "global_batch_size", w, -1, -1, most);
  if (global == 0) throw bad_input("training.global_batch_size", "must be -1 or at least 1");
  if (!imp.micro_batch)
    imp.micro_batch = local;  // under PP the pipeline micro-batch was set already
  else if (local % *imp.micro_batch != 0)
    throw bad_input("training.local_batch_size", std::to_string(local) +
                                                     " is not a multiple of "
                                                     "pipeline_parallel_microbatch_size " +
                                                     std::to_string(*imp.micro_batch));
  if (d.shard > 0) {
    const std::int64_t per_step =
        detail::checked_mul(local, d.replicate * d.shard, "training.local_batch_size");
    if (global > 0 && global % per_step != 0)
      throw bad_input("training.global_batch_size",
                      std::to_string(global) +
                          " is not a multiple of local_batch_size x dp = " + std::to_string(per_step) +
                          ", which torchtitan refuses: write a multiple, or -1");
    imp.global_batch = global > 0 ? global : per_step;
    imp.derived.push_back(
        {"global_batch", std::to_string(*imp.global_batch),
         global > 0 ? "global_batch_size: " + std::to_string(global / per_step) + " accumulation steps"
                    : "-1: local_batch_size x dp (job_config.py l.256-259)"});
  } else if (global > 0) {
    imp.global_batch = global;
  }
  imp.seq = opt_int(t, "seq_len", w, 2048, 1, most);
  if (!t.contains("seq_len")) imp.derived.push_back({"seq", "2048", "torchtitan's default seq_len"});
  // Precision. mixed_precision_param takes effect through fully_shard when FSDP is applied, through
  // torch.autocast otherwise (job_config.py l.282-288); dtype = "bfloat16" is pure bf16 training.
  const std::string param = opt_str(t, "mixed_precision_param", w, "bfloat16");
  const std::string reduce = opt_str(t, "mixed_precision_reduce", w, "float32");
  const std::string dtype = opt_str(t, "dtype", w, "float32");
  if (param != "bfloat16" && param != "float32")
    throw bad_input("training.mixed_precision_param",
                    "must be \"bfloat16\" or \"float32\"" + detail::did_you_mean(param, {"bfloat16", "float32"}));
  if (reduce != "float32") throw bad_input("training.mixed_precision_reduce", "must be \"float32\"");
  if (dtype == "bfloat16") {
    imp.unmodelled.push_back(
        "training.dtype: pure bf16 training (bf16 weights, gradients and Adam state, no fp32 copy)");
  } else if (dtype != "float32") {
    throw bad_input("training.dtype", "must be \"bfloat16\" or \"float32\"");
  } else if (imp.zero == 3 && param == "bfloat16") {
    // FSDP2's MixedPrecisionPolicy: fp32 sharded parameters (they are the master), bf16 gathered copies,
    // gradients reduce-scattered in fp32 (mixed_precision_reduce), Adam state fp32 sharded.
    imp.recipe = "fsdp2-bf16";
    imp.derived.push_back(
        {"recipe", "fsdp2-bf16", "FSDP2 with mixed_precision_param bfloat16, reduce float32"});
  } else {
    imp.recipe = "fp32-adam";
    imp.derived.push_back({"recipe", "fp32-adam",
                           imp.zero == 3 ? "FSDP2 with fp32 parameters"
                                         : "no FSDP: fp32 weights, bf16 compute under torch.autocast"});
  }
  if (detail::opt_bool_field(t, "enable_cpu_offload", w).value_or(false)) {
    imp.offload_params = true;
    imp.offload_optimizer = true;
    imp.unmodelled.push_back(
        "training.enable_cpu_offload: FSDP's CPUOffloadPolicy keeps parameters, gradients "
        "and optimizer state in host memory and steps on the CPU");
  }
}

// [activation_checkpoint] (distributed/activation_checkpoint.py @ 238fa995 l.27-245). With no section,
// torchtitan's default applies: selective, every 2nd layer (full-every-2).
void read_ac(const json& a, launch_import& imp) {
  const char* w = "activation_checkpoint";
  const std::string mode = opt_str(a, "mode", w, "selective");
  if (!a.contains("mode"))
    imp.derived.push_back({"activation_checkpoint.mode", "selective", "torchtitan's default"});
  if (mode == "none") {
    imp.recompute = recompute_mode::none;
  } else if (mode == "full") {
    imp.recompute = recompute_mode::full;
  } else if (mode == "memory_budget") {
    imp.unmodelled.push_back(
        "activation_checkpoint.mode: memory_budget lets the compiler's partitioner choose "
        "what to save");
  } else if (mode == "selective") {
    // A string in torchtitan's JobConfig ("op" or a count); a count written as a TOML integer, or given on the
    // command line (--activation_checkpoint.selective_ac_option 3, which reads as a number), is the same count.
    const auto given = a.find("selective_ac_option");
    const std::string opt = given != a.end() && given->is_number_integer()
                                ? std::to_string(given->get<std::int64_t>())
                                : opt_str(a, "selective_ac_option", w, "2");
    if (opt == "op") {
      // Per-op SAC (l.52-137): the outputs of the ops on its save list except every second matmul, and the
      // block input; the planner's selective-op mode prices exactly that (planner/ledger.hpp).
      imp.recompute = recompute_mode::selective_op;
      imp.derived.push_back({"recompute", "selective-op", "selective_ac_option \"op\": torchtitan's per-op policy"});
    } else {
      std::int64_t every = 0;
      const bool digits = !opt.empty() && opt.size() < 10 &&
                          std::all_of(opt.begin(), opt.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits)
        throw bad_input("activation_checkpoint.selective_ac_option",
                        "must be \"op\" or a layer count" + detail::did_you_mean(opt, {"op"}));
      every = std::stoll(opt);
      if (every <= 1) {  // 0 or 1: every layer fully checkpointed (l.39-40)
        imp.recompute = recompute_mode::full;
        imp.derived.push_back(
            {"recompute", "full", "selective_ac_option " + opt + ": every layer checkpointed"});
      } else if (every <= max_full_every) {
        // Layer SAC (l.27-49): the blocks whose running count is a multiple of N are checkpointed whole.
        imp.recompute = full_every_mode(static_cast<int>(every));
        imp.derived.push_back({"recompute", to_string(*imp.recompute),
                               "selective_ac_option " + opt + ": the blocks whose count is a multiple of " + opt +
                                   " fully recomputed, the others not"});
      } else {
        imp.recompute = recompute_mode::none;
        imp.unmodelled.push_back("activation_checkpoint.selective_ac_option: one layer in " + opt +
                                 " fully recomputed (up to " + std::to_string(max_full_every) +
                                 " modelled); priced as none");
      }
    }
  } else {
    throw bad_input("activation_checkpoint.mode", "must be none, selective, full or memory_budget" +
                                                      detail::did_you_mean(mode, {"none", "selective", "full", "memory_budget"}));
  }
}

// Float8 / MX come from model.converters: "float8" and "mx" before torchtitan PR #1763 (2025-09-30),
// "quantize.linear.float8", "quantize.grouped_mm.float8", "quantize.linear.mx", "quantize.grouped_mm.mx"
// after (components/quantization/float8.py l.238-239, mx.py l.171-172). A [quantize] section alone
// converts nothing.
void read_converters(const json& root, const json& m, launch_import& imp) {
  std::vector<std::string> conv;
  if (auto it = m.find("converters"); it != m.end()) {
    if (it->is_string()) {  // the command line's comma-separated form
      std::string s = it->get<std::string>();
      for (std::size_t from = 0; from <= s.size();) {
        const auto c = std::min(s.find(',', from), s.size());
        if (c > from) conv.push_back(s.substr(from, c - from));
        from = c + 1;
      }
    } else if (it->is_array()) {
      for (const auto& v : *it) {
        if (!v.is_string()) throw bad_input("model.converters", "must be a list of names");
        conv.push_back(v.get<std::string>());
      }
    } else {
      throw bad_input("model.converters", "must be a list of names");
    }
  }
  for (const auto& c : conv) {
    if (c == "float8" || c == "quantize.linear.float8") {
      const json* f8 = root.contains("float8") ? &root["float8"] : nullptr;
      if (!f8 && root.contains("quantize") && root["quantize"].contains("linear"))
        f8 = root["quantize"]["linear"].contains("float8") ? &root["quantize"]["linear"]["float8"] : nullptr;
      const std::string recipe =
          f8 && f8->is_object() ? opt_str(*f8, "recipe_name", "float8", "tensorwise") : "tensorwise";
      imp.fp8 = "current";  // torchao's dynamic scaling: each tensor's scale from its own amax
      imp.derived.push_back(
          {"fp8", "current", "converter " + c + ", recipe " + shown_name(recipe) + " (dynamic scaling)"});
      const bool all_gather =
          f8 && f8->is_object() &&
          detail::opt_bool_field(*f8, "enable_fsdp_float8_all_gather", "float8").value_or(false);
      // torchtitan refuses the FP8 all-gather with a recipe_name (components/quantization/float8.py @ 238fa995
      // l.65-69) and applies it only where FSDP shards over dp_shard > 1 (l.87-93); torchao's Float8Linear
      // keeps fsdp2-bf16's state either way (planner/recipe.cpp fp8_variant).
      if (all_gather && f8->contains("recipe_name"))
        throw bad_input("float8.enable_fsdp_float8_all_gather",
                        "torchtitan refuses it together with recipe_name (the tensorwise default only)");
      const bool dp_shard = !imp.dp || *imp.dp / imp.dp_replicate.value_or(1) > 1;
      if (imp.recipe == std::string("fsdp2-bf16")) {
        imp.recipe = all_gather && dp_shard ? "fsdp2-fp8-allgather" : "fsdp2-fp8";
        imp.derived.push_back({"recipe", *imp.recipe,
                               all_gather && dp_shard
                                   ? "FSDP2 + torchao Float8, FP8 all-gather: linear weights gathered in 1 byte"
                                   : "FSDP2 + torchao Float8: fsdp2-bf16's state, FP8 casts per matmul"});
      }
      if (all_gather && !(imp.recipe == std::string("fsdp2-fp8-allgather")))
        imp.derived.push_back({"float8.enable_fsdp_float8_all_gather", "off",
                               "no FSDP sharding over dp_shard: torchtitan does not apply it (float8.py l.87-89)"});
    } else if (c == "mx" || c == "quantize.linear.mx") {
      imp.fp8 = "mxfp8";
      imp.derived.push_back({"fp8", "mxfp8", "converter " + c});
    } else if (c == "quantize.grouped_mm.float8" || c == "quantize.grouped_mm.mx") {
      imp.unmodelled.push_back("model.converters: " + c + " quantizes the experts' grouped matmuls only");
    } else {
      imp.unmodelled.push_back("model.converters: " + shown_name(c) + " is not a known converter");
    }
  }
}

// [model] name / flavor: the model from torchtitan's flavor table (torchtitan_flavors.hpp), with the attention
// kernel its args select. A file that states neither names no model (the command line must).
void read_model(const json& m, launch_import& imp) {
  if (!m.contains("name") && !m.contains("flavor")) return;
  const std::string name = opt_str(m, "name", "model", "llama3");
  const std::string flavor = opt_str(m, "flavor", "model", "debugmodel");
  imp.model_named = name + "/" + flavor;
  std::optional<torchtitan_flavor> f;
  try {
    f = find_torchtitan_flavor(name, flavor, torchtitan_flavor_table_path());
  } catch (const bad_input& e) {
    imp.model_unknown = e.what();
    return;
  }
  if (!f) {
    std::vector<std::string> models;  // the table's own, so the message lists what it holds (keys sorted)
    for (const auto& key : torchtitan_flavor_keys(torchtitan_flavor_table_path())) {
      const std::string model = key.substr(0, key.find('/'));
      if (models.empty() || models.back() != model) models.push_back(model);
    }
    std::string listed;
    for (const auto& model : models) listed += (listed.empty() ? "" : ", ") + model;
    imp.model_unknown = "model.name: '" + shown_name(name) +
                        "' is not a model of torchtitan @ 238fa995 (presets/torchtitan/flavors.json: " + listed + ")";
    return;
  }
  // First on the refusal line: the model itself, before the keys its own sections add.
  if (!f->not_modelled.empty())
    imp.unmodelled.insert(imp.unmodelled.begin(), "[model] " + f->key + ": " + f->not_modelled);
  if (!f->model) return;
  imp.model = f->model;
  imp.derived.push_back({"model", f->key,
                         "[model] name/flavor: torchtitan's flavor table @ 238fa995 (presets/torchtitan/flavors.json)"});
  imp.attention = f->attention;
  imp.derived.push_back({"attention", to_string(f->attention),
                         "the flavor's attn_type \"" + f->attn_type + "\"" +
                             (f->attention == attention_kind::flex ? ": compiled flex_attention"
                                                                    : ": SDPA's fused kernels (no s x s tensor)")});
}

void read_model_and_optimizer(const json& root, launch_import& imp) {
  const json& m = section_of(root, "model");
  read_model(m, imp);
  read_converters(root, m, imp);
  const json& o = section_of(root, "optimizer");
  const std::string opt = opt_str(o, "name", "optimizer", "AdamW");
  if (opt == "AdamW" || opt == "Adam")
    imp.unused.push_back("optimizer.name");
  else
    imp.unmodelled.push_back("optimizer.name: " + shown_name(opt) +
                             " keeps other state than Adam's two moments");
  const json& p = section_of(root, "parallelism");
  const std::string backend = opt_str(p, "expert_parallel_comm_backend", "parallelism", "standard");
  if (backend != "standard")
    imp.unmodelled.push_back("parallelism.expert_parallel_comm_backend: " + shown_name(backend) +
                             " dispatch buffers");
}

// The keys torchtitan moved to [parallelism] in one commit, 785c34c99 (PR #980, 2025-03-18), from [training]
// and [experimental], with no alias kept: a job file written before it is read as torchtitan read it then. A key
// set in both places with different values is refused (which one ran depends on the torchtitan version).
void read_moved_keys(json& root, launch_import& imp) {
  static const std::pair<const char*, const char*> moved[] = {
      {"training", "data_parallel_replicate_degree"}, {"training", "data_parallel_shard_degree"},
      {"training", "tensor_parallel_degree"},         {"training", "disable_loss_parallel"},
      {"training", "fsdp_reshard_after_forward"},     {"experimental", "pipeline_parallel_degree"},
      {"experimental", "pipeline_parallel_schedule"}, {"experimental", "pipeline_parallel_schedule_csv"},
      {"experimental", "pipeline_parallel_split_points"}, {"experimental", "context_parallel_degree"},
      {"experimental", "context_parallel_rotate_method"}, {"experimental", "enable_async_tensor_parallel"},
      {"experimental", "enable_compiled_autograd"}};
  for (const auto& [section, key] : moved) {
    auto sec = root.find(section);
    if (sec == root.end() || !sec->is_object() || !sec->contains(key)) continue;
    const std::string old_name = std::string(section) + "." + key;
    json& par = root["parallelism"];
    if (par.is_null()) par = json::object();
    if (!par.is_object()) throw bad_input("parallelism", "must be a table ([parallelism])");
    if (par.contains(key) && par[key] != (*sec)[key])
      throw bad_input(old_name, "is " + (*sec)[key].dump() + " here and " + par[key].dump() +
                                    " in [parallelism]: torchtitan reads only [parallelism] since 785c34c99 "
                                    "(PR #980, 2025-03-18); remove one");
    par[key] = (*sec)[key];
    sec->erase(key);
    imp.derived.push_back({std::string("parallelism.") + key, par[key].dump(),
                           "read from " + old_name + ", where torchtitan kept it until 785c34c99 (PR #980, 2025-03-18)"});
  }
}

launch_import import_toml(const std::string& text, const std::string& origin,
                          const std::vector<std::string>& overrides, std::optional<int> world) {
  if (world && *world < 1) throw bad_input("world size", "must be at least 1");
  json root = detail::toml_to_json(text);
  for (const auto& o : overrides) apply_override(root, o);
  launch_import imp;
  imp.origin = origin;
  imp.change_hint = "with --torchtitan-override section.key=value";
  read_moved_keys(root, imp);
  classify_all(root, imp);
  const json& par = section_of(root, "parallelism");
  const degrees d = read_degrees(par, world, imp);
  read_reshard(par, d, imp);
  read_pipeline(par, d, imp);
  read_training(section_of(root, "training"), d, imp);
  read_model_and_optimizer(root, imp);
  read_ac(section_of(root, "activation_checkpoint"), imp);
  // Without a flavor, torchtitan's attention is F.scaled_dot_product_attention (models/llama/model.py @ 9dec370
  // l.209): a fused kernel that keeps no s x s tensor, priced as flash.
  if (!imp.attention) {
    imp.attention = attention_kind::flash;
    imp.derived.push_back({"attention", "flash", "torchtitan's attention is SDPA (a fused kernel)"});
  }
  // Its loss is F.cross_entropy on the logits cast to fp32 (torchtitan/components/loss.py,
  // cross_entropy_loss; train.py's loss_fn before it, at 9dec370): the unfused loss, an fp32 logits copy.
  imp.loss = loss_kind::unfused;
  imp.derived.push_back({"loss", "unfused", "torchtitan's cross_entropy_loss casts the logits to fp32"});
  if (world) imp.gpus = *world;
  return imp;
}

}  // namespace

launch_import torchtitan_config_from_toml(const std::string& text, const std::string& origin,
                                          const std::vector<std::string>& overrides,
                                          std::optional<int> world_size) {
  try {
    return import_toml(text, origin, overrides, world_size);
  } catch (const bad_input& e) {
    throw bad_input(origin, e.what());
  } catch (const nlohmann::json::exception& e) {
    throw bad_input(origin, std::string("unreadable value (") + e.what() + ")");
  }
}

launch_import load_torchtitan_config(const std::string& path, const std::vector<std::string>& overrides,
                                     std::optional<int> world_size) {
  const std::string text = read_regular_file(path, max_json_file_bytes, "a TOML input");
  return torchtitan_config_from_toml(text, shown_name(path), overrides, world_size);
}

}  // namespace headroom
