// calibration.hpp: fitting the reserve (planner/reserve.hpp) from measurement records, the calibration
// file that carries the fit (records::kind::calibration), and applying it to a problem.
//
// What a record says about the reserve, y = what the reserve had to cover, against x = its terms' inputs:
//
//   record      y                                                         x
//   CUDA probe  device-used at the reserved peak (less what was used       (1, churn, tokens)
//               before the context) - the model terms
//   sim probe   emulated reserved peak - the model terms (emulated: no     (0, churn, tokens)
//               context, so it speaks to fragmentation and per-token only)
//   snapshot    the real reserved peak - the model terms of the run's      (0, churn, tokens)
//               attached case
//   overheads   context + cuBLAS + NCCL measured                           (1, 0, 0)
//
// The model terms are persistent + transient + activations; churn = transient + activations +
// max(backward working set, output phase) (planner/stage_terms.hpp); tokens = seq / cp x micro-batch.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "planner/layout.hpp"
#include "probes/records/measurement_record.hpp"

namespace headroom::calibrate {

inline constexpr int term_count = 3;
// The terms' names, in column order: "fixed", "fragmentation", "per_token".
const char* term_name(int i);

struct observation {
  std::string origin, kind, backend;
  bool measured = false;
  double y = 0;                        // bytes the reserve had to cover
  std::vector<double> x;               // term inputs: 1 or 0, churn bytes, tokens
  double predicted = 0, residual = 0;  // after the fit: x . coef, y - predicted
};

// Returns the observation a record makes. Throws bad_input when the record cannot say anything about the
// reserve (a snapshot without its run's model and layout, a probe that ran out of memory).
observation observe(const probes::measurement_record& r);

struct term_fit {
  double value = 0, stderr_ = 0;
  bool fitted = false;
  std::string why;  // how it was obtained, or why it was not
};

struct calibration {
  std::string created;                                     // UTC
  std::string gpu, driver, cuda_runtime, nccl, allocator;  // what it holds for ("" when not known)
  std::vector<observation> records;
  term_fit terms[term_count];
  double margin = 0;  // bytes the planner adds to the fixed term: the worst under-prediction
  std::string margin_rule = "worst residual (the most any record's reserve was under-predicted)";
  std::optional<std::int64_t> fixed_overheads;  // context + cuBLAS + NCCL measured by an overheads record
  double worst_residual = 0;
  std::string worst_origin;
};

// Fits the reserve's terms over `records` (non-negative least squares). A term no record observes keeps a
// documented prior and says so. Throws bad_input with fewer records than observed terms, or when the
// observed terms cannot be told apart (naming them).
calibration fit(const std::vector<probes::measurement_record>& records);

nlohmann::json to_json(const calibration& c);
// Throws bad_input naming the field; refuses another schema or major.
calibration calibration_from_json(const nlohmann::json& j, const std::string& origin);

// Returns the reserve model the calibration gives the planner (the fitted terms, the margin added to the
// fixed term), with its source named.
reserve_model reserve_of(const calibration& c, const std::string& file);

// What the planner is told about the machine it plans for (each may be empty: not stated).
struct target {
  std::string gpu, driver, allocator;
};
// Returns one line per mismatch between what the calibration holds for and the target ("GPU: calibrated on
// 'NVIDIA H200', planning for 'NVIDIA B200'"); empty when they agree or nothing is stated.
std::vector<std::string> mismatches(const calibration& c, const target& t);

}  // namespace headroom::calibrate
