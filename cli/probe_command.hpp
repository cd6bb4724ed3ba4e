// probe_command.hpp: `headroom trace` (write the step trace of one rank) and `headroom probe` (replay it
// through an allocator policy over a device and compare with the planner).
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
  std::string command_line;
};

CLI::App* add_trace_command(CLI::App& app, probe_options& o);
CLI::App* add_probe_command(CLI::App& app, probe_options& o);

// Each returns the exit status (exit_codes.hpp); bad input throws bad_input.
int run_trace(const probe_options& o);
int run_probe(const probe_options& o);

}  // namespace headroom::cli
