// compare_command.hpp: `headroom compare BASELINE NEW`, what moved between two record sets (a regression
// check; calibrate/compare.hpp).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace headroom::cli {

struct compare_options {
  std::string baseline, fresh;  // record files or directories
  double tolerance_pct = 2, tolerance_mib = 64;
};

CLI::App* add_compare_command(CLI::App& app, compare_options& o);

// Returns the exit status (exit_codes.hpp): exit_validation_failed when a figure grew beyond the tolerance (a
// figure that shrank beyond it is listed, not a failure); bad input throws bad_input.
int run_compare(const compare_options& o);

}  // namespace headroom::cli
