// probe_command.cpp: `headroom trace`, the `probe` subcommands' options, the answer to the flag forms they
// replaced, and `probe replay` (see probe_command.hpp). Parsing and printing only: cases and searches live in
// probes/. `probe max-fit` and `probe overheads`: probe_modes.cpp; `probe snapshot`: snapshot_command.cpp.
#include "probe_command.hpp"

#include <cstdlib>
#include <iostream>
#include <sstream>

#include "exit_codes.hpp"
#include "record_files.hpp"
#include "multi_rank_probe.hpp"
#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/model_files.hpp"
#include "planner/units.hpp"
#include "probe_target.hpp"
#include "probes/cases/measurement.hpp"
#include "probes/cases/probe_case.hpp"
#include "probes/io/results_file.hpp"
#include "probes/ranks/launch.hpp"
#include "probes/trace/timeline_svg.hpp"
#include "probes/trace/trace_io.hpp"
#include "tables.hpp"

namespace headroom::cli {

using namespace headroom::probes;

namespace {

// fill + verify throughput is measured over buffers of this size before a CUDA case.
constexpr std::int64_t throughput_bytes = gib;

void add_stage_option(CLI::App* c, std::optional<int>& stage) {
  c->add_option("--stage", stage, "Pipeline stage to trace (default: the planner's worst rank)");
}

void add_record_options(CLI::App* c, probe_case_options& o) {
  c->add_option("--json", o.json_out, "Write the record to FILE ('-' for stdout)");
  c->add_flag("--force", o.force, "Replace output files that exist");
}

void add_device_options(CLI::App* c, probe_device_options& o) {
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
  add_stage_option(c, o.stage);
}

CLI::App* add_replay_command(CLI::App* probe, probe_replay_options& o) {
  auto* c = probe->add_subcommand(
      "replay",
      "Replay one step through an allocator on a device; compare with the planner (under mpirun or "
      "srun, every rank its own stage)");
  add_problem_options(c, o.problem);
  add_device_options(c, o);
  add_record_options(c, o);
  c->add_option("--trace", o.trace_file,
                "Replay this trace file (from headroom trace --json) instead of building one");
  c->add_option("--timeline", o.timeline_out,
                "Draw bytes over the step's events as SVG to FILE ('-' for stdout)");
  c->add_option("--bucket-mb", o.bucket_mb,
                "Under mpirun/srun: the data-parallel group's first all-reduce (gradient bucket), MiB")
      ->capture_default_str();
  c->add_option("--rank-timeout", o.rank_timeout_s,
                "Under mpirun/srun: seconds to wait for every rank before ending the run without them")
      ->capture_default_str();
  return c;
}

CLI::App* add_max_fit_command(CLI::App* probe, probe_max_fit_options& o) {
  auto* c = probe->add_subcommand(
      "max-fit",
      "Find the largest micro-batch, seq or layers that fits on the device (bisection of replays)");
  c->add_option("axis", o.axis, "What to search: micro-batch, seq or layers")
      ->required()
      ->check(CLI::IsMember({"micro-batch", "seq", "layers"}));
  add_problem_options(c, o.problem);
  add_device_options(c, o);
  add_record_options(c, o);
  c->add_option("--max-fit-limit", o.limit, "Largest value to try (default per axis)");
  return c;
}

CLI::App* add_overheads_command(CLI::App* probe, probe_overheads_options& o) {
  auto* c = probe->add_subcommand(
      "overheads", "Measure the GPU stack's fixed costs: context, cuBLAS, NCCL (layered device-used deltas)");
  add_problem_options(c, o.problem);
  add_record_options(c, o);
  c->add_option("--bucket-mb", o.bucket_mb, "Gradient bucket all-reduced, MiB")->capture_default_str();
  return c;
}

// The stage to trace: the one given, or the planner's worst.
int stage_of(const std::optional<int>& stage, const breakdown& b) {
  if (!stage) return b.worst;
  if (*stage < 0 || *stage >= b.where.pp)
    throw bad_input("stage", "must be between 0 and " + std::to_string(b.where.pp - 1) + ", got " +
                                 std::to_string(*stage));
  return *stage;
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

// The trace file of `probe replay --trace`, checked against the command line's case: the record compares
// the replay with the planner's figures for that case, so a trace of another model or layout would make
// that comparison (and the implied reserve) meaningless.
step_trace read_trace_for(const std::string& file, const problem& p, const layout& l) {
  step_trace t = trace_from_json(read_json_file(file), file);
  const std::string want = trace_layout_text(l);
  if (t.model != p.model.name)
    throw bad_input("trace", "was built for model '" + t.model + "', the command line gives '" +
                                 p.model.name + "' (a snapshot's trace replays with 'probe snapshot')");
  if (t.layout_text != want)
    throw bad_input("trace",
                    "was built for layout '" + t.layout_text + "', the command line gives '" + want + "'");
  if (t.stage >= l.pp) throw bad_input("trace", "its stage " + std::to_string(t.stage) + " is beyond pp");
  return t;
}

// What the text of one replay is written from.
struct replay_view {
  const step_trace& t;
  int stage;
  bool gpu;
  std::string device;  // the target's description
  const case_result& c;
  const measurement& m;
  const stage_breakdown& predicted;
  std::int64_t capacity;
};

// The head of a replay's text and its table, predicted beside replayed.
void write_replay_table(std::ostream& out, const replay_view& v) {
  const replay_result& r = v.c.replayed;
  const auto& t = v.t;
  const auto& predicted = v.predicted;
  out << "headroom probe: " << printable(t.model) << ", " << printable(t.layout_text) << ", stage " << v.stage << " of " << t.stages
      << "\n";
  out << "backend " << v.device << (v.gpu ? "" : "; CUDA context and NCCL are not modelled (0 GiB)") << "\n";
  out << "allocator " << v.c.allocator << "\n";
  out << "trace " << t.events.size() << " events, " << t.microbatches_traced << " of "
      << t.microbatches_per_step << " micro-batches (enough for the 1F1B steady state)\n\n";
  out << row("", "predicted", "replayed") << row("", "(planner)", v.gpu ? "(GPU)" : "(sim)");
  out << row("peak requested, GiB", g2(predicted.step_peak), g2(r.requested.bytes),
             "planner: state + activations + max(working set, output)");
  out << row("peak allocated, GiB", "-", g2(r.allocated.bytes), "after 512 B / granularity rounding");
  out << row("peak reserved, GiB", "-", g2(r.reserved.bytes), v.gpu ? "measured" : "emulated");
  out << row("fragmentation", "-", fixed(100.0 * r.fragmentation(), 2) + "%",
             "1 - peak allocated / peak reserved");
  out << row("model terms, GiB", g2(predicted.persistent + predicted.transient + predicted.activations), "",
             "state + transient + activations");
  out << row("reserve, GiB", g2(predicted.reserve), g2(v.m.implied_reserve()),
             "replayed: peak reserved - model terms (context, NCCL not included)");
}

// What a GPU replay adds: the driver's view, fill + verify, the pool, the cleanup check.
void write_device_lines(std::ostream& out, const replay_view& v) {
  const replay_result& r = v.c.replayed;
  const measurement& m = v.m;
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
    const auto& c = *r.verified;
    out << "fill + verify: " << c.blocks_verified << " blocks, " << g2(c.bytes_verified) << " GiB checked, "
        << c.mismatched_words << " mismatched words";
    if (m.first_mismatch_tensor) out << " (first in " << printable(*m.first_mismatch_tensor) << ")";
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
    out << "device back at its starting free memory (" << mib_str(m.cleanup->missing()) << " MiB short, "
        << mib_str(m.cleanup->slack, 0) << " MiB allowed)\n";
}

// Where the peaks and an out-of-memory fell, and the files written.
void write_replay_events(std::ostream& out, const replay_view& v, const probe_replay_options& o) {
  const replay_result& r = v.c.replayed;
  const measurement& m = v.m;
  if (r.events_replayed > 0)
    out << "\npeak reserved at event " << m.peak_reserved_at.index << " (" << m.peak_reserved_at.phase << ", "
        << printable(m.peak_reserved_at.tensor) << ", " << gib_str(m.peak_reserved_at.bytes, 3) << " GiB)\n"
        << "peak allocated at event " << m.peak_allocated_at.index << " (" << m.peak_allocated_at.phase
        << ", " << printable(m.peak_allocated_at.tensor) << ", " << gib_str(m.peak_allocated_at.bytes, 3) << " GiB)\n";
  if (r.retries) out << "the allocator freed its cache and retried " << r.retries << " time(s)\n";
  if (m.oom_at) {
    out << "out of memory at event " << m.oom_at->index << " (" << m.oom_at->phase
        << "): " << printable(m.oom_at->tensor) << ", " << gib_str(m.oom_at->bytes, 3) << " GiB, with "
        << g2(r.reserved_at_end) << " of " << gib_str(v.capacity, 1) << " GiB reserved\n";
  }
  if (!o.json_out.empty()) out << "measurement record written to " << o.json_out << "\n";
  if (!o.timeline_out.empty()) out << "timeline written to " << o.timeline_out << "\n";
}

}  // namespace

CLI::App* add_trace_command(CLI::App& app, trace_options& o) {
  auto* c = app.add_subcommand("trace", "Write the ordered tensor events of one training step on one rank");
  add_problem_options(c, o.problem);
  add_stage_option(c, o.stage);
  c->add_flag("--force", o.force, "Replace output files that exist");
  c->add_option("--json", o.json_out, "Write the trace as JSON to FILE ('-' for stdout)");
  return c;
}

CLI::App* add_probe_command(CLI::App& app, probe_command_options& o) {
  auto* c = app.add_subcommand(
      "probe",
      "Replay one step on a device, search the largest that fits, measure a GPU stack's overheads, "
      "or replay a PyTorch snapshot");
  c->require_subcommand(1);
  o.replay_cmd = add_replay_command(c, o.replay);
  o.max_fit_cmd = add_max_fit_command(c, o.max_fit);
  o.overheads_cmd = add_overheads_command(c, o.overheads);
  o.snapshot_cmd = add_probe_snapshot_command(c, o.snapshot);
  return c;
}

std::optional<std::string> moved_probe_form(int argc, const char* const* argv) {
  if (argc < 3 || std::string(argv[1]) != "probe") return std::nullopt;
  const std::string first = argv[2];
  // A subcommand (or a word the parser will refuse), or a request for help: not a flag form.
  if (first.size() < 2 || first[0] != '-' || first == "-h" || first == "--help") return std::nullopt;
  auto has = [&](const std::string& flag) {
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == flag || a.rfind(flag + "=", 0) == 0) return true;
    }
    return false;
  };
  const char *was = "probe OPTIONS", *now = "probe replay OPTIONS";
  if (has("--snapshot")) {
    was = "probe --snapshot FILE";
    now = "probe snapshot FILE";
  } else if (has("--max-fit")) {
    was = "probe --max-fit AXIS";
    now = "probe max-fit AXIS";
  } else if (has("--overheads")) {
    was = "probe --overheads";
    now = "probe overheads";
  } else if (has("--trace")) {
    was = "probe --trace FILE";
    now = "probe replay --trace FILE";
  }
  return std::string("headroom: '") + was + "' is now '" + now + "'";
}

std::optional<int> refused_under_launcher(const char* what) {
  const auto li = detect_launch([](const char* name) { return std::getenv(name); });
  if (!li) return std::nullopt;
  // Every process says it, not rank 0 alone: without an exchange nothing shows that a rank 0 exists to speak
  // for this one (the variables may have been set by hand). `what` is a subcommand's name: one short line.
  std::cerr << "headroom: bad input: ranks: 'probe " << what
            << "' applies to a single-rank probe, not under a launcher\n";
  return exit_bad_input;
}

int run_probe(const probe_command_options& o) {
  auto with_line = [&o](auto options) {
    options.command_line = o.command_line;
    return options;
  };
  if (o.max_fit_cmd->parsed()) return run_probe_max_fit(with_line(o.max_fit));
  if (o.overheads_cmd->parsed()) return run_probe_overheads(with_line(o.overheads));
  if (o.snapshot_cmd->parsed()) return run_probe_snapshot(o.snapshot);
  return run_probe_replay(with_line(o.replay));
}

int run_trace(const trace_options& o) {
  const problem p = problem_from(o.problem);
  const breakdown b = estimate(p, layout_from(o.problem));
  output_set outs(o.force, &std::cout);
  add_problem_inputs(outs, o.problem);
  outs.expect(o.json_out);
  const step_trace t = build_trace(p, b.where, stage_of(o.stage, b));
  if (!o.json_out.empty()) {
    outs.add(o.json_out, [&t](std::ostream& out) {
      write_trace_json(out, t);
      out << "\n";
    });
    outs.commit();
  }
  // With the trace on standard output, the summary goes to stderr: '-' means the document alone.
  std::ostream& say = o.json_out == "-" ? std::cerr : std::cout;
  const auto peak = trace_peak(t);
  say << "headroom trace: " << printable(t.model) << ", " << printable(t.layout_text) << ", stage " << t.stage << " of "
            << t.stages << "\n";
  say << "  " << t.events.size() << " events over " << t.tensors.size() << " tensors; "
            << t.microbatches_traced << " of " << t.microbatches_per_step
            << " micro-batches traced (enough for the 1F1B steady state)\n";
  say << "  peak live bytes " << gib_str(peak.bytes, 2) << " GiB at event " << peak.event << " ("
            << to_string(t.events[peak.event].when) << ", "
            << printable(t.tensors[static_cast<std::size_t>(t.events[peak.event].tensor)].name) << ")\n";
  say << "  planner: library workspaces + persistent + transient + activations + max(working set, output phase) = "
            << gib_str(b.stages[static_cast<std::size_t>(t.stage)].step_peak, 2) << " GiB\n";
  if (!o.json_out.empty() && o.json_out != "-") say << "  written to " << printable(o.json_out) << "\n";
  return exit_fits;
}

int run_probe_replay(const probe_replay_options& o) {
  // Started by mpirun or srun: every rank probes its own part of the layout (multi_rank_probe.hpp). A world
  // of one rank takes that path too (no MPI needed), so its record carries its placement and, on a GPU, a
  // one-rank NCCL communicator.
  if (auto li = detect_launch([](const char* name) { return std::getenv(name); }))
    return run_multi_rank_probe(o, *li);
  // Every output is checked before any work: a refused target must not cost a GPU run first.
  output_set outs(o.force, &std::cout);
  add_problem_inputs(outs, o.problem);
  outs.input(o.trace_file);
  outs.expect(o.json_out);
  outs.expect(o.timeline_out);
  problem p = problem_from(o.problem);
  const caching_options copt = check_options(o);
  const layout l = layout_from(o.problem);
  validate(p, l);
  // The trace first (a bad trace file is bad input, whatever the device), then the device.
  std::optional<step_trace> from_file;
  if (!o.trace_file.empty()) from_file = read_trace_for(o.trace_file, p, l);
  auto target = open_target(o, copt, p);
  if (!target) return exit_no_device;
  const breakdown b = estimate(p, l);
  const int stage = from_file ? from_file->stage : stage_of(o.stage, b);
  const step_trace t = from_file ? std::move(*from_file) : build_trace(p, b.where, stage);
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
  const replay_view v{t, stage,     target->gpu != nullptr, target->dev().describe(), c,
                      m, predicted, p.device.capacity};

  // Files first, all or nothing, so a failed write is reported before the table claims success.
  if (!o.json_out.empty())
    outs.add(o.json_out, measurement_to_json(m, case_inputs(o, p, l), env).dump(2) + "\n");
  if (!o.timeline_out.empty())
    outs.add(o.timeline_out,
             timeline_svg(t, c.replayed, p.device.capacity,
                          t.model + ": " + t.layout_text + ", stage " + std::to_string(stage) + "; " +
                              c.allocator + " on " + v.device));
  outs.commit();
  if (outs.to_stdout()) return verify_failed ? exit_device_failed : m.oom_at ? exit_does_not_fit : exit_fits;

  std::ostringstream out;
  write_replay_table(out, v);
  write_device_lines(out, v);
  write_replay_events(out, v, o);
  std::cout << out.str();
  if (verify_failed) {
    std::cerr << "headroom: device error: " << c.replayed.verified->mismatched_words
              << " words did not hold their pattern, first in tensor '"
              << printable(m.first_mismatch_tensor.value_or("?")) << "'\n";
    return exit_device_failed;
  }
  return m.oom_at ? exit_does_not_fit : exit_fits;
}

}  // namespace headroom::cli
