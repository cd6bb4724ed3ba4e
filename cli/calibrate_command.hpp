// calibrate_command.hpp: `headroom calibrate RECORDS... -o FILE`, fitting the reserve from measurement records
// (calibrate/calibration.hpp).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace headroom::cli {

struct calibrate_options {
  std::vector<std::string> records;  // files or directories of records
  std::string out;
  bool force = false;
};

CLI::App* add_calibrate_command(CLI::App& app, calibrate_options& o);

// Returns the exit status (exit_codes.hpp); bad input throws bad_input.
int run_calibrate(const calibrate_options& o);

}  // namespace headroom::cli
