// launch_options.cpp: merging imported launches into the plan options (see launch_options.hpp).
#include "launch_options.hpp"

#include <algorithm>
#include <map>
#include <sstream>
#include <type_traits>

#include "launch_levers.hpp"
#include "planner/advice.hpp"
#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/imports/deepspeed_config.hpp"
#include "planner/imports/megatron_args.hpp"
#include "planner/imports/torchtitan_config.hpp"
#include "planner/json_fields.hpp"
#include "planner/model_files.hpp"
#include "planner/recipe.hpp"
#include "tables.hpp"

namespace headroom::cli {

namespace {

// Returns `v` as a message shows it.
template <class T>
std::string shown(const T& v) {
  if constexpr (std::is_same_v<T, bool>)
    return v ? "on" : "off";
  else if constexpr (std::is_arithmetic_v<T>)
    return trim(static_cast<double>(v), 6);
  else
    return std::string(v);
}

// The one rule for a value both a launch file and the command line state (docs/importing.md, "When the
// command line and a launch file disagree"): they must agree. A command-line flag that contradicts the file is
// refused naming both values and how to change the file's, never planned over it (nor the file's over it).
template <class T, class U>
void check_agrees(const plan_options& o, const launch_import& imp, const char* flag, const T& cli, const U& file) {
  if (!o.app || o.app->count(flag) == 0 || static_cast<T>(file) == cli) return;
  // The launch's own spelling of the command line's value, where there is one (launch_levers.cpp).
  const std::string how = launch_change(o, flag, shown(cli));
  throw bad_input(imp.origin, "states " + std::string(flag) + " " + shown(static_cast<T>(file)) +
                                  ", the command line " + flag + " " + shown(cli) + ": drop " + flag +
                                  " to plan the file's, or " +
                                  (how.empty() ? "change it " + imp.change_hint : how));
}

// Sets `target` from an imported value unless the option `flag` was given on the command line (where it must
// agree with the file's); records it.
template <class T, class U>
void take(plan_options& o, const launch_import& imp, const char* flag, T& target, const std::optional<U>& value) {
  if (!value) return;
  check_agrees(o, imp, flag, target, *value);
  if (given(o, flag)) return;
  target = static_cast<T>(*value);
  o.imported.emplace_back(flag);
}

// As take, for an option held as its name (--attention flash, --recompute full): the file's value by name.
template <class E>
void take_named(plan_options& o, const launch_import& imp, const char* flag, std::string& target,
                const std::optional<E>& value) {
  if (value) take(o, imp, flag, target, std::optional<std::string>(to_string(*value)));
}

void merge(plan_options& o, const launch_import& imp) {
  if (imp.model && o.preset.empty() && o.model_file.empty() && o.hf_config.empty() && !o.inline_model)
    o.inline_model = *imp.model;
  take(o, imp, "--recipe", o.recipe, imp.recipe);
  take(o, imp, "--tp", o.tp, imp.tp);
  take(o, imp, "--pp", o.pp, imp.pp);
  take(o, imp, "--cp", o.cp, imp.cp);
  if (!imp.vpp_flag.empty()) o.megatron_vpp_flag = imp.vpp_flag;  // before --vpp's check spells its change
  take(o, imp, "--vpp", o.vpp, imp.vpp);
  take(o, imp, "--ep", o.ep, imp.ep);
  if (imp.ep.value_or(1) > 1)
    take(o, imp, "--etp", o.etp, imp.etp);  // without experts a default etp means nothing
  take(o, imp, "--zero", o.zero, imp.zero);
  take(o, imp, "--dp-replicate", o.dp_replicate, imp.dp_replicate);
  take(o, imp, "--sequence-parallel", o.sequence_parallel, imp.sequence_parallel);
  take(o, imp, "--offload-optimizer", o.offload, imp.offload_optimizer);
  take(o, imp, "--offload-params", o.offload_params, imp.offload_params);
  take(o, imp, "--reshard-after-forward", o.reshard_after_forward, imp.reshard_after_forward);
  take(o, imp, "--zero3-live-params", o.zero3_live_params, imp.zero3_live_params);
  take(o, imp, "--micro-batch", o.micro_batch, imp.micro_batch);
  take(o, imp, "--global-batch", o.global_batch, imp.global_batch);
  take(o, imp, "--dispatcher", o.dispatcher, imp.dispatcher);
  take_named(o, imp, "--attention", o.attention, imp.attention);
  take_named(o, imp, "--loss", o.loss, imp.loss);
  take_named(o, imp, "--recompute", o.recompute, imp.recompute);
  take(o, imp, "--capacity-factor", o.capacity_factor, imp.capacity_factor);
  if (imp.pad_to_capacity && !given(o, "--pad-to-capacity")) o.pad_to_capacity = true;
  if (imp.seq) {  // --seq is optional (the model's own when nothing states it)
    if (o.seq) check_agrees(o, imp, "--seq", *o.seq, *imp.seq);
    if (!given(o, "--seq")) {
      o.seq = *imp.seq;
      o.imported.emplace_back("--seq");
    }
  }
  if (!imp.recompute_modules.empty() && !given(o, "--recompute-modules")) {
    o.recompute_modules = imp.recompute_modules;
    o.imported.emplace_back("--recompute-modules");
  }
  if (imp.split && !given(o, "--pp-layout") && !given(o, "--first-stage-layers") &&
      !given(o, "--last-stage-layers")) {
    o.pp_layout = imp.split->layers;
    // A Megatron layout string gives pp x vpp virtual stages (stage v is chunk v / pp of rank v % pp), kept
    // per virtual stage (chunks may differ in size: schedule.hpp uneven_chunks) and interleaved over the pp
    // planned, as Megatron derives vpp = stages / pp (arguments.py l.941-952); a --vpp given too that does
    // not match them sums them per rank.
    const std::size_t pp = static_cast<std::size_t>(std::max(1, o.pp)), stages = o.pp_layout.size();
    if (stages > pp && stages % pp == 0) {
      const bool user_vpp = o.app && o.app->count("--vpp") > 0;  // given() also counts the launch's own
      if (!user_vpp) o.vpp = static_cast<int>(stages / pp);
      if (stages != pp * static_cast<std::size_t>(std::max(1, o.vpp))) {
        std::vector<std::int64_t> per_rank(pp, 0);
        for (std::size_t v = 0; v < stages; ++v) per_rank[v % pp] += o.pp_layout[v];
        o.pp_layout = per_rank;
      }
    }
    o.first_stage_layers = imp.split->first_stage;
    o.last_stage_layers = imp.split->last_stage;
    o.embedding_as_layer = imp.split->embedding_as_layer;
    o.loss_as_layer = imp.split->loss_as_layer;
    o.imported.emplace_back("--pp-layout");
  }
  if (imp.workspaces) o.workspaces = *imp.workspaces;
  if (imp.alloc_conf && o.alloc_conf.empty()) {
    o.alloc_conf = *imp.alloc_conf;
    o.alloc_conf_from = imp.origin;
  }
  if (imp.reduce_bucket) o.reduce_bucket = *imp.reduce_bucket;
  if (imp.zero3_prefetch_bucket) o.prefetch_bucket = *imp.zero3_prefetch_bucket;
  // The world size: stated, or dp x tp x pp x cp when the launch states dp.
  if (!given(o, "--gpus")) {
    if (imp.gpus) {
      o.gpus = *imp.gpus;
      o.imported.emplace_back("--gpus");
    } else if (imp.dp) {
      o.gpus = *imp.dp * o.tp * o.pp * o.cp;
      o.imported.emplace_back("--gpus");
    }
  }
}

// Returns the model the command line names (--preset, --model, --hf-config), else the one the first import
// states, else nullopt (the CLI refuses a plan without a model later).
std::optional<model_spec> named_model(const plan_options& o, const std::vector<launch_import>& imports) {
  if (!o.preset.empty()) return load_preset(o.preset, preset_dir());
  if (!o.model_file.empty()) return load_model_file(o.model_file);
  if (!o.hf_config.empty()) return load_hf_config(o.hf_config);
  if (o.inline_model) return o.inline_model;
  for (const auto& imp : imports)
    if (imp.model) return imp.model;
  return std::nullopt;
}

// torchtitan's per-op policy (selective_ac_option "op") is priced only where the ledger derives what it saves
// (planner/layout.cpp, layout_error): a launch asking for it elsewhere is refused here with the ways out, or,
// under --allow-unmodelled, priced as no recomputation, an upper bound (the policy keeps a subset of it).
void check_op_policy(const plan_options& o, launch_import& imp) {
  if (imp.recompute != recompute_mode::selective_op || given(o, "--recompute")) return;
  const std::string attention = given(o, "--attention") ? o.attention
                                : imp.attention         ? std::string(to_string(*imp.attention))
                                                        : o.attention;
  const std::string recipe = given(o, "--recipe") ? o.recipe : imp.recipe.value_or(o.recipe);
  const char* why = attention == "eager"                  ? "eager attention"
                    : load_recipe(recipe).trains_in_fp8() ? "FP8 linear layers"
                                                          : nullptr;
  if (!why) return;
  const std::string what =
      "activation_checkpoint.selective_ac_option: \"op\" is not modelled for " + std::string(why);
  if (!o.allow_unmodelled)
    throw bad_input(imp.origin, what +
                                    ": --torchtitan-override activation_checkpoint.mode=full (or none, or "
                                    "selective_ac_option=N), or --allow-unmodelled");
  imp.recompute = recompute_mode::none;
  imp.unmodelled.push_back(what +
                           " (torchtitan's per-op policy); priced as none, an upper bound (the policy keeps "
                           "a subset of its tensors)");
}

// Returns the option that names the model on the command line ("--preset llama3-70b"), "" when none does.
std::string model_flag(const plan_options& o) {
  if (!o.preset.empty()) return "--preset " + shown_name(o.preset);
  if (!o.model_file.empty()) return "--model " + shown_name(o.model_file);
  if (!o.hf_config.empty()) return "--hf-config " + shown_name(o.hf_config);
  return "";
}

// A launch file that names its model (a torchtitan [model] name / flavor) is planned as that model: alone, or
// with a command-line model of the same shape (model_spec.hpp, shape_difference). A command-line model of
// another shape is refused naming both, never planned in the file's place; a name the file gives that is not in
// the table is refused unless the command line names the model to plan, and then said.
// `cli_model` is the model the command line names, read once by apply_imports.
void check_named_model(const plan_options& o, const std::optional<model_spec>& cli_model, launch_import& imp) {
  const std::string flag = model_flag(o);
  if (!imp.model_unknown.empty()) {
    if (flag.empty())
      throw bad_input(imp.origin, imp.model_unknown + "; or name the model: --preset, --model or --hf-config");
    imp.derived.push_back({"model", flag, "[model] " + shown_name(imp.model_named) +
                                              " is not in torchtitan's flavor table: the model the command line "
                                              "names is planned, unchecked against the file"});
    return;
  }
  if (!imp.model || imp.model_named.empty() || flag.empty() || !cli_model) return;
  const std::string diff = shape_difference(*imp.model, *cli_model);
  if (!diff.empty())
    throw bad_input(imp.origin, "[model] " + shown_name(imp.model_named) + " is not the model " + flag +
                                    " gives (" + diff + "): drop " + flag.substr(0, flag.find(' ')) +
                                    " to plan the file's model, or name the file's model there");
  imp.derived.push_back(
      {"model", flag, "the same shape as [model] " + shown_name(imp.model_named) + " (torchtitan's flavor table)"});
}

// Megatron builds layers / pp per stage and refuses a remainder when no split is stated (arguments.py @
// d98e8a64 l.985-998; transformer_block.py l.147-159): checked against the pp this plan uses, the launch's
// or --pp, so a split Megatron would not run is never planned (as 16/15/15/15 for 61 layers on pp 4).
void check_even_split(const plan_options& o, const std::optional<model_spec>& m, const launch_import& imp) {
  if (!imp.needs_even_split || !m || o.pp <= 1 || !o.pp_layout.empty() || o.first_stage_layers > 0 ||
      o.last_stage_layers > 0)
    return;
  const std::int64_t layers = m->layers + int{o.embedding_as_layer} + int{o.loss_as_layer};
  if (layers % o.pp == 0) return;
  throw bad_input(imp.origin,
                  "--num-layers: " + std::to_string(m->layers) + " layers" +
                      (layers != m->layers ? " (+ embedding, loss)" : "") + " do not divide over pp " +
                      std::to_string(o.pp) +
                      ", as Megatron requires (arguments.py l.985-998): add "
                      "--decoder-first/last-pipeline-num-layers N (a YAML: --megatron-var PP_FIRST=N "
                      "PP_LAST=N) or --first-stage-layers N");
}

// The axes --search names, and the flag that sets each (given() and o.imported name it so).
struct named_axis {
  const char* name;
  const char* flag;
};
constexpr named_axis search_names[] = {{"tp", "--tp"},
                                       {"pp", "--pp"},
                                       {"cp", "--cp"},
                                       {"vpp", "--vpp"},
                                       {"ep", "--ep"},
                                       {"etp", "--etp"},
                                       {"sp", "--sequence-parallel"},
                                       {"zero", "--zero"},
                                       {"recompute", "--recompute"},
                                       {"micro-batch", "--micro-batch"}};

// Returns the ZeRO stages the framework of launch `k` runs (empty: any): Megatron's DDP and its distributed
// optimizer (ZeRO-1-like: --use-distributed-optimizer shards master weights and Adam only), torchtitan's
// replicas and FSDP2 (ZeRO-3-like; HSDP is FSDP inside replicas, job_config.py l.282-288).
std::vector<int> framework_zero_stages(launch_kind k) {
  if (k == launch_kind::megatron) return {0, 1};
  if (k == launch_kind::torchtitan) return {0, 3};
  return {};
}

// Returns whether recipe `r` runs as Megatron's DDP at ZeRO-0 and as its distributed optimizer at ZeRO-1:
// what it keeps per parameter at ZeRO-1, whole and sharded, is megatron-distopt's (6 + 12/d bytes; the
// launch's --bf16 recipe, bf16-adam-fp32-grads, is), so the search's ZeRO-1 is what the flag runs.
bool distributed_optimizer_at_zero1(const recipe& r) {
  auto at_zero1 = [](const recipe& x) {
    std::pair<std::int64_t, std::int64_t> whole_sharded{0, 0};
    for (const auto& b : x.buffers)
      (b.shard_from <= 1 ? whole_sharded.second : whole_sharded.first) += b.bytes;
    return whole_sharded;
  };
  const recipe distopt = load_recipe("megatron-distopt");
  return r.lowest_zero() == 0 && r.highest_zero() >= 1 && at_zero1(r) == at_zero1(distopt) &&
         r.activation_bytes == distopt.activation_bytes && !r.trains_in_fp8();
}

// Returns why launch `k` cannot change axis `name` under recipe `r`, "" when it can.
std::string cannot_change(launch_kind k, const recipe& r, std::string_view name) {
  const std::string n(name);
  if (k == launch_kind::deepspeed && name != "zero" && name != "micro-batch")
    return "a DeepSpeed JSON does not state " + n +
           " (the training script does): --suggest searches it already unless its flag gives it";
  if (k == launch_kind::torchtitan && name == "sp")
    return "torchtitan's tensor-parallel plans shard the sequence whenever tp > 1: it follows tp (--search "
           "tp)";
  if (k == launch_kind::torchtitan && name == "vpp")
    return "torchtitan's stages per rank follow its pipeline schedule "
           "(parallelism.pipeline_parallel_schedule), "
           "which the search does not choose";
  if (name == "zero" && k == launch_kind::torchtitan)
    return "torchtitan runs replicas (ZeRO-0) or FSDP (ZeRO-3-like), and its precision follows FSDP (FSDP2's "
           "mixed precision with it, fp32 weights under autocast without; the launch's recipe is " +
           shown_name(r.name) + "): set parallelism.data_parallel_shard_degree in the file and plan that";
  if (name == "zero" && k == launch_kind::megatron && !distributed_optimizer_at_zero1(r))
    return "Megatron runs DDP (ZeRO-0) or its distributed optimizer (ZeRO-1-like), never ZeRO-2 or 3, and "
           "the "
           "launch's recipe " +
           shown_name(r.name) +
           " is not the same under both: plan the launch with and without --use-distributed-optimizer";
  return "";
}

// Returns whether axis `name` means something at the values `o` holds for model `p`: sequence parallelism and
// expert tp beside tp > 1, virtual stages beside pp > 1, expert axes on a mixture of experts; a micro-batch of
// 1 cannot be what keeps a layout from fitting (memory never falls as it grows).
bool means_something(const plan_options& o, const problem& p, std::string_view name) {
  if (name == "sp") return o.tp > 1;
  if (name == "etp") return p.model.moe.enabled() && (o.tp > 1 || o.etp > 1);
  if (name == "ep") return p.model.moe.enabled();
  if (name == "vpp") return o.pp > 1;
  if (name == "micro-batch") return o.micro_batch > 1;
  return true;
}

bool freed(const plan_options& o, std::string_view flag) {
  return std::find(o.freed.begin(), o.freed.end(), flag) != o.freed.end();
}

}  // namespace

void free_searched_axes(plan_options& o) {
  o.freed.clear();
  if (o.search.empty()) return;
  const launch_kind k = launch_of(o);
  if (k == launch_kind::none)
    throw bad_input("search",
                    "frees the axes an imported launch fixes (--megatron-args, --torchtitan-config, "
                    "--deepspeed-config); without one, --suggest searches every axis no flag gives");
  if (!o.suggest && !o.min_gpus)
    throw bad_input("search", "frees axes for --suggest and --min-gpus; one layout is the launch's");
  const recipe r = load_recipe(o.recipe);
  // `named`: the user named the axis (refused when it cannot be freed), else `all` or a follower (skipped).
  auto free_axis = [&](const named_axis& a, bool named) {
    const std::string why = cannot_change(k, r, a.name);
    const bool on_command_line = o.app && o.app->count(a.flag) > 0;
    if (named && !why.empty()) throw bad_input("search", std::string(a.name) + ": " + why);
    if (named && on_command_line)
      throw bad_input("search",
                      std::string(a.name) + ": " + a.flag + " fixes it on the command line: give one");
    if (why.empty() && !on_command_line && !freed(o, a.flag)) o.freed.emplace_back(a.flag);
  };
  std::vector<std::string> valid;
  for (const auto& a : search_names) valid.emplace_back(a.name);
  for (const auto& name : o.search) {
    const auto it = std::find_if(std::begin(search_names), std::end(search_names),
                                 [&](const named_axis& a) { return name == a.name; });
    if (name == "all") {
      for (const auto& a : search_names) free_axis(a, false);
    } else if (it != std::end(search_names)) {
      free_axis(*it, true);
    } else {
      const std::string near = detail::closest_name(name, valid);
      std::string list;
      for (const auto& v : valid) list += v + ", ";
      throw bad_input("search", "unknown axis '" + shown_name(name) + "'" +
                                    (near.empty() ? "" : " (did you mean '" + near + "'?)") +
                                    ": the axes are " + list + "or all");
    }
  }
  // What means nothing at the launch's tp 1 or pp 1 is freed with it (named_axis order: sp, etp after tp).
  if (freed(o, "--tp") && o.tp == 1)
    for (const auto& a : search_names)
      if (std::string_view(a.name) == "sp" || std::string_view(a.name) == "etp") free_axis(a, false);
  if (freed(o, "--pp") && o.pp == 1) free_axis(search_names[3], false);
  if (freed(o, "--pp") && !o.pp_layout.empty() && given(o, "--pp-layout"))
    throw bad_input("search",
                    "pp: the launch splits its layers over its " + std::to_string(o.pp) +
                        " stages, a split for that pp only: state no split in the launch to search pp");
}

bool fixed_for_search(const plan_options& o, const char* flag) {
  return given(o, flag) && !freed(o, flag);
}

search_axes search_axes_from(const plan_options& o) {
  search_axes axes;
  if (fixed_for_search(o, "--tp")) axes.tp = o.tp;
  if (fixed_for_search(o, "--pp")) axes.pp = o.pp;
  if (fixed_for_search(o, "--cp")) axes.cp = o.cp;
  if (fixed_for_search(o, "--zero")) axes.zero = o.zero;
  if (fixed_for_search(o, "--recompute")) {
    const auto mode = parse_name<recompute_mode>(o.recompute);
    if (!mode)
      throw bad_input("recompute",
                      "must be " + names_phrase<recompute_mode>() + ", got '" + o.recompute + "'");
    axes.recompute = *mode;
  }
  if (fixed_for_search(o, "--sequence-parallel") || given(o, "--no-sequence-parallel"))
    axes.sequence_parallel = o.sequence_parallel;
  if (fixed_for_search(o, "--vpp")) axes.vpp = o.vpp;
  if (fixed_for_search(o, "--micro-batch")) axes.micro_batch = o.micro_batch;
  axes.offload_optimizer = o.offload;
  axes.offload_params = o.offload_params;
  axes.zero3_inflight_units = o.units;
  axes.zero3_live_params = o.zero3_live_params;
  axes.reshard_after_forward = o.reshard_after_forward;
  if (fixed_for_search(o, "--ep")) axes.ep = o.ep;
  if (fixed_for_search(o, "--etp")) axes.etp = o.etp;
  axes.dp_replicate = o.dp_replicate;
  axes.reduce_bucket = o.reduce_bucket;
  axes.prefetch_bucket = o.prefetch_bucket;
  for (auto [v, name] : {std::pair{axes.tp, "tp"}, {axes.pp, "pp"}, {axes.cp, "cp"}})
    if (v && *v <= 0) throw bad_input(name, "must be positive, got " + std::to_string(*v));
  if (o.vpp <= 0) throw bad_input("vpp", "must be positive");
  // What the launch's framework runs, where the search varies an axis.
  const launch_kind k = launch_of(o);
  axes.zero_stages = framework_zero_stages(k);
  if (k == launch_kind::torchtitan) {
    axes.recompute_modes = {recompute_mode::none,
                            recompute_mode::full};  // its selective is per-op or per-layer
    if (!axes.tp) axes.sequence_parallel = true;    // torchtitan's rule: sp wherever tp > 1
    if (!axes.vpp) axes.vpp = o.vpp;  // its stages per rank follow the schedule (1F1B by default: 1)
  }
  axes.even_pp_split = k == launch_kind::megatron && o.pp_layout.empty() && o.first_stage_layers == 0 &&
                       o.last_stage_layers == 0;
  return axes;
}

launch_pins pinned_by_launch(const plan_options& o, const problem& p) {
  launch_pins pins;
  const launch_kind k = launch_of(o);
  if (k == launch_kind::none) return pins;
  std::vector<std::string> held;
  for (const auto& a : search_names) {
    const std::string_view name = a.name;
    if (!fixed_for_search(o, a.flag) || (o.app && o.app->count(a.flag) > 0) ||
        !cannot_change(k, p.precision, name).empty() || !means_something(o, p, name))
      continue;
    const std::string v = name == "sp"          ? std::string(o.sequence_parallel ? "sp" : "no sp")
                          : name == "zero"      ? "ZeRO-" + std::to_string(o.zero)
                          : name == "recompute" ? "recompute " + o.recompute
                          : name == "micro-batch"
                              ? "micro-batch " + std::to_string(o.micro_batch)
                              : std::string(name) + " " +
                                    std::to_string(name == "tp"    ? o.tp
                                                   : name == "pp"  ? o.pp
                                                   : name == "cp"  ? o.cp
                                                   : name == "vpp" ? o.vpp
                                                   : name == "ep"  ? o.ep
                                                                   : (o.etp > 0 ? o.etp : o.tp));
    held.push_back(v);
    pins.names += (pins.names.empty() ? "" : ",") + std::string(name);
  }
  for (std::size_t i = 0; i < held.size(); ++i)
    pins.values += (i == 0 ? "" : i + 1 == held.size() ? " and " : ", ") + held[i];
  return pins;
}

std::string launch_edit(const plan_options& o, const layout& l, std::int64_t micro_batch) {
  std::vector<std::pair<std::string, std::string>> changes;
  auto differs = [&](const char* flag, const std::string& now, const std::string& launch) {
    if (freed(o, flag) && now != launch) changes.emplace_back(flag, now);
  };
  const auto n = [](std::int64_t v) { return std::to_string(v); };
  differs("--tp", n(l.tp), n(o.tp));
  differs("--pp", n(l.pp), n(o.pp));
  differs("--cp", n(l.cp), n(o.cp));
  differs("--vpp", n(l.vpp), n(o.vpp));
  differs("--ep", n(l.ep), n(o.ep));
  if (l.ep > 1) differs("--etp", n(l.expert_tp()), n(o.etp > 0 ? o.etp : o.tp));
  if (l.tp > 1)
    differs("--sequence-parallel", l.sequence_parallel ? "on" : "off", o.sequence_parallel ? "on" : "off");
  if (l.shard_degree() > 1) differs("--zero", n(l.zero), n(o.zero));
  differs("--recompute", std::string(to_string(l.recompute)), o.recompute);
  differs("--micro-batch", n(micro_batch), n(o.micro_batch));
  return launch_changes(o, changes);
}

std::string searched_instead(const plan_options& o, const problem& p, const launch_pins& pins,
                             std::optional<int> gpus) {
  plan_options freed = o;
  freed.search.clear();
  for (std::size_t from = 0; from < pins.names.size();) {
    const std::size_t end = std::min(pins.names.find(',', from), pins.names.size());
    freed.search.push_back(pins.names.substr(from, end - from));
    from = end + 1;
  }
  free_searched_axes(freed);
  const layout_search search(p, search_axes_from(freed), o.costs);
  const std::string with = "with them searched (--search " + pins.names + ")";
  auto first = [&](const candidate& c) {
    const std::string edit = launch_edit(freed, c.where, c.micro_batch);
    return strategy_name(c.where) + " (" + axes_string(c.where) +
           "): " + (edit.empty() ? "the launch's own" : edit);
  };
  if (gpus) {
    const suggestion s = search.suggest(*gpus);
    if (!s.fitting.empty())
      return with + ", " + std::to_string(s.fitting.size()) + " of " + std::to_string(s.evaluated) +
             " layouts fit on " + std::to_string(*gpus) + " GPUs; the first is " + first(s.fitting.front());
  }
  const min_gpus_result m = min_gpus(search, o.max_gpus);
  if (!m.n_min || !m.at_min || m.at_min->fitting.empty())
    return with + ", no count up to " + std::to_string(o.max_gpus) + " has a fitting layout either";
  return with + (gpus ? ", none fits on " + std::to_string(*gpus) + " GPUs either; " : ", ") +
         "the smallest count with a fitting layout is " + std::to_string(*m.n_min) + ", the first there " +
         first(m.at_min->fitting.front());
}

advice held_advice(advice a, const launch_pins& pins, const std::string& searched) {
  const std::string held = "with " + pins.values + " fixed by the launch";
  if (a.bound_by != "state") a.why = held + ", " + a.why;
  for (auto& l : a.levers) {
    if (const auto at = l.find(" with these settings"); at != std::string::npos)
      l = l.substr(0, at) + " " + held + "; free them with --search " + pins.names;
    else if (const auto mg = l.find(" (--min-gpus)"); mg != std::string::npos)
      l.insert(mg, " " + held);
  }
  a.levers.push_back(searched);
  return a;
}

probes::caching_options imported_allocator(const plan_options& o) {
  probes::caching_options c;
  // PYTORCH_CUDA_ALLOC_CONF is "key:value" pairs, comma-separated (c10/cuda/CUDAAllocatorConfig.cpp).
  for (std::size_t from = 0; from < o.alloc_conf.size();) {
    const std::size_t end = std::min(o.alloc_conf.find(',', from), o.alloc_conf.size());
    const std::string item = o.alloc_conf.substr(from, end - from);
    if (item == "expandable_segments:True") c.expandable_segments = true;
    from = end + 1;
  }
  return c;
}

std::vector<launch_import> apply_imports(plan_options& o) {
  std::vector<launch_import> imports;
  std::map<std::string, std::string> env;
  for (const auto& v : o.megatron_vars) {
    const auto eq = v.find('=');
    if (eq == std::string::npos || eq == 0)
      throw bad_input("megatron-var", "expected NAME=VALUE, got '" + v.substr(0, 60) + "'");
    env[v.substr(0, eq)] = v.substr(eq + 1);
  }
  if (!env.empty() && o.megatron_args.empty()) throw bad_input("megatron-var", "applies to --megatron-args");
  if (!o.megatron_args.empty()) imports.push_back(load_megatron_args(o.megatron_args, env));
  // DeepSpeed's "auto" values need the hidden size: from the model the command line names.
  const bool launches = !imports.empty() || !o.deepspeed_config.empty() || !o.torchtitan_config.empty();
  const std::optional<model_spec> model = launches ? named_model(o, imports) : std::nullopt;
  if (!o.deepspeed_config.empty() && !o.torchtitan_config.empty())
    throw bad_input("deepspeed-config", "and --torchtitan-config describe two different launches (DeepSpeed's "
                                        "engine or torchtitan's trainer): give the one that runs");
  if (!o.deepspeed_config.empty() || !o.torchtitan_config.empty()) {
    std::optional<std::int64_t> hidden;
    if (model) hidden = model->hidden;
    const std::optional<int> world = given(o, "--gpus") ? o.gpus : std::nullopt;
    hf_trainer_args trainer;  // what fills DeepSpeed's batch "auto" values, as the HF Trainer would
    if (given(o, "--micro-batch")) trainer.per_device_train_batch_size = o.micro_batch;
    if (!o.trainer_precision.empty()) trainer.precision = o.trainer_precision;
    trainer.gradient_accumulation_steps = o.gradient_accumulation;
    if (!o.deepspeed_config.empty())
      imports.push_back(load_deepspeed_config(o.deepspeed_config, hidden, world, trainer));
    if (!o.torchtitan_config.empty())
      imports.push_back(load_torchtitan_config(o.torchtitan_config, o.torchtitan_overrides, world));
  } else if (!o.torchtitan_overrides.empty()) {
    throw bad_input("torchtitan-override", "applies to --torchtitan-config");
  }
  // With a flag naming the model, `model` is that one (named_model reads the command line first).
  for (auto& imp : imports) check_named_model(o, model_flag(o).empty() ? std::nullopt : model, imp);
  for (auto& imp : imports) {
    check_op_policy(o, imp);
    // Every unmodelled key by name on the one line (planner/imports/launch.cpp); the reasons are in --explain
    // and in plan --json's "not_modelled".
    if (!imp.unmodelled.empty() && !o.allow_unmodelled) throw bad_input(imp.origin, unmodelled_refusal(imp));
    const bool fp8_recipe = imp.recipe && load_recipe(*imp.recipe).trains_in_fp8();
    if (imp.fp8 && !fp8_recipe && !o.allow_unmodelled)
      throw bad_input(imp.origin,
                      "asks for FP8 training (" + *imp.fp8 +
                          "), which this version does not model: --allow-unmodelled plans it as bf16");
    merge(o, imp);
  }
  for (const auto& imp : imports) check_even_split(o, model, imp);
  return imports;
}

std::string explain_imports(const std::vector<launch_import>& imports) {
  std::ostringstream out;
  for (const auto& imp : imports) {
    out << "Imported " << imp.origin << ":\n";
    for (const auto& n : imp.derived) out << "  " << n.field << " = " << n.value << "   (" << n.why << ")\n";
    if (!imp.unused.empty()) {
      out << "  read, no effect on memory:";
      for (const auto& u : imp.unused) out << " " << u;
      out << "\n";
    }
    for (const auto& u : imp.unmodelled)
      out << "  NOT MODELLED (allowed by --allow-unmodelled): " << u << "\n";
  }
  return out.str();
}

}  // namespace headroom::cli
