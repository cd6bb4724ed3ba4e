// probe_command.cpp: `headroom trace` and `headroom probe --backend sim` (see probe_command.hpp).
#include "probe_command.hpp"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "exit_codes.hpp"
#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/model_files.hpp"
#include "probes/caching_allocator.hpp"
#include "probes/measurement.hpp"
#include "probes/results_file.hpp"
#include "probes/sim_device.hpp"
#include "probes/timeline_svg.hpp"
#include "probes/trace_io.hpp"
#include "report.hpp"
#include "version.hpp"


namespace headroom::cli {

using namespace headroom::probes;

namespace {

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

void emit(const std::string& path, const std::string& text, bool force) {
  if (path == "-")
    std::cout << text;
  else
    write_new_file(path, text, force);
}

std::string row(const std::string& what, const std::string& predicted, const std::string& replayed,
                const std::string& note = "") {
  char buf[160];
  std::snprintf(buf, sizeof buf, "  %-30s %12s %12s", what.c_str(), predicted.c_str(), replayed.c_str());
  return std::string(buf) + (note.empty() ? "" : "   " + note) + "\n";
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
  c->add_option("--backend", o.backend, "Device: sim (any CPU) or cuda")
      ->check(CLI::IsMember({"sim", "cuda"}))
      ->capture_default_str();
  c->add_option("--allocator", o.allocator,
                "Policy: raw (one allocation per tensor) or caching (PyTorch's rules)")
      ->check(CLI::IsMember({"raw", "caching"}))
      ->capture_default_str();
  c->add_option("--max-split-size-mb", o.max_split_size_mb, "Caching: PyTorch's max_split_size_mb");
  c->add_flag("--expandable-segments", o.expandable_segments, "Caching: PyTorch's expandable_segments:True");
  c->add_option("--granularity-mib", o.granularity_mib, "Device page size, MiB")->capture_default_str();
  c->add_option("--trace", o.trace_file,
                "Replay this trace file (from headroom trace --json) instead of building one");
  c->add_option("--json", o.json_out, "Write the measurement record to FILE ('-' for stdout)");
  c->add_option("--timeline", o.timeline_out, "Draw bytes over the step's events as SVG to FILE");
  return c;
}

int run_trace(const probe_options& o) {
  const problem p = problem_from(o.problem);
  const breakdown b = estimate(p, layout_from(o.problem));
  const step_trace t = build_trace(p, b.where, stage_of(o, b));
  if (!o.json_out.empty()) {
    emit(o.json_out, trace_to_json(t).dump() + "\n", o.force);
    if (o.json_out == "-") return exit_fits;
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
  const problem p = problem_from(o.problem);
  if (o.backend == "cuda") {
    std::cerr << "headroom: no CUDA backend in this build yet (the GPU probes come in the next issue); "
                 "use --backend sim\n";
    return exit_no_device;
  }
  if (!(o.granularity_mib > 0) || o.granularity_mib > 1024 || std::fmod(o.granularity_mib * 1024, 1.0) != 0)
    throw bad_input("granularity-mib", "must be a positive whole number of KiB up to 1024 MiB");
  caching_options copt;
  copt.expandable_segments = o.expandable_segments;
  if (o.max_split_size_mb) {
    if (!(*o.max_split_size_mb >= 20) || *o.max_split_size_mb > 1e9)
      throw bad_input("max-split-size-mb", "must be at least 20 (PyTorch's lower limit)");
    copt.max_split_size = static_cast<std::int64_t>(*o.max_split_size_mb * (1 << 20));
  }
  if (o.allocator == "raw" && (o.max_split_size_mb || o.expandable_segments))
    throw bad_input("allocator",
                    "--max-split-size-mb and --expandable-segments apply to the caching allocator");

  const breakdown b = estimate(p, layout_from(o.problem));
  step_trace t;
  int stage = 0;
  if (!o.trace_file.empty()) {
    t = trace_from_json(read_json_file(o.trace_file), o.trace_file);
    stage = t.stage;
    if (stage >= b.where.pp) throw bad_input("trace", "its stage " + std::to_string(stage) + " is beyond pp");
  } else {
    stage = stage_of(o, b);
    t = build_trace(p, b.where, stage);
  }
  const stage_breakdown& predicted = b.stages[static_cast<std::size_t>(stage)];
  if (predicted.persistent > p.device.capacity)
    throw bad_input("gpu-mem", "capacity " + gib_str(p.device.capacity) +
                                   " GiB is smaller than the persistent state (" +
                                   gib_str(predicted.persistent) + " GiB) of stage " + std::to_string(stage));

  sim_device dev(p.device.capacity, static_cast<std::int64_t>(std::llround(o.granularity_mib * (1 << 20))));
  std::unique_ptr<allocator> alloc;
  if (o.allocator == "raw")
    alloc = make_raw_allocator(dev);
  else
    alloc = std::make_unique<caching_allocator>(dev, copt);
  replay_result r = replay(t, *alloc, !o.timeline_out.empty());
  r.device_peak = dev.peak_used();
  const measurement m = measure(t, predicted, r, "sim", dev.describe(), alloc->describe());

  // Files first, so a failed write is reported before the table claims success.
  if (!o.json_out.empty()) {
    const environment env{HEADROOM_VERSION, HEADROOM_GIT_REVISION, o.command_line};
    nlohmann::json inputs = inputs_json(p);
    inputs["layout"] =
        axes_string(b.where) + ", " + zero_name(b.where) + ", recompute " + to_string(b.where.recompute);
    inputs["trace_file"] = o.trace_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.trace_file);
    emit(o.json_out, measurement_to_json(m, inputs, env).dump(2) + "\n", o.force);
    if (o.json_out == "-") return m.oom_at ? exit_does_not_fit : exit_fits;
  }
  if (!o.timeline_out.empty())
    write_new_file(o.timeline_out,
                   timeline_svg(t, r, p.device.capacity,
                                t.model + ": " + t.layout_text + ", stage " + std::to_string(stage) + "; " +
                                    alloc->describe() + " on " + dev.describe()),
                   o.force);

  std::ostringstream out;
  out << "headroom probe: " << t.model << ", " << t.layout_text << ", stage " << stage << " of " << t.stages
      << "\n";
  out << "backend " << dev.describe() << "; CUDA context and NCCL are not modelled (0 GiB)\n";
  out << "allocator " << alloc->describe() << "\n";
  out << "trace " << t.events.size() << " events, " << t.microbatches_traced << " of "
      << t.microbatches_per_step << " micro-batches (enough for the 1F1B steady state)\n\n";
  out << row("", "predicted", "replayed") << row("", "(planner)", "(sim)");
  const auto g = [](std::int64_t v) { return gib_str(v, 2); };
  out << row("peak requested, GiB", g(predicted.step_peak), g(r.requested.bytes),
             "planner: state + activations + max(working set, output)");
  out << row("peak allocated, GiB", "-", g(r.allocated.bytes), "after 512 B / granularity rounding");
  out << row("peak reserved, GiB", "-", g(r.reserved.bytes));
  out << row("fragmentation", "-", fixed(100.0 * r.fragmentation(), 2) + "%",
             "1 - peak allocated / peak reserved");
  out << row("model terms, GiB", g(predicted.persistent + predicted.transient + predicted.activations), "",
             "state + transient + activations");
  out << row("reserve, GiB", g(predicted.reserve), g(m.implied_reserve()),
             "replayed: peak reserved - model terms (context, NCCL not included)");
  if (r.events_replayed > 0)
    out << "\npeak reserved at event " << m.peak_reserved_at.index << " (" << m.peak_reserved_at.phase << ", "
        << m.peak_reserved_at.tensor << ", " << gib_str(m.peak_reserved_at.bytes, 3) << " GiB)\n"
        << "peak allocated at event " << m.peak_allocated_at.index << " (" << m.peak_allocated_at.phase
        << ", " << m.peak_allocated_at.tensor << ", " << gib_str(m.peak_allocated_at.bytes, 3) << " GiB)\n";
  if (r.retries) out << "the allocator freed its cache and retried " << r.retries << " time(s)\n";
  if (m.oom_at) {
    out << "out of memory at event " << m.oom_at->index << " (" << m.oom_at->phase
        << "): " << m.oom_at->tensor << ", " << gib_str(m.oom_at->bytes, 3) << " GiB, with "
        << gib_str(alloc->stats().reserved, 2) << " of " << gib_str(p.device.capacity, 1)
        << " GiB reserved\n";
  }
  if (!o.json_out.empty()) out << "measurement record written to " << o.json_out << "\n";
  if (!o.timeline_out.empty()) out << "timeline written to " << o.timeline_out << "\n";
  std::cout << out.str();
  return m.oom_at ? exit_does_not_fit : exit_fits;
}

}  // namespace headroom::cli
