// probe_command.hpp: `headroom trace` (write the step trace of one rank) and `headroom probe`, whose
// subcommands are separate commands, each with its own options (an option that does not apply to one is
// refused by the parser):
//   probe replay FLAGS           replay one step's trace through an allocator policy on a device and compare
//                                with the planner (--trace FILE replays a trace file; started by mpirun or srun,
//                                every rank replays its own stage: multi_rank_probe.hpp)
//   probe max-fit AXIS FLAGS     the largest micro-batch, seq or layers that fits on the device
//   probe overheads FLAGS        the fixed costs of a GPU stack: context, cuBLAS, NCCL
//   probe snapshot FILE FLAGS    a PyTorch memory snapshot through the allocator emulation (snapshot_command.hpp)
// The flag forms these replace (`probe --preset ...`, `probe --max-fit AXIS`, `probe --overheads`,
// `probe --snapshot FILE`, `probe --trace FILE`) answer with one line naming the new form.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "plan_command.hpp"
#include "snapshot_command.hpp"

namespace headroom::cli {

// `headroom trace`.
struct trace_options {
  plan_options problem;
  std::optional<int> stage;
  std::string json_out;
  bool force = false;
};

// What every probe of a planner case has: the case, its record file, the command line the record carries.
struct probe_case_options {
  plan_options problem;
  std::string json_out;
  bool force = false;
  std::string command_line;
};

// The device and allocator policy a case replays on (`probe replay` and `probe max-fit`).
struct probe_device_options : probe_case_options {
  std::string backend = "sim";
  std::string allocator = "caching";
  std::optional<double> max_split_size_mb;
  bool expandable_segments = false;
  double granularity_mib = 2;
  std::optional<int> stage;
};

// `probe replay`, also what every rank of a multi-rank probe runs.
struct probe_replay_options : probe_device_options {
  std::string trace_file;  // replay this trace instead of building one
  std::string timeline_out;
  double bucket_mb = 25;        // multi-rank: the data-parallel group's first all-reduce, MiB
  double rank_timeout_s = 300;  // multi-rank: how long rank 0 waits for every rank's record
};

// `probe max-fit AXIS`.
struct probe_max_fit_options : probe_device_options {
  std::string axis;  // micro-batch, seq or layers
  std::optional<std::int64_t> limit;
};

// `probe overheads` (CUDA only).
struct probe_overheads_options : probe_case_options {
  double bucket_mb = 25;  // the all-reduce's gradient bucket (PyTorch DDP's default)
};

// `probe` and its subcommands: each one's options, and which one was given.
struct probe_command_options {
  probe_replay_options replay;
  probe_max_fit_options max_fit;
  probe_overheads_options overheads;
  probe_snapshot_options snapshot;
  std::string command_line;  // the records carry it
  CLI::App *replay_cmd = nullptr, *max_fit_cmd = nullptr, *overheads_cmd = nullptr, *snapshot_cmd = nullptr;
};

CLI::App* add_trace_command(CLI::App& app, trace_options& o);
CLI::App* add_probe_command(CLI::App& app, probe_command_options& o);

// Returns the one line that answers a flag form of `probe` that a subcommand replaced ("headroom: 'probe
// --snapshot FILE' is now 'probe snapshot FILE'"), or nullopt when `argv` is not one. Checked before parsing.
std::optional<std::string> moved_probe_form(int argc, const char* const* argv);

// Each returns the exit status (exit_codes.hpp); bad input throws bad_input, a failing device
// device_error.
int run_trace(const trace_options& o);
int run_probe(const probe_command_options& o);  // the subcommand given
int run_probe_replay(const probe_replay_options& o);
int run_probe_max_fit(const probe_max_fit_options& o);
int run_probe_overheads(const probe_overheads_options& o);
// `headroom context-probe` (internal): the CUDA context alone, as one line of JSON, for `probe overheads` to
// run under the other CUDA_MODULE_LOADING.
int run_context_probe();

// Under mpirun or srun only `probe replay` runs on every rank: returns nullopt for a plain process, else the
// exit status of a refusal (every process says it in one line; `what` names the subcommand).
std::optional<int> refused_under_launcher(const char* what);

}  // namespace headroom::cli
