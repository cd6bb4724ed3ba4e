// report_plan.hpp: the report's part for `headroom plan --json` (one layout; records::kind::plan): the
// plan's verdict, its per-GPU totals and the terms they add up from, as the plan printed them (GiB with one
// decimal, planner/format.hpp gib_str), and its worst stage as a bar of the report's chart (report_svg.hpp).
// Every field read is checked first: a document that is not what `plan --json` writes is refused with one
// line naming the field, never drawn from unchecked values.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "report_svg.hpp"

namespace headroom::calibrate::report {

// One pipeline stage of a plan, bytes (cli/tables.cpp stage_json writes them).
struct plan_stage {
  std::int64_t stage = 0, layers = 0;
  std::vector<std::pair<std::string, std::int64_t>> buffers;  // the recipe's buffers on the GPU
  std::int64_t persistent = 0, transient = 0, state = 0, activations = 0, reserve = 0, total = 0;
  std::int64_t working_set = 0, output_phase = 0, step_peak = 0, fixed_overheads = 0, peak_total = 0;
  std::int64_t capacity = 0, headroom = 0;
  bool fits = false;
  // Returns the library workspaces: what the step peak holds beyond state, activations and the larger of
  // the working set and the output phase (stage_terms::step_peak), bytes.
  std::int64_t workspaces() const;
};

// A plan as the report reads it.
struct plan_view {
  std::string origin;  // the file
  std::string model, axes, recipe, reserve_source;
  std::int64_t gpus = 0, seq = 0, micro_batch = 0;
  std::vector<plan_stage> stages;
  std::size_t worst = 0;  // index into stages
  bool fits = false, tight = false;
  std::optional<std::int64_t> uncertainty;        // headroom_uncertainty_bytes (--calibration)
  std::optional<std::int64_t> emulated_reserved;  // emulated_reserved_bytes
  std::string advice_why;
  std::vector<std::string> advice_levers;
  const plan_stage& worst_stage() const { return stages[worst]; }
};

// Returns the plan in `j` (a `headroom plan --json` document, read from `origin`). Throws bad_input naming
// "origin: field" when a field is missing, of the wrong type or out of range, or when its totals do not add
// up from their terms as the planner adds them (state + activations + reserve; step peak + fixed overheads).
plan_view parse_plan(const nlohmann::json& j, const std::string& origin);

// Returns the plan's verdict as `headroom plan` states it: "fits", "fits, but headroom under 5% is too
// tight to trust" or "does not fit", with the headroom of the worst rank ("headroom 38.0 GiB (47.6%) of
// 79.6 GiB, worst rank: stage 0 of 2").
std::string plan_verdict(const plan_view& v);

// Returns the plan's section: its verdict, the worst stage's totals and terms as the plan prints them
// (GiB, one decimal), every stage when there are several, and the advice when it does not fit.
std::string plan_html(const plan_view& v);

// Returns the worst stage as a row of the report's chart (no measured figure: a plan is predicted).
bar_row plan_bar(const plan_view& v);

}  // namespace headroom::calibrate::report
