// probe_target.hpp: what the probes of a planner case share: the options that can be refused before a device
// is touched, the device a case runs on (sim, or a CUDA GPU) with its allocator and checker factories, and the
// environment and inputs a record carries. Used by `probe replay` (one rank and multi-rank) and `probe max-fit`.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "planner/layout.hpp"
#include "probe_command.hpp"
#include "probes/allocators/caching_allocator.hpp"
#include "probes/cases/gpu_backend.hpp"
#include "probes/cases/measurement.hpp"
#include "probes/cases/probe_case.hpp"
#include "probes/devices/sim_device.hpp"

namespace headroom::cli {

// True when --gpu-mem was given on the command line.
bool gpu_mem_given(const probe_case_options& o);

// Returns the caching options; throws bad_input for every option that can be refused before a device is
// touched (granularity, max_split_size, the allocator with the backend).
probes::caching_options check_options(const probe_device_options& o);
// The same, and the multi-rank figures (--bucket-mb, --rank-timeout) of `probe replay`.
probes::caching_options check_options(const probe_replay_options& o);
// Throws bad_input unless the gradient bucket (--bucket-mb) is a positive number of MiB up to 65536.
void check_bucket_mb(double bucket_mb);

// The device a case runs on, with its allocator and checker factories.
struct probe_target {
  std::unique_ptr<probes::gpu_backend> gpu;
  std::unique_ptr<probes::sim_device> sim;
  probes::allocator_factory make_allocator;
  std::function<std::unique_ptr<probes::block_checker>()> make_checker;

  probes::device& dev() { return gpu ? gpu->dev() : static_cast<probes::device&>(*sim); }
  std::string backend() const { return gpu ? "cuda" : "sim"; }
};

// Returns the target, or nullopt after printing why there is no GPU (the caller exits 4). For the CUDA
// backend the planner's capacity becomes the cap, or the card's total.
std::optional<probe_target> open_target(const probe_device_options& o, const probes::caching_options& copt,
                                        problem& p);

// One step trace replayed on a target: the case and its measurement.
struct target_run {
  probes::case_result replayed;
  probes::measurement m;
};

// Replays `t` on `target` through its allocator (fill and verify on a GPU; the driver's device-used sampled)
// and measures it against `predicted`: on a GPU the record gets the driver's view, the cleanup check and the
// pool's high-water marks. Throws device_error when the device fails.
target_run run_on_target(probe_target& target, const probes::step_trace& t, const stage_breakdown& predicted,
                         bool record_timeline);

// Returns the tool and GPU stack a record carries.
probes::environment environment_of(const probe_case_options& o, const probe_target* t);

// Returns the record's inputs: the problem and layout (problem_json), tool version, trace file (null when
// empty).
nlohmann::json case_inputs(const problem& p, const layout& l, const std::string& trace_file);
inline nlohmann::json case_inputs(const probe_replay_options& o, const problem& p, const layout& l) {
  return case_inputs(p, l, o.trace_file);
}

}  // namespace headroom::cli
