// validate_command.hpp: `headroom validate`: the planner against a pack of published figures and outcomes
// (presets/validation/published.json), each row with its citation and the flags that express it.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace headroom::cli {

struct validate_options {
  std::string pack;  // empty: <preset dir>/validation/published.json
  bool json = false;
};

// One row's verdict: what was published, what the planner predicts, and whether they agree.
struct validation_result {
  std::string id, kind, citation, expresses;
  std::string published, predicted;  // as printed
  double error = 0;                  // relative error of a figure (0 for outcome-only rows)
  bool has_error = false;
  bool agrees = false;
  std::string why;  // when it does not agree
};

// Adds the `validate` subcommand to `app`; its options fill `o`.
CLI::App* add_validate_command(CLI::App& app, validate_options& o);

// Returns the verdict of every row of `pack` (the parsed pack file). Throws bad_input on a malformed row,
// naming it.
std::vector<validation_result> validate_pack(const nlohmann::json& pack, const std::string& origin);

// Runs `headroom validate`; returns exit_fits when every row agrees, exit_validation_failed otherwise.
int run_validate(const validate_options& o);

}  // namespace headroom::cli
