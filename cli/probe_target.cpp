// probe_target.cpp: the device a probe runs on and what its records carry (see probe_target.hpp).
#include "probe_target.hpp"

#include <cmath>
#include <iostream>

#include "planner/errors.hpp"
#include "probes/cases/measurement.hpp"

namespace headroom::cli {

using namespace headroom::probes;

bool gpu_mem_given(const probe_case_options& o) {
  return o.problem.app && o.problem.app->count("--gpu-mem") > 0;
}

// Everything about the device options that can be refused before a device is touched.
caching_options check_options(const probe_device_options& o) {
  if (!(o.granularity_mib > 0) || o.granularity_mib > 1024 || std::fmod(o.granularity_mib * 1024, 1.0) != 0)
    throw bad_input("granularity-mib", "must be a positive whole number of KiB up to 1024 MiB");
  caching_options copt;
  copt.expandable_segments = o.expandable_segments;
  if (o.max_split_size_mb) {
    if (!(*o.max_split_size_mb >= 20) || *o.max_split_size_mb > 1e9)
      throw bad_input("max-split-size-mb", "must be at least 20 (PyTorch's lower limit)");
    copt.max_split_size = static_cast<std::int64_t>(*o.max_split_size_mb * (1 << 20));
  }
  if (o.allocator != "caching" && (o.max_split_size_mb || o.expandable_segments))
    throw bad_input("allocator",
                    "--max-split-size-mb and --expandable-segments apply to the caching allocator");
  if (o.allocator == "driver-pool" && o.backend != "cuda")
    throw bad_input("allocator", "driver-pool is CUDA's own allocator: it needs --backend cuda");
  if (o.backend == "cuda" && o.granularity_mib != 2)
    throw bad_input("granularity-mib", "is the sim device's page size; a GPU reports its own");
  return copt;
}

caching_options check_options(const probe_replay_options& o) {
  const caching_options copt = check_options(static_cast<const probe_device_options&>(o));
  if (!(o.rank_timeout_s > 0) || o.rank_timeout_s > 86400)
    throw bad_input("rank-timeout", "must be between 0 and 86400 seconds");
  check_bucket_mb(o.bucket_mb);
  return copt;
}

void check_bucket_mb(double bucket_mb) {
  if (!(bucket_mb > 0) || bucket_mb > 65536)
    throw bad_input("bucket-mb", "must be a positive number of MiB up to 65536");
}

std::optional<probe_target> open_target(const probe_device_options& o, const caching_options& copt,
                                        problem& p) {
  probe_target t;
  if (o.backend == "cuda") {
    if (auto why = cuda_unavailable_reason()) {
      std::cerr << "headroom: no CUDA device (" << *why << ")\n";
      return std::nullopt;
    }
    t.gpu = open_gpu_backend(gpu_mem_given(o) ? std::optional(p.device.capacity) : std::nullopt);
    const auto truth = t.gpu->truth();
    p.device.capacity = truth.cap.value_or(truth.card_total);
    gpu_backend* g = t.gpu.get();
    const std::string name = o.allocator;
    t.make_allocator = [g, name, copt](device&) { return g->make_allocator(name, copt); };
    t.make_checker = [g] { return g->make_checker(); };
  } else {
    t.sim = std::make_unique<sim_device>(
        p.device.capacity, static_cast<std::int64_t>(std::llround(o.granularity_mib * (1 << 20))));
    t.make_allocator = policy_factory(o.allocator, copt);
  }
  return t;
}

target_run run_on_target(probe_target& target, const step_trace& t, const stage_breakdown& predicted,
                         bool record_timeline) {
  std::unique_ptr<block_checker> checker = target.make_checker ? target.make_checker() : nullptr;
  case_options co;
  co.record_timeline = record_timeline;
  co.checker = checker.get();
  co.sample_device = target.gpu != nullptr;
  co.cleanup_slack = target.gpu ? target.gpu->cleanup_slack() : 0;
  const std::int64_t sim_peak_before = target.sim ? target.sim->peak_used() : 0;
  target_run r;
  r.replayed = run_case(t, target.dev(), target.make_allocator, co);
  if (target.sim) r.replayed.replayed.device_peak = target.sim->peak_used() - sim_peak_before;
  r.m = measure(t, predicted, r.replayed.replayed, target.backend(), target.dev().describe(),
                r.replayed.allocator);
  if (target.gpu) {
    r.m.truth = target.gpu->truth();
    r.m.cleanup = r.replayed.cleanup;
    r.m.pool = r.replayed.pool;
  }
  return r;
}

environment environment_of(const probe_case_options& o, const probe_target* t) {
  environment env{o.command_line, std::nullopt};
  if (t && t->gpu) env.gpu = t->gpu->environment();
  return env;
}

nlohmann::json case_inputs(const problem& p, const layout& l, const std::string& trace_file) {
  nlohmann::json inputs = record_inputs(p, l);
  inputs["trace_file"] = trace_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(trace_file);
  return inputs;
}

}  // namespace headroom::cli
