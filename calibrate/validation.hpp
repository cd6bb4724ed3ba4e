// validation.hpp: the planner against packs of published figures and outcomes (`headroom validate`,
// presets/validation/published.json and measured.json, schema headroom.validation/2). Each row is a published
// figure (one layer's activations), a fit / out-of-memory outcome, or a published MEASURED memory figure
// (measured_peak: an allocator reserved peak), with its citation and the case that expresses it: the problem
// and the layout in the form every record carries them (planner/problem_json.hpp). A measured row whose setting
// the planner does not model carries "skipped" and why instead of a case. Returns the verdicts and the errors
// against the measured figures, with and without a calibration fitted on some of them; the CLI prints them.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "planner/layout.hpp"
#include "planner/stage_terms.hpp"

namespace headroom::calibrate {

// One row of a pack: what was published, by whom, and the case that expresses it.
struct validation_row {
  std::string id, kind, citation, expresses;  // kind: layer_activations, trained, oom or measured_peak
  nlohmann::json published;                   // the published figures, as the pack gives them
  double tolerance = 0.01;                    // relative error that still agrees (a fraction)
  std::string skipped;                        // measured_peak: why the case is not priced ("" when it is)
  bool fit_on = false;                        // measured_peak: "calibration": "fit" (the calibration's rows)
  bool held_out = false;                      // measured_peak: "calibration": "held_out" (never fitted on)
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
  // measured_peak rows: not judged (no agree / disagree; their errors are summarised), in bytes.
  bool judged = true;
  bool skipped = false, fit_on = false;
  double measured = 0, predicted_bytes = 0;  // the published figure; the uncalibrated prediction
  // The uncalibrated prediction's source: the planner's tensors replayed through the caching allocator
  // (probes/cases/emulated_peak.hpp; `emulated`), or the planner alone where the trace cannot be built;
  // planner_bytes is the planner's own figure of that kind either way.
  bool emulated = false;
  double planner_bytes = 0;
  // The case priced (measured rows): its stage, that stage's terms and the tokens of one micro-batch on the
  // rank, which the calibration observes and predicts from without pricing the row again.
  int priced_stage = 0;
  stage_terms priced_terms;
  std::int64_t priced_tokens = 0;
  std::optional<double> calibrated_bytes;    // the calibrated prediction, when a calibration was fitted
  std::optional<double> calibrated_error;    // its relative error, a fraction
  std::optional<double> calibrated_band;     // bytes: the ± `plan --calibration` prints (reserve_uncertainty)
  // Held-out rows: how the row lies outside what the calibration was fitted on (calibrate::outside_domain,
  // the lines `headroom plan --calibration` would warn with); empty when inside.
  std::vector<std::string> outside_domain;
};

// The errors of a set of measured rows: count, mean of |relative error| and the worst (signed) error.
struct error_stats {
  int n = 0;
  double mean_abs = 0, worst = 0;  // fractions
  std::string worst_id;
};

// What the measured rows say: the errors before and after a calibration fitted on the rows marked
// "calibration": "fit" (calibrate::fit over observation records of kind reserved_peak) and judged on the
// rest, which the fit never saw: those inside its domain (calibrated_held_out) apart from those the planner
// would warn about (calibrated_outside_domain).
struct measured_summary {
  int priced = 0, skipped = 0;
  std::vector<std::string> fitted_on;
  error_stats uncalibrated, uncalibrated_held_out, calibrated_held_out, calibrated_outside_domain,
      calibrated_in_fit;
  error_stats uncalibrated_moe;                              // the mixture-of-experts rows alone
  std::map<std::string, error_stats> uncalibrated_by_figure;  // by published.figure (reserved_peak, device_used)
  std::string fit_rule;  // how the rows the calibration is fitted on were chosen (calibration_rows)
  int coverage_rows = 0, covered = 0;  // held-out rows with a band; of them, those measured inside it
  std::string no_spread;               // why the calibration has no band (no_spread_reason), or ""
  std::string weak;                    // why its fit is too weak to use (strength.hpp weakness), or ""
  std::string calibration;  // the fitted terms as text, or why there is no calibration
  bool calibrated = false;
};

// Returns which rows the validation's calibration is fitted on, and in `rule` how they were chosen: the
// priced reserved-peak and device-used rows a pack marks "calibration": "fit" when it marks any; otherwise
// every fifth of those not marked "held_out", in pack order (the 5th, 10th, ...), at most a fifth, so that no
// row is picked by hand. Allocated peaks are never fitted on: they hold no reserve.
std::vector<bool> calibration_rows(const std::vector<validation_row>& rows, std::string& rule);

// Returns the path of the shipped pack: <preset dir>/validation/published.json.
std::string default_validation_pack();

// Returns the rows of `pack` (the parsed pack file, read from `origin`). Throws bad_input naming the row
// and its field when a row is malformed, and for a pack of another schema.
std::vector<validation_row> validation_rows(const nlohmann::json& pack, const std::string& origin);

// Returns the verdict of `row`. Throws bad_input (naming the row) when its published figures are missing.
validation_result evaluate(const validation_row& row);

// Returns the verdict of every row of `pack`, in order. Throws bad_input as validation_rows and evaluate.
std::vector<validation_result> validate_pack(const nlohmann::json& pack, const std::string& origin);

// Returns the path of the shipped pack of measured figures: <preset dir>/validation/measured.json.
std::string default_measured_pack();

// Fits a calibration on the measured rows of `rows` marked for it, fills each priced measured result's
// calibrated prediction (results[i] is rows[i]'s verdict), and returns the errors before and after. Without
// such rows, or when the fit is refused, `calibrated` is false and `calibration` says why.
measured_summary summarise_measured(const std::vector<validation_row>& rows,
                                    std::vector<validation_result>& results);

// Returns the number of judged rows that do not agree (measured rows are not judged).
int disagreements(const std::vector<validation_result>& results);

// Returns the results record (schema headroom.validate/1): the pack's path, every judged row, the
// disagreements, and, with `measured`, the measured rows and their errors under "measured".
nlohmann::json validation_to_json(const std::vector<validation_result>& results, const std::string& pack_path,
                                  const measured_summary* measured = nullptr);

}  // namespace headroom::calibrate
