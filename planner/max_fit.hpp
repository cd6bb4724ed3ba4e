// max_fit.hpp: "how far can it go?" answered by the planner alone: the largest micro-batch, sequence length or
// layer count for which a layout fits, and the first value that does not with the term that breaks it. The
// search doubles from one step, then bisects between the last value that fitted and the first that did not,
// so it assumes memory grows with the value (it does in every term of the model: docs/model.md). The probe's
// `max-fit` (probes/cases/max_fit.hpp) runs the same search on a device.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "planner/estimate.hpp"
#include "planner/layout.hpp"

namespace headroom {

enum class fit_axis { micro_batch, seq, layers };

// Returns the axis named "micro-batch", "seq" or "layers"; throws bad_input for any other name.
fit_axis fit_axis_from(const std::string& name);
const char* to_string(fit_axis a);

// Returns the axis's step: the values searched are its multiples, so every one is a valid layout
// (micro-batch: 1; layers: pp * vpp; seq: 256, or a multiple of cp * tp under sequence parallelism).
std::int64_t fit_step(const layout& l, fit_axis a);
// Returns what every value searched lies below a multiple of the step (0 but for layers when Megatron counts
// the embedding and loss as layers under interleaving: the slots L + E + Lo, not L, divide into pp x vpp,
// planner/schedule.hpp). Throws bad_input when the axis cannot move in `p` (layers pinned by --pp-layout or
// first / last stage counts).
std::int64_t fit_offset(const problem& p, const layout& l, fit_axis a);
// Returns the axis's value in `p`.
std::int64_t fit_value(const problem& p, fit_axis a);
// Returns `p` with the axis set to `value` (layers: a stated Ψ keeps its parameters per layer; micro-batch:
// the global batch grows to at least one micro-batch).
problem with_fit_value(problem p, fit_axis a, std::int64_t value);
// Returns the axis's default upper limit: micro-batch 4096, seq 4 Mi tokens, layers 4096.
std::int64_t default_fit_limit(fit_axis a);

struct fit_trial {
  std::int64_t value = 0;
  bool fits = false;
  std::string detail;  // why not ("out of memory at event 812 (forward, mb1.layer7...)"), or the peak
};

struct fit_search {
  std::optional<std::int64_t> largest;  // nullopt: not even one step fits
  std::vector<fit_trial> trials;        // in the order they ran
  bool reached_limit = false;           // the limit itself fitted: the answer is at least the limit
};

// Returns the largest k x step - offset in [step - offset, limit] for which `trial` fits, by doubling then
// bisection (about 2 log2(limit / step) trials).
fit_search search_largest(std::int64_t step, std::int64_t limit, const std::function<fit_trial(std::int64_t)>& trial,
                          std::int64_t offset = 0);

// Returns the plan of `p` on `l`, or nullopt with `why` set when that size has none (a value that overflows,
// say): a search's trial, where a size without a plan does not fit rather than ending the search.
std::optional<breakdown> plan_at(const problem& p, const layout& l, std::string& why);

// The planner's answer for one axis of one layout.
struct planned_fit {
  fit_axis axis = fit_axis::micro_batch;
  std::int64_t step = 1, limit = 1, current = 1;
  fit_search search;                    // the planner's verdict (decisive total against the capacity)
  std::optional<breakdown> at_largest;  // the plan at the largest value that fits
  std::optional<breakdown> at_next;     // the plan at the next step, which does not fit (absent at the limit)
  std::string next_error;               // why the next step has no plan at all (an invalid size), else ""
  std::string breaking_term;            // the term that grew most from the largest to the next, e.g. "activations"
  std::int64_t breaking_growth = 0;     // bytes it grew by
};

// Returns the largest value of `axis` for which `l` fits `p` (capacity, reserve and fixed overheads as in
// `p`), with the plans on either side of the edge. `limit` 0 takes the axis's default. Throws bad_input for
// an invalid layout at the current value or a bad limit.
planned_fit plan_max_fit(const problem& p, const layout& l, fit_axis axis, std::int64_t limit);

}  // namespace headroom
