// max_fit.hpp: "will it fit?" answered by the device: the largest micro-batch, sequence length or layer
// count for which one step of the layout replays without running out of memory (each trial a full case:
// build the trace, replay with fill and verify, clean up, check the device came back), beside the
// planner's largest value for the same capacity. The search is the planner's (planner/max_fit.hpp): doubling
// from one step, then bisecting, so it assumes memory grows with the value.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "planner/layout.hpp"
#include "planner/max_fit.hpp"
#include "probes/cases/probe_case.hpp"

namespace headroom::probes {

// The axis, its steps and the search are the planner's (planner/max_fit.hpp).

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
