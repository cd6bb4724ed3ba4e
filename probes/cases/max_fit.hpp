// max_fit.hpp: "will it fit?" answered by the device: the largest micro-batch, sequence length or layer
// count for which one step of the layout replays without running out of memory (each trial a full case:
// build the trace, replay with fill and verify, clean up, check the device came back), beside the
// planner's largest value for the same capacity. The search doubles from one step, then bisects between
// the last value that fitted and the first that did not, so it assumes memory grows with the value.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "planner/layout.hpp"
#include "probes/cases/probe_case.hpp"

namespace headroom::probes {

enum class fit_axis { micro_batch, seq, layers };

// Returns the axis named "micro-batch", "seq" or "layers"; throws bad_input for any other name.
fit_axis fit_axis_from(const std::string& name);
const char* to_string(fit_axis a);

// Returns the axis's step: the values searched are its multiples, so every one is a valid layout
// (micro-batch: 1; layers: pp * vpp; seq: 256, or a multiple of cp * tp under sequence parallelism).
std::int64_t fit_step(const layout& l, fit_axis a);
// Returns the axis's value in `p`.
std::int64_t fit_value(const problem& p, fit_axis a);
// Returns `p` with the axis set to `value` (layers: a stated Ψ keeps its parameters per layer).
problem with_fit_value(problem p, fit_axis a, std::int64_t value);

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

// Returns the largest multiple of `step` in [step, limit] for which `trial` fits, by doubling then
// bisection (about 2 log2(limit / step) trials).
fit_search search_largest(std::int64_t step, std::int64_t limit,
                          const std::function<fit_trial(std::int64_t)>& trial);

struct max_fit_result {
  fit_axis axis = fit_axis::micro_batch;
  std::int64_t step = 1, limit = 1, current = 1;
  std::string allocator;         // the policy's description, from the trials' cases (empty if none ran)
  fit_search replayed;           // on the device
  fit_search predicted_verdict;  // the planner's "fits": reference total and step peak + fixed overheads
  fit_search predicted_peak;     // the planner's step peak <= capacity (no reserve)
};

struct max_fit_options {
  fit_axis axis = fit_axis::micro_batch;
  std::int64_t limit = 0;    // 0: the axis's default (micro-batch 4096, seq 4 Mi tokens, layers 4096)
  std::optional<int> stage;  // the stage to replay; default: the planner's worst at each value
  allocator_factory make_allocator;
  std::function<std::unique_ptr<block_checker>()> make_checker;  // null: no fill / verify (sim)
  std::int64_t cleanup_slack = 0;
};

// Runs the search on `dev` and the planner's two searches for `p.device.capacity`. Throws bad_input for
// an invalid layout at the current value or a bad limit, device_error when a trial's device fails, a
// block fails verification, or the device does not come back between trials.
max_fit_result max_fit(const problem& p, const layout& l, device& dev, const max_fit_options& o);

}  // namespace headroom::probes
