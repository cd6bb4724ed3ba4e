// validate_command.hpp: `headroom validate`: the planner against packs of published figures and outcomes
// (presets/validation/published.json) and published measured peaks (presets/validation/measured.json), each
// row with its citation and the case that expresses it. The verdicts and errors are the library's
// (calibrate/validation.hpp); this command parses, dispatches and prints.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace headroom::cli {

struct validate_options {
  std::vector<std::string> packs;  // empty: <preset dir>/validation/published.json and measured.json
  bool json = false;
};

// Adds the `validate` subcommand to `app`; its options fill `o`.
CLI::App* add_validate_command(CLI::App& app, validate_options& o);

// Runs `headroom validate`; returns exit_fits when every judged row agrees, exit_validation_failed otherwise
// (measured rows are not judged: their errors are printed, before and after a calibration).
// Throws bad_input for a malformed pack.
int run_validate(const validate_options& o);

}  // namespace headroom::cli
