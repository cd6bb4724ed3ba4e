// observe_command.hpp: `headroom observe TABLE -o DIR`: the measurements a team already has (a CSV or JSON
// table of runs, each a problem and one measured figure; docs/calibrating.md) written as observation
// records (calibrate/observations.hpp) that calibrate, compare and report read like any other.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace headroom::cli {

struct observe_options {
  std::string table;  // RUNS.csv or RUNS.json
  std::string out;    // the directory the records go to
  bool force = false;
};

CLI::App* add_observe_command(CLI::App& app, observe_options& o);

// Returns the exit status (exit_codes.hpp). Throws bad_input naming the row and column of the first bad
// cell; nothing is written then.
int run_observe(const observe_options& o);

}  // namespace headroom::cli
