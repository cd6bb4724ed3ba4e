// snapshot_command.hpp: `headroom snapshot FILE` (read a PyTorch memory snapshot: what it measured, its
// record, its trace, the planner's prediction for the run beside it) and `headroom probe --snapshot FILE`
// (replay it through the allocator emulation against the real allocator; --what-if under other settings).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "plan_command.hpp"
#include "probe_command.hpp"

namespace headroom::cli {

struct snapshot_options {
  std::string file;
  std::string json_out, trace_out;
  int device = 0;
  bool force = false;
  plan_options problem;  // optional: the run's model and layout, attached to the record
};

CLI::App* add_snapshot_command(CLI::App& app, snapshot_options& o);
// Returns the exit status (exit_codes.hpp). Throws bad_input.
int run_snapshot(const snapshot_options& o);

// `headroom probe --snapshot FILE`: returns the exit status. Throws bad_input.
int run_snapshot_probe(const probe_options& o);

}  // namespace headroom::cli
