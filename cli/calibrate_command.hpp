// calibrate_command.hpp: `headroom calibrate RECORDS... -o FILE` (fit the reserve), `headroom compare
// BASELINE NEW` (regressions between record sets) and `headroom report RECORDS... -o FILE.html`.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

namespace headroom::cli {

struct calibrate_options {
  std::vector<std::string> records;  // files or directories of records
  std::string out;
  bool force = false;
  // compare
  std::string baseline, fresh;
  double tolerance_pct = 2, tolerance_mib = 64;
  // report
  std::string calibration;
};

CLI::App* add_calibrate_command(CLI::App& app, calibrate_options& o);
CLI::App* add_compare_command(CLI::App& app, calibrate_options& o);
CLI::App* add_report_command(CLI::App& app, calibrate_options& o);

// Each returns the exit status (exit_codes.hpp); bad input throws bad_input.
int run_calibrate(const calibrate_options& o);
int run_compare(const calibrate_options& o);
int run_report(const calibrate_options& o);

}  // namespace headroom::cli
