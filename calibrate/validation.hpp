// validation.hpp: the planner against a pack of published figures and outcomes (`headroom validate`,
// presets/validation/published.json, schema headroom.validation/2). Each row is a published figure (one
// layer's activations) or a fit / out-of-memory outcome, with its citation and the case that expresses it:
// the problem and the layout in the form every record carries them (planner/problem_json.hpp). Returns the
// verdicts; the CLI prints them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "planner/layout.hpp"

namespace headroom::calibrate {


// One row of a pack: what was published, by whom, and the case that expresses it.
struct validation_row {
  std::string id, kind, citation, expresses;  // kind: layer_activations, trained or oom
  nlohmann::json published;                   // the published figures, as the pack gives them
  double tolerance = 0.01;                    // relative error that still agrees (a fraction)
  problem p;
  layout l;
};

// One row's verdict: what was published, what the planner predicts, and whether they agree.
struct validation_result {
  std::string id, kind, citation, expresses;
  std::string published, predicted;  // as printed ("331.35 MB (formula)", "fits, 38.2 of 40.0 GiB")
  double error = 0;                  // relative error of a figure, a fraction (0 for outcome-only rows)
  bool has_error = false;
  bool agrees = false;
  std::string why;  // when it does not agree
};

// Returns the path of the shipped pack: <preset dir>/validation/published.json.
std::string default_validation_pack();

// Returns the rows of `pack` (the parsed pack file, read from `origin`). Throws bad_input naming the row
// and its field when a row is malformed, and for a pack of another schema.
std::vector<validation_row> validation_rows(const nlohmann::json& pack, const std::string& origin);

// Returns the verdict of `row`. Throws bad_input (naming the row) when its published figures are missing.
validation_result evaluate(const validation_row& row);

// Returns the verdict of every row of `pack`, in order. Throws bad_input as validation_rows and evaluate.
std::vector<validation_result> validate_pack(const nlohmann::json& pack, const std::string& origin);

// Returns the number of rows that do not agree.
int disagreements(const std::vector<validation_result>& results);

// Returns the results record (schema headroom.validate/1): the pack's path, every row, the disagreements.
nlohmann::json validation_to_json(const std::vector<validation_result>& results,
                                  const std::string& pack_path);

}  // namespace headroom::calibrate
