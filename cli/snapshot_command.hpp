// snapshot_command.hpp: `headroom snapshot FILE` (read a PyTorch memory snapshot: what it measured, its
// record, its trace, the planner's prediction for the run beside it) and `headroom probe snapshot FILE`
// (replay it through the allocator emulation against the real allocator; --what-if under other settings).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "plan_command.hpp"

namespace headroom::cli {

struct snapshot_options {
  std::string file;
  std::string json_out, trace_out;
  int device = 0;
  bool force = false;
  plan_options problem;  // optional: the run's model and layout, attached to the record
  std::string command_line;  // the record's environment.command_line (main.cpp)
};

// `probe snapshot FILE`: no model, no layout; the capacity is the snapshot's unless --gpu-mem gives one.
struct probe_snapshot_options {
  std::string file;
  int device = 0;  // the device trace to replay
  bool what_if = false;
  std::optional<double> gpu_mem_gib;
  std::optional<double> max_split_size_mb;
  bool expandable_segments = false;
  std::string gpu_type;  // refused, with the --gpu-mem that names the same GPU's capacity
  std::string command_line;  // the record's environment.command_line (main.cpp)
  std::string json_out;
  bool force = false;
};

CLI::App* add_snapshot_command(CLI::App& app, snapshot_options& o);
// Returns the exit status (exit_codes.hpp). Throws bad_input.
int run_snapshot(const snapshot_options& o);

// Adds `snapshot` under `probe`.
CLI::App* add_probe_snapshot_command(CLI::App* probe, probe_snapshot_options& o);
// `headroom probe snapshot FILE`: returns the exit status. Throws bad_input.
int run_probe_snapshot(const probe_snapshot_options& o);

}  // namespace headroom::cli
