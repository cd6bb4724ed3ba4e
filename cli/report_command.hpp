// report_command.hpp: `headroom report RECORDS... -o FILE.html`, one self-contained HTML page of a record set
// (calibrate/html_report.hpp).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace headroom::cli {

struct report_options {
  std::vector<std::string> records;  // files or directories of records
  std::string out;
  bool force = false;
  std::string calibration;  // a calibration file to show, or ""
};

CLI::App* add_report_command(CLI::App& app, report_options& o);

// Returns the exit status (exit_codes.hpp); bad input throws bad_input.
int run_report(const report_options& o);

}  // namespace headroom::cli
