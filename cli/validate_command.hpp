// validate_command.hpp: `headroom validate`: the planner against a pack of published figures and outcomes
// (presets/validation/published.json), each row with its citation and the case that expresses it. The
// verdicts are the library's (calibrate/validation.hpp); this command parses, dispatches and prints.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace headroom::cli {

struct validate_options {
  std::string pack;  // empty: <preset dir>/validation/published.json
  bool json = false;
};

// Adds the `validate` subcommand to `app`; its options fill `o`.
CLI::App* add_validate_command(CLI::App& app, validate_options& o);

// Runs `headroom validate`; returns exit_fits when every row agrees, exit_validation_failed otherwise.
// Throws bad_input for a malformed pack.
int run_validate(const validate_options& o);

}  // namespace headroom::cli
