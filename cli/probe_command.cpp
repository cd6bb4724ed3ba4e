// probe_command.cpp: `headroom trace` and `headroom probe` on the sim or the CUDA backend, with --max-fit
// and --overheads (see probe_command.hpp). Parsing and printing only: cases, searches and the overhead
// arithmetic live in probes/.
#include "probe_command.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>

#include "exit_codes.hpp"
#include "multi_rank_probe.hpp"
#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/model_files.hpp"
#include "probe_target.hpp"
#include "probes/caching_allocator.hpp"
#include "probes/gpu_backend.hpp"
#include "probes/launch.hpp"
#include "probes/max_fit.hpp"
#include "probes/measurement.hpp"
#include "probes/probe_case.hpp"
#include "probes/results_file.hpp"
#include "probes/sim_device.hpp"
#include "probes/timeline_svg.hpp"
#include "probes/trace_io.hpp"
#include "snapshot_command.hpp"
#include "tables.hpp"
#include "version.hpp"

namespace headroom::cli {

using namespace headroom::probes;

namespace {

// fill + verify throughput is measured over buffers of this size before a CUDA case.
constexpr std::int64_t throughput_bytes = std::int64_t{1} << 30;

void add_output_options(CLI::App* c, probe_options& o) {
  c->add_option("--stage", o.stage, "Pipeline stage to trace (default: the planner's worst rank)");
  c->add_flag("--force", o.force, "Replace output files that exist");
}

// The stage to trace: the one given, or the planner's worst.
int stage_of(const probe_options& o, const breakdown& b) {
  if (!o.stage) return b.worst;
  if (*o.stage < 0 || *o.stage >= b.where.pp)
    throw bad_input("stage", "must be between 0 and " + std::to_string(b.where.pp - 1) + ", got " +
                                 std::to_string(*o.stage));
  return *o.stage;
}

std::string row(const std::string& what, const std::string& predicted, const std::string& replayed,
                const std::string& note = "") {
  char buf[160];
  std::snprintf(buf, sizeof buf, "  %-30s %12s %12s", what.c_str(), predicted.c_str(), replayed.c_str());
  return std::string(buf) + (note.empty() ? "" : "   " + note) + "\n";
}

std::string g2(std::int64_t v) {
  return gib_str(v, 2);
}

// The GEMM of the overhead probe: the model's QKV projection for one micro-batch on one tp rank.
overhead_shapes shapes_of(const problem& p, const layout& l, double bucket_mb) {
  const auto& m = p.model;
  overhead_shapes s;
  s.m = p.training.seq * p.training.micro_batch;
  s.k = m.hidden;
  s.n = (m.heads + 2 * m.kv_heads) * m.head_dim / l.tp;
  s.bucket_bytes = static_cast<std::int64_t>(std::llround(bucket_mb * (1 << 20))) / 2 * 2;
  s.gemm_origin = "QKV projection of " + m.name + ": seq " + std::to_string(p.training.seq) +
                  " x micro-batch " + std::to_string(p.training.micro_batch) + ", hidden " +
                  std::to_string(m.hidden) + ", tp " + std::to_string(l.tp);
  const std::int64_t operands = 2 * (s.m * s.k + s.k * s.n + s.m * s.n);
  if (s.m > (1 << 30) || s.n > (1 << 30) || s.k > (1 << 30) || operands > (std::int64_t{64} << 30))
    throw bad_input("overheads", "the model's GEMM (" + std::to_string(s.m) + " x " + std::to_string(s.n) +
                                     " x " + std::to_string(s.k) + ") is too large to run as a probe");
  return s;
}

// Returns the CUDA context measured by `headroom context-probe` in a child process under
// CUDA_MODULE_LOADING=`mode` (a process has one context, made once: the other mode needs another process),
// or a layer that says why it could not be measured.
overhead_layer context_in_child(const std::string& mode) {
  const overhead_layer failed{"CUDA context", std::nullopt, 0, true, ""};
  auto fail = [&](const std::string& why) {
    overhead_layer l = failed;
    l.note = "not measured: " + why;
    return l;
  };
  int fds[2];
  if (pipe(fds) != 0) return fail("pipe failed");
  std::vector<std::string> env_text;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "CUDA_MODULE_LOADING=", 20) != 0) env_text.emplace_back(*e);
  env_text.push_back("CUDA_MODULE_LOADING=" + mode);
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  char self[] = "/proc/self/exe", sub[] = "context-probe";
  char* argv[] = {self, sub, nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, self, &fa, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; rc == 0 && (n = read(fds[0], buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  if (rc != 0) return fail(std::string("cannot start a child: ") + std::strerror(rc));
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return fail("the child process failed (status " + std::to_string(status) + ")");
  try {
    const auto j = nlohmann::json::parse(text);
    overhead_layer l = failed;
    if (!j.at("bytes").is_null()) l.bytes = j.at("bytes").get<std::int64_t>();
    l.used_after = j.at("used_after").get<std::int64_t>();
    l.note = j.at("note").get<std::string>() + ", in a child process";
    return l;
  } catch (const nlohmann::json::exception&) {
    return fail("the child's answer was not the expected JSON");
  }
}

int run_overheads(const probe_options& o, const problem& p, const layout& l) {
  const overhead_shapes shapes = shapes_of(p, l, o.bucket_mb);
  if (auto why = cuda_unavailable_reason()) {
    std::cerr << "headroom: no CUDA device (" << *why << ")\n";
    return exit_no_device;
  }
  overheads r = probe_overheads(shapes);
  r.other_module_loading = r.module_loading == "EAGER" ? "LAZY" : "EAGER";
  r.context_other_mode = context_in_child(r.other_module_loading);
  environment env{HEADROOM_VERSION, HEADROOM_GIT_REVISION, o.command_line, read_gpu_environment()};
  if (!o.json_out.empty()) {
    nlohmann::json inputs = inputs_json(p);
    inputs["layout"] = axes_string(l);
    write_new_file(o.json_out, overheads_to_json(r, inputs, env).dump(2) + "\n", o.force, &std::cout);
    if (o.json_out == "-") return exit_fits;
  }
  std::ostringstream out;
  out << "headroom probe --overheads: " << env.gpu->gpu << ", driver " << env.gpu->driver << ", CUDA runtime "
      << env.gpu->cuda_runtime << ", NCCL " << env.gpu->nccl.value_or("not loaded") << "\n";
  out << "measured: layered deltas of device-used memory (NVML before the context, cudaMemGetInfo after)\n\n";
  char buf[200];
  std::snprintf(buf, sizeof buf, "  %-24s %12s %14s\n", "layer", "MiB", "device used");
  out << buf;
  for (const auto& x : r.layers) {
    std::snprintf(buf, sizeof buf, "  %-24s %12s %14s   ", x.name.c_str(),
                  x.bytes ? fixed(static_cast<double>(*x.bytes) / (1 << 20), 1).c_str() : "-",
                  (gib_str(x.used_after, 2) + " GiB").c_str());
    out << buf << x.note << "\n";
  }
  if (r.context_other_mode)
    out << "\nCUDA context with CUDA_MODULE_LOADING=" << r.other_module_loading << ": "
        << (r.context_other_mode->bytes
                ? fixed(static_cast<double>(*r.context_other_mode->bytes) / (1 << 20), 1) + " MiB"
                : std::string("-"))
        << " (" << r.context_other_mode->note << ")\n";
  out << "\nfixed overhead (context + cuBLAS + NCCL, measured layers): "
      << fixed(static_cast<double>(r.fixed_bytes()) / (1 << 20), 1) << " MiB of the planner's "
      << gib_str(p.device.reserve.fixed, 1) << " GiB reserve\n";
  if (!o.json_out.empty()) out << "overheads record written to " << o.json_out << "\n";
  std::cout << out.str();
  return exit_fits;
}

void write_search(std::ostream& out, const char* what, const fit_search& s, const char* note) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "  %-28s %10s   ", what,
                s.largest ? (std::to_string(*s.largest) + (s.reached_limit ? "+" : "")).c_str() : "none");
  out << buf << note << " (" << s.trials.size() << " trials)\n";
}

nlohmann::json search_json(const fit_search& s) {
  nlohmann::json trials = nlohmann::json::array();
  for (const auto& t : s.trials)
    trials.push_back({{"value", t.value}, {"fits", t.fits}, {"detail", t.detail}});
  return {{"largest", s.largest ? nlohmann::json(*s.largest) : nlohmann::json(nullptr)},
          {"reached_limit", s.reached_limit},
          {"trials", trials}};
}

int run_max_fit(const probe_options& o, problem p, const layout& l, const caching_options& copt) {
  const fit_axis axis = fit_axis_from(o.max_fit);
  auto target = open_target(o, copt, p);
  if (!target) return exit_no_device;
  max_fit_options mo;
  mo.axis = axis;
  mo.limit = o.max_fit_limit.value_or(0);
  mo.stage = o.stage;
  mo.make_allocator = target->make_allocator;
  mo.make_checker = target->make_checker;
  mo.cleanup_slack = target->gpu ? target->gpu->cleanup_slack() : 0;
  const max_fit_result r = max_fit(p, l, target->dev(), mo);
  const environment env = environment_of(o, &*target);
  if (!o.json_out.empty()) {
    nlohmann::json j;
    j["schema"] = "headroom.max_fit/1";
    j["environment"] = environment_json(env);
    j["inputs"] = case_inputs(o, p, l);
    j["backend"] = target->backend();
    j["measured"] = target->gpu != nullptr;
    j["device"] = target->dev().describe();
    j["allocator"] = r.allocator;
    j["axis"] = to_string(axis);
    j["step"] = r.step;
    j["limit"] = r.limit;
    j["current"] = r.current;
    j["replayed"] = search_json(r.replayed);
    j["predicted_verdict"] = search_json(r.predicted_verdict);
    j["predicted_step_peak"] = search_json(r.predicted_peak);
    write_new_file(o.json_out, j.dump(2) + "\n", o.force, &std::cout);
    if (o.json_out == "-") return r.replayed.largest ? exit_fits : exit_does_not_fit;
  }
  std::ostringstream out;
  out << "headroom probe --max-fit " << to_string(axis) << ": " << p.model.name << ", " << zero_name(l)
      << ", recompute " << to_string(l.recompute) << ", " << axes_string(l) << "\n";
  out << "backend " << target->dev().describe()
      << (r.allocator.empty() ? std::string() : "; allocator " + r.allocator) << "\n";
  out << "largest " << to_string(axis) << " that fits in " << gib_str(p.device.capacity, 1)
      << " GiB (multiples of " << r.step << ", searched up to " << r.limit << "; now " << r.current << "):\n";
  write_search(out, target->gpu ? "replayed on the GPU" : "replayed on the sim device", r.replayed,
               target->gpu ? "measured: every trial a full replay with fill and verify"
                           : "emulated: allocator rules over the simulated device");
  write_search(out, "planner, step peak", r.predicted_peak, "predicted: step peak <= capacity, no reserve");
  write_search(out, "planner, verdict", r.predicted_verdict,
               "predicted: the verdict, seed's total and step peak + overheads <= capacity");
  out << "trials on the device:\n";
  for (const auto& t : r.replayed.trials)
    out << "  " << to_string(axis) << " " << t.value << ": " << (t.fits ? "fits, " : "does not fit, ")
        << t.detail << "\n";
  if (!o.json_out.empty()) out << "max-fit record written to " << o.json_out << "\n";
  std::cout << out.str();
  return r.replayed.largest ? exit_fits : exit_does_not_fit;
}

}  // namespace

CLI::App* add_trace_command(CLI::App& app, probe_options& o) {
  auto* c = app.add_subcommand("trace", "Write the ordered tensor events of one training step on one rank");
  add_problem_options(c, o.problem);
  add_output_options(c, o);
  c->add_option("--json", o.json_out, "Write the trace as JSON to FILE ('-' for stdout)");
  return c;
}

CLI::App* add_probe_command(CLI::App& app, probe_options& o) {
  auto* c = app.add_subcommand("probe",
                               "Replay one step through an allocator on a device; compare with the planner");
  add_problem_options(c, o.problem);
  add_output_options(c, o);
  c->add_option("--backend", o.backend, "Device: sim (any CPU) or cuda (GPU 0)")
      ->check(CLI::IsMember({"sim", "cuda"}))
      ->capture_default_str();
  c->add_option("--allocator", o.allocator,
                "Policy: raw (one allocation per tensor), caching (PyTorch's rules), driver-pool "
                "(cudaMallocAsync; cuda only)")
      ->check(CLI::IsMember({"raw", "caching", "driver-pool"}))
      ->capture_default_str();
  c->add_option("--max-split-size-mb", o.max_split_size_mb, "Caching: PyTorch's max_split_size_mb");
  c->add_flag("--expandable-segments", o.expandable_segments, "Caching: PyTorch's expandable_segments:True");
  c->add_option("--granularity-mib", o.granularity_mib, "Sim device page size, MiB")->capture_default_str();
  c->add_option("--trace", o.trace_file,
                "Replay this trace file (from headroom trace --json) instead of building one");
  c->add_option("--json", o.json_out, "Write the record to FILE ('-' for stdout)");
  c->add_option("--timeline", o.timeline_out,
                "Draw bytes over the step's events as SVG to FILE ('-' for stdout)");
  c->add_option("--max-fit", o.max_fit,
                "Find the largest micro-batch, seq or layers that fits on the device (bisection of replays)")
      ->check(CLI::IsMember({"micro-batch", "seq", "layers"}));
  c->add_option("--max-fit-limit", o.max_fit_limit, "Largest value --max-fit tries (default per axis)");
  c->add_flag("--overheads", o.overheads,
              "Measure the GPU stack's fixed costs: context, cuBLAS, NCCL (layered device-used deltas)");
  c->add_option("--bucket-mb", o.bucket_mb, "--overheads: gradient bucket all-reduced, MiB")
      ->capture_default_str();
  c->add_option("--snapshot", o.snapshot_file,
                "Replay a PyTorch memory snapshot (pickle or JSON) through the allocator emulation");
  c->add_option("--snapshot-device", o.snapshot_device, "--snapshot: the device trace to replay")
      ->capture_default_str();
  c->add_option("--rank-timeout", o.rank_timeout_s,
                "Under mpirun/srun: seconds to wait for every rank before ending the run without them")
      ->capture_default_str();
  c->add_flag("--what-if", o.what_if,
              "--snapshot: the same sequence under other settings and the least capacity each needs");
  // With --snapshot no model is needed; without, problem_from() asks for one.
  c->get_option_group("model")->require_option(-1);
  return c;
}

int run_context_probe() {
  const overhead_layer l = probe_context_only();
  nlohmann::json j = {{"bytes", l.bytes ? nlohmann::json(*l.bytes) : nlohmann::json(nullptr)},
                      {"used_after", l.used_after},
                      {"note", l.note}};
  std::cout << j.dump() << "\n";
  return exit_fits;
}

int run_trace(const probe_options& o) {
  const problem p = problem_from(o.problem);
  const breakdown b = estimate(p, layout_from(o.problem));
  output_set outs(o.force, &std::cout);
  outs.expect(o.json_out);
  const step_trace t = build_trace(p, b.where, stage_of(o, b));
  if (!o.json_out.empty()) {
    outs.add(o.json_out, [&t](std::ostream& out) {
      write_trace_json(out, t);
      out << "\n";
    });
    outs.commit();
    if (outs.to_stdout()) return exit_fits;
  }
  const auto peak = trace_peak(t);
  std::cout << "headroom trace: " << t.model << ", " << t.layout_text << ", stage " << t.stage << " of "
            << t.stages << "\n";
  std::cout << "  " << t.events.size() << " events over " << t.tensors.size() << " tensors; "
            << t.microbatches_traced << " of " << t.microbatches_per_step
            << " micro-batches traced (enough for the 1F1B steady state)\n";
  std::cout << "  peak live bytes " << gib_str(peak.bytes, 2) << " GiB at event " << peak.event << " ("
            << to_string(t.events[peak.event].when) << ", "
            << t.tensors[static_cast<std::size_t>(t.events[peak.event].tensor)].name << ")\n";
  std::cout << "  planner: persistent + transient + activations + max(working set, output phase) = "
            << gib_str(b.stages[static_cast<std::size_t>(t.stage)].step_peak, 2) << " GiB\n";
  if (!o.json_out.empty()) std::cout << "  written to " << o.json_out << "\n";
  return exit_fits;
}

int run_probe(const probe_options& o) {
  // Started by mpirun or srun: every rank probes its own part of the layout (multi_rank_probe.hpp). A world
  // of one rank takes that path too (no MPI needed), so its record carries its placement and, on a GPU, a
  // one-rank NCCL communicator.
  if (auto li = detect_launch([](const char* name) { return std::getenv(name); }))
    return run_multi_rank_probe(o, *li);
  if (!o.snapshot_file.empty()) return run_snapshot_probe(o);
  if (o.what_if) throw bad_input("what-if", "applies to --snapshot");
  // Every output is checked before any work: a refused target must not cost a GPU run first.
  output_set outs(o.force, &std::cout);
  outs.expect(o.json_out);
  outs.expect(o.timeline_out);
  problem p = problem_from(o.problem);
  const caching_options copt = check_options(o);
  const layout l = layout_from(o.problem);
  validate(p, l);
  if (o.overheads) return run_overheads(o, p, l);
  if (!o.max_fit.empty()) return run_max_fit(o, p, l, copt);

  // The trace first (a bad trace file is bad input, whatever the device), then the device.
  step_trace t;
  std::optional<int> trace_stage;
  if (!o.trace_file.empty()) {
    t = trace_from_json(read_json_file(o.trace_file), o.trace_file);
    trace_stage = t.stage;
    // The record compares the replay with the planner's figures for the command line's case: a trace of
    // another model or layout would make that comparison (and the implied reserve) meaningless.
    const std::string want = trace_layout_text(l);
    if (t.model != p.model.name)
      throw bad_input("trace", "was built for model '" + t.model + "', the command line gives '" +
                                   p.model.name + "' (a snapshot's trace replays with --snapshot)");
    if (t.layout_text != want)
      throw bad_input("trace",
                      "was built for layout '" + t.layout_text + "', the command line gives '" + want + "'");
    if (t.stage >= l.pp) throw bad_input("trace", "its stage " + std::to_string(t.stage) + " is beyond pp");
  }
  auto target = open_target(o, copt, p);
  if (!target) return exit_no_device;
  const breakdown b = estimate(p, l);
  const int stage = trace_stage ? *trace_stage : stage_of(o, b);
  if (!trace_stage) t = build_trace(p, b.where, stage);
  const stage_breakdown& predicted = b.stages[static_cast<std::size_t>(stage)];
  if (predicted.persistent > p.device.capacity) {
    // The same verdict as `plan` for this layout: it does not fit (exit 3), with nothing to replay.
    std::cout << "does not fit: the persistent state of stage " << stage << " ("
              << gib_str(predicted.persistent) << " GiB) is larger than the capacity ("
              << gib_str(p.device.capacity) << " GiB); nothing to replay\n";
    return exit_does_not_fit;
  }

  std::optional<touch_throughput> throughput;
  if (target->gpu) throughput = target->gpu->measure_throughput(throughput_bytes);
  auto [c, m] = run_on_target(*target, t, predicted, !o.timeline_out.empty());
  m.throughput = throughput;
  const environment env = environment_of(o, &*target);
  const bool verify_failed = c.replayed.verified && !c.replayed.verified->ok();

  // Files first, all or nothing, so a failed write is reported before the table claims success.
  if (!o.json_out.empty())
    outs.add(o.json_out, measurement_to_json(m, case_inputs(o, p, l), env).dump(2) + "\n");
  if (!o.timeline_out.empty())
    outs.add(o.timeline_out,
             timeline_svg(t, c.replayed, p.device.capacity,
                          t.model + ": " + t.layout_text + ", stage " + std::to_string(stage) + "; " +
                              c.allocator + " on " + target->dev().describe()));
  outs.commit();
  if (outs.to_stdout()) return verify_failed ? exit_device_failed : m.oom_at ? exit_does_not_fit : exit_fits;

  const replay_result& r = c.replayed;
  const char* kind = target->gpu ? "measured" : "emulated";
  std::ostringstream out;
  out << "headroom probe: " << t.model << ", " << t.layout_text << ", stage " << stage << " of " << t.stages
      << "\n";
  out << "backend " << target->dev().describe()
      << (target->gpu ? "" : "; CUDA context and NCCL are not modelled (0 GiB)") << "\n";
  out << "allocator " << c.allocator << "\n";
  out << "trace " << t.events.size() << " events, " << t.microbatches_traced << " of "
      << t.microbatches_per_step << " micro-batches (enough for the 1F1B steady state)\n\n";
  out << row("", "predicted", "replayed") << row("", "(planner)", target->gpu ? "(GPU)" : "(sim)");
  out << row("peak requested, GiB", g2(predicted.step_peak), g2(r.requested.bytes),
             "planner: state + activations + max(working set, output)");
  out << row("peak allocated, GiB", "-", g2(r.allocated.bytes), "after 512 B / granularity rounding");
  out << row("peak reserved, GiB", "-", g2(r.reserved.bytes), kind);
  out << row("fragmentation", "-", fixed(100.0 * r.fragmentation(), 2) + "%",
             "1 - peak allocated / peak reserved");
  out << row("model terms, GiB", g2(predicted.persistent + predicted.transient + predicted.activations), "",
             "state + transient + activations");
  out << row("reserve, GiB", g2(predicted.reserve), g2(m.implied_reserve()),
             "replayed: peak reserved - model terms (context, NCCL not included)");
  if (m.truth) {
    const auto& d = *m.truth;
    out << "\ndevice used (driver): "
        << (d.before_context ? g2(*d.before_context) + " GiB before the context (NVML), " : "")
        << g2(d.after_context) << " GiB after it";
    if (r.device_used_at_peak)
      out << "; at the reserved peak " << g2(*r.device_used_at_peak) << " GiB = reserved "
          << g2(r.reserved.bytes) << " + " << g2(*r.device_used_at_peak - r.reserved.bytes)
          << " outside the allocator";
    out << "\n";
  }
  if (r.verified) {
    const auto& v = *r.verified;
    out << "fill + verify: " << v.blocks_verified << " blocks, " << g2(v.bytes_verified) << " GiB checked, "
        << v.mismatched_words << " mismatched words";
    if (m.first_mismatch_tensor) out << " (first in " << *m.first_mismatch_tensor << ")";
    out << "\n";
  }
  if (m.throughput)
    out << "fill + verify throughput " << fixed(m.throughput->fill_verify_gbs, 0)
        << " GB/s against a device copy's " << fixed(m.throughput->copy_gbs, 0) << " GB/s ("
        << fixed(100 * m.throughput->ratio(), 0) << "%)\n";
  if (m.pool)
    out << "driver pool high-water: reserved " << g2(m.pool->reserved_high) << " GiB, used "
        << g2(m.pool->used_high) << " GiB\n";
  if (m.cleanup)
    out << "device back at its starting free memory ("
        << fixed(static_cast<double>(m.cleanup->missing()) / (1 << 20), 1) << " MiB short, "
        << fixed(static_cast<double>(m.cleanup->slack) / (1 << 20), 0) << " MiB allowed)\n";
  if (r.events_replayed > 0)
    out << "\npeak reserved at event " << m.peak_reserved_at.index << " (" << m.peak_reserved_at.phase << ", "
        << m.peak_reserved_at.tensor << ", " << gib_str(m.peak_reserved_at.bytes, 3) << " GiB)\n"
        << "peak allocated at event " << m.peak_allocated_at.index << " (" << m.peak_allocated_at.phase
        << ", " << m.peak_allocated_at.tensor << ", " << gib_str(m.peak_allocated_at.bytes, 3) << " GiB)\n";
  if (r.retries) out << "the allocator freed its cache and retried " << r.retries << " time(s)\n";
  if (m.oom_at) {
    out << "out of memory at event " << m.oom_at->index << " (" << m.oom_at->phase
        << "): " << m.oom_at->tensor << ", " << gib_str(m.oom_at->bytes, 3) << " GiB, with "
        << g2(r.reserved_at_end) << " of " << gib_str(p.device.capacity, 1) << " GiB reserved\n";
  }
  if (!o.json_out.empty()) out << "measurement record written to " << o.json_out << "\n";
  if (!o.timeline_out.empty()) out << "timeline written to " << o.timeline_out << "\n";
  std::cout << out.str();
  if (verify_failed) {
    std::cerr << "headroom: device error: " << r.verified->mismatched_words
              << " words did not hold their pattern, first in tensor '"
              << m.first_mismatch_tensor.value_or("?") << "'\n";
    return exit_device_failed;
  }
  return m.oom_at ? exit_does_not_fit : exit_fits;
}

}  // namespace headroom::cli
