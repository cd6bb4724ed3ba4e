// plan_command.cpp: `headroom plan` (single layout, --suggest, --min-gpus; table, --json, --csv, --explain).
#include "plan_command.hpp"

#include "one_line.hpp"
#include "option_checks.hpp"
#include "option_units.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <sstream>

#include "calibrate/calibration.hpp"
#include "exit_codes.hpp"
#include "record_files.hpp"
#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "planner/explain.hpp"
#include "planner/model_files.hpp"
#include "launch_levers.hpp"
#include "launch_options.hpp"
#include "planner/gpu_types.hpp"
#include "planner/advice.hpp"
#include "planner/max_fit.hpp"
#include "planner/recipe.hpp"
#include "plan_assumptions.hpp"
#include "probes/cases/emulated_peak.hpp"
#include "probes/io/results_file.hpp"
#include "tables.hpp"

namespace headroom::cli {

namespace {
// Adds the launch importers' and the mixture-of-experts options (cli/launch_options.hpp, docs/model.md 11c).
void add_launch_and_moe_options(CLI::App* c, plan_options& o) {
  c->add_option("--megatron-var", o.megatron_vars,
                "NAME=VALUE a Megatron launch refers to and its launcher sets (ModelZoo's ${TP}, ${PP}); repeatable");
  c->add_option("--trainer-precision", o.trainer_precision,
                "For a DeepSpeed config's \"auto\" values: the HF Trainer's precision, bf16, fp16 or fp32")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}));
  c->add_option("--gradient-accumulation-steps", o.gradient_accumulation,
                "For a DeepSpeed config's \"auto\" values: the HF Trainer's gradient accumulation steps");
  c->add_option("--deepspeed-config", o.deepspeed_config,
                "A DeepSpeed JSON config: ZeRO stage, offload, buckets, batch sizes, precision");
  c->add_option("--torchtitan-config", o.torchtitan_config,
                "A torchtitan TOML job file: parallelism degrees, activation checkpointing, float8");
  c->add_option("--torchtitan-override", o.torchtitan_overrides,
                "A dotted torchtitan override, e.g. parallelism.tensor_parallel_degree=4 (repeatable)");
  c->add_flag("--allow-unmodelled", o.allow_unmodelled,
              "Plan an imported launch even where it sets something that changes memory and is not modelled");
  c->add_option("--gpu-type", o.gpu_type, "GPU by name: its reported capacity, bf16 rate and links (`headroom gpus`)");
  c->add_option("--ep,--expert-model-parallel-size", o.ep, "Expert-parallel size (MoE)")->capture_default_str();
  c->add_option("--etp,--expert-tensor-parallel-size", o.etp, "Expert tensor-parallel size (MoE; default: tp)");
  c->add_option("--dp-replicate", o.dp_replicate,
                "Hybrid sharding (HSDP): data-parallel replicas; ZeRO shards inside one")
      ->capture_default_str();
  c->add_option("--moe-imbalance", o.moe_imbalance,
                "Routed rows on the busiest rank over the balanced share (Megatron's overload factor; 1 = balanced)")
      ->capture_default_str();
  c->add_option("--capacity-factor,--moe-expert-capacity-factor", o.capacity_factor,
                "MoE expert capacity factor (with --pad-to-capacity: every expert gets its padded capacity)");
  c->add_flag("--pad-to-capacity,--moe-pad-expert-input-to-capacity", o.pad_to_capacity,
              "Pad every expert's input to its capacity");
  c->add_option("--dispatcher,--moe-token-dispatcher-type", o.dispatcher, "MoE token dispatcher: alltoall or allgather")
      ->check(CLI::IsMember(names_of<dispatcher_kind>()))
      ->capture_default_str();
  c->add_option("--recompute-modules", o.recompute_modules,
                "What selective recomputation drops (Megatron's names): core_attn, layernorm, mla_up_proj, "
                "moe_act, mlp, moe, shared_experts")
      ->delimiter(',');
}
}  // namespace

void add_problem_options(CLI::App* c, plan_options& o) {
  o.app = c;
  auto* model = c->add_option_group("model", "one of these, or a torchtitan job file that names its model");
  model->add_option("--preset", o.preset, "Model preset name (presets/NAME.json)");
  model->add_option("--model", o.model_file, "Model file in the preset format");
  model->add_option("--hf-config", o.hf_config, "HuggingFace config.json (dense and MoE families)");
  model->add_option("--megatron-args", o.megatron_args,
                    "A Megatron-LM pretrain_gpt.py command line or its YAML form (file or string): model, layout "
                    "and recipe");
  model->require_option(-1);  // at most one; problem_from asks for a model when neither names one
  add_launch_and_moe_options(c, o);
  c->add_option("--seq,--seq-length", o.seq, "Sequence length (default: the model's); 8k = 8192")
      ->transform(count_from_text);
  c->add_option("--micro-batch,--micro-batch-size", o.micro_batch, "Sequences per micro-batch")->capture_default_str();
  c->add_option("--global-batch,--global-batch-size", o.global_batch, "Sequences per step (sets micro-batches per step)")
      ->capture_default_str();
  std::string recipes;
  for (const auto& n : builtin_recipes()) recipes += (recipes.empty() ? "" : ", ") + n;
  c->add_option("--recipe", o.recipe, "Precision recipe: " + recipes + ", or a JSON file (`headroom recipes`)")
      ->capture_default_str();
  c->add_option("--gpus", o.gpus, "Number of GPUs N");
  c->add_option("--tp,--tensor-model-parallel-size", o.tp, "Tensor-parallel size")->capture_default_str();
  c->add_option("--pp,--pipeline-model-parallel-size", o.pp, "Pipeline-parallel size")->capture_default_str();
  c->add_option("--cp,--context-parallel-size", o.cp, "Context-parallel size")->capture_default_str();
  c->add_option("--pp-layout", o.pp_layout, "Transformer layers of each pipeline stage, e.g. 31,32,32,31")
      ->delimiter(',');
  c->add_option(
      "--first-stage-layers", o.first_stage_layers,
      "Layers of the first stage; the rest split evenly (Megatron's decoder-first-pipeline-num-layers)");
  c->add_option("--last-stage-layers", o.last_stage_layers,
                "Layers of the last stage (Megatron's decoder-last-pipeline-num-layers)");
  c->add_flag("--embedding-as-layer", o.embedding_as_layer,
              "Count the embedding as a pipeline layer (Megatron's account-for-embedding-in-pipeline-split)");
  c->add_flag("--loss-as-layer", o.loss_as_layer,
              "Count the output layer and loss as a pipeline layer (account-for-loss-in-pipeline-split)");
  c->add_option("--vpp", o.vpp, "Virtual (interleaved) stages per pipeline rank")->capture_default_str();
  c->add_option("--zero", o.zero, "ZeRO stage 0..3")->capture_default_str();
  c->add_option("--recompute", o.recompute,
                "Activation recomputation: none, selective, full, selective-op (torchtitan's per-op policy), "
                "full-every-N for N 2..8 (torchtitan's every Nth layer)")
      ->check(CLI::IsMember(names_of<recompute_mode>()))
      ->capture_default_str();
  c->add_flag("--sequence-parallel,!--no-sequence-parallel", o.sequence_parallel,
              "Sequence parallelism with tp > 1 (default on, as Megatron-LM recommends)");
  c->add_option("--attention", o.attention, "Attention kernel: eager (keeps s x s scores), flash (SDPA's fused kernels) or flex "
                "(compiled flex_attention)")
      ->check(CLI::IsMember(names_of<attention_kind>()))
      ->capture_default_str();
  c->add_option("--loss", o.loss,
                "How the loss holds the logits: fused (Megatron's vocab-parallel cross-entropy, 6 bytes per "
                "logit), compiled (the same under torch.compile, Megatron's --cross-entropy-loss-fusion: 10) "
                "or unfused (F.cross_entropy on upcast logits, 12 bytes per logit at its peak)")
      ->check(CLI::IsMember(names_of<loss_kind>()))
      ->capture_default_str();
  c->add_flag("--offload-optimizer", o.offload,
              "ZeRO-Offload: master weights and optimizer states in host memory");
  c->add_flag("--offload-params", o.offload_params,
              "ZeRO-3 parameter offload (DeepSpeed's offload_param): the sharded parameters in host memory");
  c->add_option("--zero3-inflight-units", o.units, "ZeRO-3: unsharded layers in flight")
      ->capture_default_str();
  c->add_option(
      "--zero3-live-params", o.zero3_live_params,
      "ZeRO-3: gathered parameters alive at once (DeepSpeed's stage3_max_live_parameters; 0 = no limit)");
  c->add_flag("--reshard-after-forward,!--no-reshard-after-forward", o.reshard_after_forward,
              "ZeRO-3 / FSDP: free gathered parameters after forward (default) or keep them until backward");
  c->add_option("--gpu-mem", o.gpu_mem_gib,
                "GPU memory: GiB, or with a unit: 80GB (10^9 bytes), 80GiB or 80G (2^30), 81920MiB")
      ->transform(gib_from_text)
      ->capture_default_str();
  c->add_option("--reserve", o.reserve_gib, "Reserve for context, NCCL, fragmentation: GiB, or with a unit")
      ->transform(gib_from_text)
      ->capture_default_str();
  c->add_option("--fixed-overheads", o.fixed_overheads_gib,
                "Memory outside the allocator the step peak leaves room for (context, cuBLAS, NCCL): GiB, or "
                "with a unit")
      ->transform(gib_from_text)
      ->capture_default_str();
  c->add_option("--gpus-per-node", o.gpus_per_node, "GPUs per node (tp stays inside one)")
      ->capture_default_str();
  c->add_option("--calibration", o.calibration,
                "Reserve fitted by `headroom calibrate` (replaces --reserve and --fixed-overheads)");
  c->add_flag("--strict-calibration", o.strict_calibration,
              "A calibration made for another GPU, driver or allocator is an error, not a warning");
  c->add_option("--calibration-gpu", o.target_gpu,
                "The GPU planned for, checked against the calibration's (its device name, e.g. 'NVIDIA H100 80GB HBM3')");
  c->add_option("--driver", o.target_driver, "The driver planned for, checked against the calibration");
}

CLI::App* add_plan_command(CLI::App& app, plan_options& o) {
  auto* c = app.add_subcommand("plan",
                               "Predict per-GPU memory of one training step; --suggest / --min-gpus search");
  add_problem_options(c, o);
  c->add_option("--json", o.json_out, "Write JSON (every term in bytes) to FILE; '-' or no FILE: standard output")
      ->expected(0, 1);
  c->add_option("--csv", o.csv_out,
                "Write CSV (the layout, training and every term in bytes, a row per stage or layout) to FILE; "
                "'-' or no FILE: standard output")
      ->expected(0, 1);
  c->add_flag("--force", o.force, "Replace output files that exist");
  c->add_option("--max-fit", o.max_fit,
                "The largest micro-batch, seq or layers that fits this layout, by the planner alone (the "
                "measured answer is `probe max-fit`)")
      ->check(CLI::IsMember({"micro-batch", "seq", "layers"}));
  c->add_option("--max-fit-limit", o.max_fit_limit, "Upper end of the --max-fit search (default: the axis's)");
  c->add_flag("--allow-offload", o.allow_offload,
              "--suggest: also search ZeRO-Offload (optimizer state in host memory; slower steps)");
  c->add_option("--recipes", o.recipes, "--suggest: search these recipes too, e.g. bf16-adam,bf16-adam8bit")
      ->delimiter(',');
  c->add_option("--search", o.search,
                "--suggest / --min-gpus under a launch file: search these axes it fixes, e.g. tp,pp,ep,recompute "
                "(tp, pp, cp, vpp, ep, etp, sp, zero, recompute, micro-batch, or all)")
      ->delimiter(',');
  c->add_flag("--explain", o.explain, "Derive every figure for this case");
  c->add_flag("--suggest", o.suggest, "Search every layout for N GPUs and rank those that fit");
  c->add_flag("--min-gpus", o.min_gpus, "Find the smallest N (and the smallest in whole nodes) with a fitting layout");
  c->add_option("--top", o.top, "Rows of --suggest / --min-gpus tables (0 = all)")->capture_default_str();
  c->add_option("--max-gpus", o.max_gpus, "Upper limit of the --min-gpus search")->capture_default_str();
  c->add_option("--tflops", o.costs.tflops, "Ranking: dense bf16 TFLOP/s per GPU")->capture_default_str();
  c->add_option("--mfu", o.costs.mfu, "Ranking: model FLOPs utilisation")->capture_default_str();
  c->add_option("--intra-node-gbs", o.costs.intra_node_gbs, "Ranking: GB/s per GPU inside a node")
      ->capture_default_str();
  c->add_option("--inter-node-gbs", o.costs.inter_node_gbs, "Ranking: GB/s per GPU across nodes")
      ->capture_default_str();
  return c;
}

namespace {

std::int64_t gib_flag(double v, const char* name) {
  if (!std::isfinite(v) || v < 0) throw bad_input(name, "must be a non-negative number of GiB");
  if (v > 1e9) throw bad_input(name, "is absurd (" + std::to_string(v) + " GiB)");
  return static_cast<std::int64_t>(std::llround(v * static_cast<double>(gib)));
}

// Returns the value of E named `s` (its name table, layout.hpp); throws bad_input naming `field`.
template <class E>
E named(const std::string& s, const char* field) {
  if (auto v = parse_name<E>(s)) return *v;
  throw bad_input(field, "must be " + names_phrase<E>() + ", got '" + s + "'");
}

recompute_mode recompute_from(const std::string& s) {
  return named<recompute_mode>(s, "recompute");
}

// Sets `p`'s reserve (and fixed overheads) from --calibration: the calibration's, or the default with the
// reason when its fit is too weak to use (calibrate/strength.hpp); --strict-calibration refuses a mismatch or
// a weak fit. Nothing without --calibration.
void apply_calibration(const plan_options& o, problem& p) {
  if (o.calibration.empty()) {
    if (o.strict_calibration) throw bad_input("strict-calibration", "applies to --calibration");
    return;
  }
  if (given(o, "--reserve") || given(o, "--fixed-overheads"))
    throw bad_input("calibration", "replaces --reserve and --fixed-overheads: give one or the other");
  const auto cal = calibrate::calibration_from_json(read_json_file(o.calibration), o.calibration);
  for (const auto& m : calibrate::mismatches(cal, {o.target_gpu, o.target_driver, "", o.gpu_type})) {
    if (o.strict_calibration) throw bad_input("calibration", m + " (--strict-calibration)");
    // plan states it under its title with the rest of the calibration's domain (plan_assumptions.hpp)
    if (!o.calibration_notes_in_output)
      std::cerr << one_line("headroom: warning: calibration " + o.calibration + ": " + m) << "\n";
  }
  // A fit too weak to use (calibrate/strength.hpp) is not used: the default reserve, and the line says why.
  if (const auto weak = calibrate::weakness(cal); !weak.empty()) {
    if (o.strict_calibration)
      throw bad_input("calibration", o.calibration + " is too weak to use: " + weak + " (--strict-calibration)");
    p.device.reserve.source = "the default reserve: calibration " + o.calibration + " is too weak to use (" +
                              weak + ")";
  } else {
    p.device.reserve = calibrate::reserve_of(cal, o.calibration);
    if (cal.fixed_overheads) p.device.fixed_overheads = *cal.fixed_overheads;
  }
}

}  // namespace

bool given(const plan_options& o, const char* name) {
  if (std::find(o.imported.begin(), o.imported.end(), name) != o.imported.end()) return true;
  return o.app && o.app->count(name) > 0;
}

bool hf_default_attention(const plan_options& o) {
  return !o.hf_config.empty() && !given(o, "--attention");
}

problem problem_from(const plan_options& o) {
  if (!o.imports_applied && (!o.megatron_args.empty() || !o.deepspeed_config.empty() || !o.torchtitan_config.empty()))
    throw bad_input(!o.megatron_args.empty() ? "megatron-args" : !o.deepspeed_config.empty() ? "deepspeed-config"
                                                                                              : "torchtitan-config",
                    "launch files are read by `headroom plan`; here give the model and layout flags it prints "
                    "(plan --explain)");
  problem p;
  if (o.inline_model)
    p.model = *o.inline_model;
  else if (!o.preset.empty())
    p.model = load_preset(o.preset, preset_dir());
  else if (!o.model_file.empty())
    p.model = load_model_file(o.model_file);
  else if (!o.hf_config.empty())
    p.model = load_hf_config(o.hf_config);
  else
    throw bad_input("model", "give --preset, --model, --hf-config, --megatron-args, or a --torchtitan-config "
                             "whose [model] names a flavor");
  p.precision = load_recipe(o.recipe);
  p.training.seq = o.seq.value_or(p.model.seq);
  p.training.micro_batch = o.micro_batch;
  p.training.global_batch = o.global_batch;
  p.training.attention = hf_default_attention(o) ? attention_kind::flash
                                                 : named<attention_kind>(o.attention, "attention");
  p.device.capacity = gib_flag(o.gpu_mem_gib, "gpu-mem");
  p.device.capacity_assumed = o.gpu_type.empty() && !given(o, "--gpu-mem");
  // The library workspaces sized for the GPU's architecture (unknown without --gpu-type: the larger sizes).
  p.device.allocator_workspaces = allocator_workspaces("", o.workspaces);
  if (!o.gpu_type.empty()) {
    const gpu_type& g = find_gpu_type(o.gpu_type);
    p.device.gpu_type = g.name;
    p.device.allocator_workspaces = allocator_workspaces(g.arch, o.workspaces);
    if (!given(o, "--gpu-mem")) p.device.capacity = g.capacity;
    if (!given(o, "--gpus-per-node")) p.device.gpus_per_node = g.gpus_per_node;
    // An FP8 recipe needs FP8 tensor cores: Transformer Engine and torchao refuse to run one without them.
    if (p.precision.trains_in_fp8() && !g.fp8)
      throw bad_input("recipe", p.precision.name + " trains in FP8 and " + g.name + " (" + g.arch +
                                    ") has no FP8 tensor cores: a recipe without FP8 (`headroom recipes`), "
                                    "or a GPU with them (--gpu-type h100-80gb)");
  }
  p.training.recompute_modules = o.recompute_modules.empty() ? default_recompute_modules : 0;
  for (const auto& name : o.recompute_modules) {
    const auto m = parse_name<recompute_module>(name);
    if (!m)
      throw bad_input("recompute-modules", "unknown module '" + name.substr(0, 40) + "': must be " +
                                               names_phrase<recompute_module>());
    p.training.recompute_modules |= module_bit(*m);
  }
  if (!std::isfinite(o.moe_imbalance) || o.moe_imbalance < 1 || o.moe_imbalance > 1024)
    throw bad_input("moe-imbalance", "must be between 1 (balanced) and 1024");
  if (!std::isfinite(o.capacity_factor) || o.capacity_factor < 0 || o.capacity_factor > 1024)
    throw bad_input("capacity-factor", "must be between 0 (none) and 1024");
  if (o.pad_to_capacity && o.capacity_factor <= 0)
    throw bad_input("pad-to-capacity", "needs --capacity-factor");
  p.training.routing = {o.moe_imbalance, o.capacity_factor, o.pad_to_capacity,
                        named<dispatcher_kind>(o.dispatcher, "dispatcher")};
  const bool moe_settings = given(o, "--moe-imbalance") || given(o, "--capacity-factor") ||
                            given(o, "--pad-to-capacity") || given(o, "--dispatcher");
  p.device.reserve.fixed = gib_flag(o.reserve_gib, "reserve");
  p.device.fixed_overheads = gib_flag(o.fixed_overheads_gib, "fixed-overheads");
  p.training.loss = named<loss_kind>(o.loss, "loss");
  p.training.split = {o.pp_layout, o.first_stage_layers, o.last_stage_layers, o.embedding_as_layer,
                      o.loss_as_layer};
  if (o.first_stage_layers < 0 || o.last_stage_layers < 0)
    throw bad_input("first-stage-layers", "stage layer counts must be positive");
  if (o.pp_layout.size() > 100'000) throw bad_input("pp-layout", "is absurd (over 100000 stages)");
  if (o.gpu_type.empty() || given(o, "--gpus-per-node")) p.device.gpus_per_node = o.gpus_per_node;
  if (moe_settings && !p.model.moe.enabled())
    throw bad_input("moe", "routing settings (--moe-imbalance, --capacity-factor, --dispatcher) need a "
                           "mixture-of-experts model");
  apply_calibration(o, p);
  validate(p.training, p.device);
  check_options_apply(o, p);
  if (auto e = sequence_error(p.model, p.training)) throw *e;
  // Finite and in a documented range, so no NaN or inf reaches the ranking or the JSON.
  auto in_range = [](double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; };
  if (!in_range(o.costs.tflops, 1e-3, 1e6) || !in_range(o.costs.mfu, 1e-4, 1) ||
      !in_range(o.costs.intra_node_gbs, 1e-3, 1e6) || !in_range(o.costs.inter_node_gbs, 1e-3, 1e6))
    throw bad_input(
        "cost model",
        "--tflops and --intra-node-gbs / --inter-node-gbs must be in [0.001, 1e6], --mfu in [0.0001, 1]");
  return p;
}

layout layout_from(const plan_options& o) {
  if (!o.gpus) throw bad_input("gpus", "missing (--gpus N)");
  layout l;
  l.gpus = *o.gpus;
  l.tp = o.tp;
  l.pp = o.pp;
  l.cp = o.cp;
  l.vpp = o.vpp;
  l.zero = o.zero;
  l.recompute = recompute_from(o.recompute);
  l.sequence_parallel = o.sequence_parallel;
  l.offload_optimizer = o.offload;
  l.offload_params = o.offload_params;
  l.zero3_inflight_units = o.units;
  l.zero3_live_params = o.zero3_live_params;
  l.reshard_after_forward = o.reshard_after_forward;
  l.ep = o.ep;
  l.etp = o.etp;
  l.dp_replicate = o.dp_replicate;
  l.reduce_bucket = o.reduce_bucket;
  l.prefetch_bucket = o.prefetch_bucket;
  return l;
}

namespace {

// What one `plan` run shares across its modes: the options, the problem, the searched axes, the outputs
// asked for and the calibration (if any).
struct plan_run {
  const plan_options& o;
  const problem& p;
  search_axes axes;
  std::string json_path, csv_path;
  probes::output_set outs;
  std::optional<calibrate::calibration> cal;
  std::vector<launch_import> imports;

  // Returns the assumption lines, with the calibration's notes for the case `l` when one is given
  // (outside its domain: refused under --strict-calibration).
  std::string assumptions(const layout* l) const {
    std::string s = assumption_lines(p, o);
    if (cal) s += calibration_lines(*cal, p, l, o);
    return s;
  }
  // Returns the headroom's uncertainty for the stage `w` of layout `l`, bytes (0 uncalibrated).
  std::int64_t uncertainty(const layout& l, const stage_breakdown& w) const {
    if (!cal) return 0;
    return static_cast<std::int64_t>(
        calibrate::reserve_uncertainty(*cal, w.terms().churn(), reserve_tokens(p, l), w.activations));
  }
  // Writes `text` (with the assumptions under its title) unless standard output is a document, then every
  // output file; returns `status`.
  int finish(const std::string& text, const layout* l, int status) {
    outs.commit();  // the files first: a command whose files fail (exit 7) prints no table (docs/exit-statuses.md)
    if (!outs.to_stdout()) std::cout << with_assumptions(text, assumptions(l));
    return status;
  }
};

// plan --min-gpus.
int run_min_gpus(plan_run& r) {
  const auto m = min_gpus(layout_search(r.p, r.axes, r.o.costs), r.o.max_gpus);
  const launch_pins pins = pinned_by_launch(r.o, r.p);
  const std::string instead = pins.empty() ? "" : searched_instead(r.o, r.p, pins, std::nullopt);
  if (!r.json_path.empty()) {
    nlohmann::json j = min_gpus_json(r.p, m);
    if (!pins.empty())
      j["held_by_launch"] = {{"axes", pins.values}, {"search", pins.names}, {"searched", instead}};
    r.outs.add(r.json_path, j.dump(2) + "\n");
  }
  std::ostringstream text;  // 0 rows: every fitting layout, tight ones too
  write_min_gpus_text(text, r.p, m, static_cast<std::size_t>(r.o.top), pins.values, pins.names);
  if (!pins.empty()) text << instead << "\n";
  if (!r.o.freed.empty() && m.at_min && !m.at_min->fitting.empty()) {
    const candidate& c = m.at_min->fitting.front();
    const std::string edit = launch_edit(r.o, c.where, c.micro_batch);
    text << "the first at N = " << *m.n_min << " under the launch: " << (edit.empty() ? "its own layout" : edit)
         << "\n";
  }
  const layout* best = m.at_min && !m.at_min->fitting.empty() ? &m.at_min->fitting.front().where : nullptr;
  return r.finish(text.str(), best, m.n_min ? exit_fits : exit_does_not_fit);
}

// plan --suggest (with --recipes and --allow-offload: every recipe, with and without offload).
int run_suggest(plan_run& r) {
  std::vector<recipe> recipes;
  for (const auto& name : r.o.recipes) recipes.push_back(load_recipe(name));
  // A table of the first --top rows builds their breakdowns alone (all ranked); --json, --csv, --top 0: every one.
  const auto top = static_cast<std::size_t>(r.o.top);
  std::function<std::vector<std::size_t>(const suggestion&)> rows;
  std::optional<suggest_rows> chosen;  // the table's rows, found once for the selection and the table
  if (top > 0 && r.json_path.empty() && r.csv_path.empty())
    rows = [&](const suggestion& ranked) {
      chosen = suggest_text_rows(ranked, top);
      return chosen->rows;
    };
  const auto s = suggest_across(r.p, r.axes, r.o.costs, *r.o.gpus, recipes, r.o.allow_offload, rows);
  std::optional<advice> why_not;
  const launch_pins pins = pinned_by_launch(r.o, r.p);
  if (s.fitting.empty())
    why_not = advise_search(r.p, r.axes, r.o.costs, s, r.o.max_gpus, launch_spelling(r.o));
  if (why_not && !pins.empty()) why_not = held_advice(*why_not, pins, searched_instead(r.o, r.p, pins, *r.o.gpus));
  if (!r.json_path.empty()) {
    nlohmann::json j = suggest_json(r.p, s);
    if (why_not) j["advice"] = advice_json(*why_not);
    if (!pins.empty()) j["held_by_launch"] = {{"axes", pins.values}, {"search", pins.names}};
    if (!r.imports.empty()) j["not_modelled"] = unmodelled_json(r.imports);
    r.outs.add(r.json_path, j.dump(2) + "\n");
  }
  if (!r.csv_path.empty()) r.outs.add(r.csv_path, [&](std::ostream& out) { write_suggest_csv(out, r.p, s); });
  std::ostringstream text;
  write_suggest_text(text, r.p, s, top, pins.values, pins.names, chosen ? &*chosen : nullptr);
  if (why_not) text << advice_text(*why_not);
  if (!r.o.freed.empty() && !s.fitting.empty()) {
    const std::string edit = launch_edit(r.o, s.fitting.front().where, s.fitting.front().micro_batch);
    text << "the first under the launch: " << (edit.empty() ? "its own layout" : edit) << "\n";
  }
  if (r.o.explain && !s.fitting.empty()) {
    const candidate& best = s.fitting.front();
    problem q = r.p;
    if (!s.recipes.empty()) q.precision = s.recipes[static_cast<std::size_t>(best.recipe)];
    q.training.micro_batch = best.micro_batch;
    text << "\n" << explain_plan(q, estimate(q, best.where));
  }
  const layout* best = s.fitting.empty() ? nullptr : &s.fitting.front().where;
  return r.finish(text.str(), best, s.fitting.empty() ? exit_does_not_fit : exit_fits);
}

// plan --max-fit AXIS: the planner's largest value for the layout the options give.
int run_plan_max_fit(plan_run& r) {
  const layout l = layout_from(r.o);
  if (r.o.max_fit_limit < 0 || (given(r.o, "--max-fit-limit") && r.o.max_fit_limit == 0))
    throw bad_input("max-fit-limit", "must be positive (leave it out for the axis's default)");
  const planned_fit f = plan_max_fit(r.p, l, fit_axis_from(r.o.max_fit), r.o.max_fit_limit);
  if (!r.json_path.empty()) r.outs.add(r.json_path, max_fit_json(r.p, l, f).dump(2) + "\n");
  if (!r.csv_path.empty()) r.outs.add(r.csv_path, [&](std::ostream& out) { write_max_fit_csv(out, f); });
  std::ostringstream text;
  write_max_fit_text(text, r.p, l, f);
  return r.finish(text.str(), &l, f.search.largest ? exit_fits : exit_does_not_fit);
}

// The worst stage replayed through PyTorch's caching-allocator rules (probes/cases/emulated_peak.hpp): the
// check the analytic verdict gets where the allocator must hold more than the live tensors it counts.
struct emulation_check {
  std::int64_t reserved = 0;  // bytes the allocator reserves at the stage's peak
  std::int64_t total = 0;     // reserved + fixed overheads, bytes
  bool above = false;         // total exceeds the analytic decisive total
};

// Returns the check for the worst stage of `b`, or nullopt where the step trace cannot be built (a case
// the probes do not replay).
std::optional<emulation_check> emulate_worst(const problem& p, const breakdown& b, const plan_options& o) {
  try {
    const auto e = probes::emulate_stage(p, b.where, b.worst, imported_allocator(o));
    const auto& w = b.worst_stage();
    emulation_check c;
    c.reserved = e.reserved;
    c.total = e.reserved + w.fixed_overheads;
    c.above = c.total > w.decisive_total();
    return c;
  } catch (const bad_input&) {
    return std::nullopt;
  }
}

// Returns the lines that report the emulation where it exceeds the analytic verdict ("" otherwise).
std::string emulation_text(const breakdown& b, const emulation_check& c) {
  if (!c.above) return "";
  const auto& w = b.worst_stage();
  const std::int64_t headroom = w.capacity - c.total;
  std::string s = "\nallocator emulation (the same tensors through PyTorch's caching-allocator rules, as `headroom "
                  "probe replay` runs them):\n  stage " +
                  std::to_string(b.worst) + " reserves " + gib_str(c.reserved, 1) + " GiB, " +
                  gib_str(c.reserved - w.step_peak, 1) +
                  " GiB above its live peak (freed blocks that cannot serve the larger requests after them)\n"
                  "  + fixed overheads = " +
                  gib_str(c.total, 1) + " GiB: headroom " + gib_str(headroom, 1) + " GiB\n";
  if (w.fits && headroom < 0)
    s += "  by the emulation it does not fit: the verdict above counts live tensors and the reserve, not the "
         "allocator's cached blocks\n";
  return s;
}

// plan for one layout.
int run_one_layout(plan_run& r) {
  const breakdown b = estimate(r.p, layout_from(r.o));
  const std::optional<emulation_check> emulated = emulate_worst(r.p, b, r.o);
  const std::int64_t spread = r.uncertainty(b.where, b.worst_stage());
  std::optional<advice> why_not;
  if (!b.fits()) why_not = advise_plan(r.p, b, launch_spelling(r.o));
  if (!r.json_path.empty()) {
    nlohmann::json j = plan_json(r.p, b);
    if (why_not) j["advice"] = advice_json(*why_not);
    if (r.cal) j["headroom_uncertainty_bytes"] = spread;
    if (r.cal && spread == 0) j["headroom_uncertainty_why_none"] = calibrate::no_spread_reason(*r.cal);
    if (emulated) j["emulated_reserved_bytes"] = emulated->reserved;
    if (!r.imports.empty()) j["not_modelled"] = unmodelled_json(r.imports);  // what --allow-unmodelled let through
    r.outs.add(r.json_path, j.dump(2) + "\n");
  }
  if (!r.csv_path.empty()) r.outs.add(r.csv_path, [&](std::ostream& out) { write_plan_csv(out, r.p, b); });
  std::ostringstream text;
  write_plan_text(text, r.p, b, spread, r.cal && spread == 0 ? calibrate::no_spread_reason(*r.cal) : "");
  if (emulated) text << emulation_text(b, *emulated);
  if (why_not) text << advice_text(*why_not);
  if (r.o.explain) text << "\n" << explain_imports(r.imports) << explain_plan(r.p, b);
  return r.finish(text.str(), &b.where, b.fits() ? exit_fits : exit_does_not_fit);
}

}  // namespace

int run_plan(const plan_options& options) {
  plan_options o = options;
  const std::vector<launch_import> imports = apply_imports(o);
  free_searched_axes(o);
  o.imports_applied = true;
  o.calibration_notes_in_output = true;
  const problem p = problem_from(o);
  if (!o.gpu_type.empty()) {  // the type's rate and links rank layouts unless stated
    const gpu_type& g = find_gpu_type(o.gpu_type);
    if (!given(o, "--tflops")) o.costs.tflops = g.tflops;
    if (!given(o, "--intra-node-gbs")) o.costs.intra_node_gbs = g.intra_node_gbs;
    if (!given(o, "--inter-node-gbs")) o.costs.inter_node_gbs = g.inter_node_gbs;
  }
  if (o.suggest && o.min_gpus) throw bad_input("plan", "choose one of --suggest and --min-gpus");
  if (!o.max_fit.empty() && (o.suggest || o.min_gpus))
    throw bad_input("max-fit", "answers for one layout: give --gpus and its axes, not --suggest or --min-gpus");
  if (!o.max_fit.empty() && o.explain)
    throw bad_input("explain", "derives one plan; with --max-fit, run plan --explain at the value it names");
  if (o.max_fit.empty() && given(o, "--max-fit-limit")) throw bad_input("max-fit-limit", "applies to --max-fit");
  if (!o.suggest && (o.allow_offload || !o.recipes.empty()))
    throw bad_input(o.allow_offload ? "allow-offload" : "recipes", "applies to --suggest (one layout names its own)");
  if (o.max_gpus <= 0 || o.max_gpus > max_gpus)
    throw bad_input("max-gpus", "must be between 1 and " + std::to_string(max_gpus));
  if (o.top < 0 || o.top > 1'000'000) throw bad_input("top", "must be between 0 (all rows) and 1000000");
  plan_run r{o, p, search_axes_from(o), o.json_out.empty() && given(o, "--json") ? "-" : o.json_out,
             o.csv_out.empty() && given(o, "--csv") ? "-" : o.csv_out, probes::output_set(o.force, &std::cout),
             std::nullopt, imports};
  if (o.min_gpus && !r.csv_path.empty()) throw bad_input("csv", "--min-gpus writes a table or --json, not CSV");
  add_problem_inputs(r.outs, o);
  r.outs.expect(r.json_path);
  r.outs.expect(r.csv_path);
  if (!o.calibration.empty()) {  // its band and domain, unless too weak to use (then the default was used)
    auto cal = calibrate::calibration_from_json(read_json_file(o.calibration), o.calibration);
    if (calibrate::weakness(cal).empty()) r.cal = std::move(cal);
  }
  try {
    if (o.min_gpus) return run_min_gpus(r);
    if (!o.gpus) throw bad_input("gpus", "missing (--gpus N), or use --min-gpus");
    if (*o.gpus <= 0) throw bad_input("gpus", "must be positive, got " + std::to_string(*o.gpus));
    if (o.suggest) return run_suggest(r);
    if (!o.max_fit.empty()) return run_plan_max_fit(r);
    return run_one_layout(r);
  } catch (const bad_input& e) {
    rethrow_for_launch(o, e);
  }
}

}  // namespace headroom::cli
