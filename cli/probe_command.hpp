// probe_command.hpp: `headroom trace` (write the step trace of one rank) and `headroom probe` (replay it
// through an allocator policy over a device and compare with the planner; --max-fit searches the largest
// value that fits on the device; --overheads measures the fixed costs of a GPU stack).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "plan_command.hpp"

namespace headroom::cli {

struct probe_options {
  plan_options problem;
  std::string backend = "sim";
  std::string allocator = "caching";
  std::optional<double> max_split_size_mb;
  bool expandable_segments = false;
  double granularity_mib = 2;
  std::optional<int> stage;
  std::string trace_file;  // replay this trace instead of building one
  std::string json_out, timeline_out;
  bool force = false;
  bool overheads = false;     // --overheads: the layered fixed-overhead probe (CUDA)
  double bucket_mb = 25;      // --overheads: the all-reduce's gradient bucket (PyTorch DDP's default)
  std::string max_fit;        // --max-fit micro-batch|seq|layers
  std::string snapshot_file;  // --snapshot: replay a PyTorch memory snapshot instead of a step trace
  int snapshot_device = 0;
  bool what_if = false;
  std::optional<std::int64_t> max_fit_limit;
  double rank_timeout_s = 300;  // multi-rank: how long rank 0 waits for every rank's record
  std::string command_line;
};

CLI::App* add_trace_command(CLI::App& app, probe_options& o);
CLI::App* add_probe_command(CLI::App& app, probe_options& o);

// Each returns the exit status (exit_codes.hpp); bad input throws bad_input, a failing device
// device_error.
int run_trace(const probe_options& o);
int run_probe(const probe_options& o);
// `headroom context-probe` (internal): the CUDA context alone, as one line of JSON, for --overheads to run
// under the other CUDA_MODULE_LOADING.
int run_context_probe();

}  // namespace headroom::cli
