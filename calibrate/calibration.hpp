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
//   observation by its figure (observations.hpp): device_used as a CUDA     device_used (1, churn, tokens)
//               probe (the GPU is taken to hold nothing else), reserved    reserved    (0, churn, tokens)
//               peak as a snapshot, allocated peak - the model terms       allocated   (0, 0, tokens)
//
// The activation factor (reserve_model::activation_extra = factor - 1) is fitted first, and only from
// records that support it: two or more reserved peaks (snapshot, or observation reserved_peak) of one model
// implementation at different tokens per micro-batch. Through the origin over those records,
//   y_i = e x A_i  (A = the ledger's activations),  e = sum(y A) / sum(A^2),
//   se(e) = sqrt(rss / (n - 1) / sum(A^2)),
// i.e. the whole size-dependent reserve of that implementation is put on its activations. Every record's y
// then loses e x A_i (the planner adds e x A to every case) and the three terms above are fitted on what is
// left. docs/calibrating.md shows it on the NiuHuangxiaozi snapshots (context 100 and 200).
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
  std::string figure;  // an observation's kind of figure ("reserved_peak"); "" for the others
  bool measured = false;
  double activations = 0;              // the ledger's activation bytes at the record's stage (0 when no case)
  std::string implementation;          // the model it ran ("name L4 h512 ..."): runs of one model group by it
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
  bool pinned = false;  // kept at its prior: the records could not tell it from an earlier term (`why` says which)
  std::string why;      // how it was obtained, or why it was not
};

// A closed range of a quantity over the records a calibration was fitted on (empty: no record had it).
struct value_range {
  double lo = 0, hi = 0;
  bool empty = true;
  void add(double v);
};

// How far a planned case may lie beyond a fitted range before outside_domain names it: a factor on each
// side ([lo / margin, hi x margin]). 1.25 lets a case a quarter larger or smaller than any record pass; a
// linear fit extrapolated further than that is a guess (docs/calibrating.md).
inline constexpr double domain_margin = 1.25;

// What a calibration was fitted on (headroom.calibration/1.2 "domain"; absent from older files: stated =
// false).
struct calibration_domain {
  bool stated = false;
  std::vector<std::string> gpus, drivers, allocators, recipes;  // distinct, as the records state them
  // Recompute modes of the records' layouts (since headroom.calibration/1.3; empty in older files: not
  // checked). The fragmentation term scales with the churn, which a recompute mode reshapes: a fit on full
  // recomputation does not carry to selective-op (docs/validation.md, "The errors at the time of writing").
  std::vector<std::string> recompute;
  value_range parameters;      // model parameters (all of the model, not the rank's share)
  value_range tokens;          // tokens per micro-batch on a rank (seq / cp x micro-batch)
  value_range predicted_peak;  // the analytic step peak of each record's stage, bytes
  std::vector<std::pair<std::string, int>> kinds;  // records by kind ("observation reserved_peak", 2)
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
  term_fit activation;                    // activation_extra (factor - 1), bytes per ledger activation byte
  std::string activation_implementation;  // the model implementation it was fitted on ("" when not)
  calibration_domain domain;
};

// Returns the activation factor's fit over `obs` (see the header comment): fitted only when two or more
// reserved peaks of one implementation differ in tokens per micro-batch; else value 0 and why not. With
// `min_sizes` = 1 a single record gives the factor (exact, no uncertainty): the cross-size check uses it.
term_fit fit_activation_extra(const std::vector<observation>& obs, std::string* implementation = nullptr,
                              int min_sizes = 2);

// Fits the reserve's terms over `records` (non-negative least squares). A term no record observes keeps a
// documented prior and says so; a term the records cannot tell from an earlier one (fit.hpp
// dependent_columns: a micro-batch sweep grows churn and tokens together) keeps its prior too, `pinned`,
// its `why` naming the term that carries both and the record that would separate them. Throws bad_input
// when no record observes any term, or when the fit has no non-negative solution (naming the records).
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
  std::string gpu_type;  // --gpu-type's name ("h100-80gb"), checked against the calibration's device name
};
// Returns one line per mismatch between what the calibration holds for and the target ("GPU: calibrated on
// 'NVIDIA H200', planning for 'NVIDIA B200'"); empty when they agree or nothing is stated.
std::vector<std::string> mismatches(const calibration& c, const target& t);

}  // namespace headroom::calibrate

namespace headroom::calibrate {

// Returns whether the fixed term is the documented prior (no record held the CUDA context: only sim,
// snapshot, reserved- or allocated-peak records): the plan says so beside the headroom.
bool fixed_is_prior(const calibration& c);

// Returns one line per way the planned case (`p` on `l`, on the machine `t`) lies outside what `c` was
// fitted on: GPU, driver, allocator or recipe not among the records'; model parameters, tokens per
// micro-batch or the predicted step peak beyond the fitted range by more than domain_margin; a recompute
// mode none of the records ran (GPU, driver
// and allocator compared verbatim with `t`'s, skipped where `t` states none); a fitted
// activation factor applied to another model. A calibration without a domain (before 1.2) gives one line
// saying so. Empty when the case lies inside.
std::vector<std::string> outside_domain(const calibration& c, const problem& p, const layout& l,
                                        const target& t);

}  // namespace headroom::calibrate

// The calibration's strength (its uncertainty, why it has none, whether it is too weak to use): strength.hpp.
#include "strength.hpp"  // IWYU pragma: export
