// measurement.hpp: what a probe saw, next to what the planner predicted for the same rank, and the
// versioned JSON record of it (records::kind::measurement, documented in results/README.md; read back by
// probes/records/measurement_record.hpp). On a GPU the
// record also states the driver's view beside the allocator's (device-used minus reserved is shown, not
// hidden), the fill / verify tally, and whether the device came back to its free memory.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "probes/cases/overheads.hpp"
#include "probes/records/measurement_record.hpp"
#include "planner/estimate.hpp"
#include "probes/cases/probe_case.hpp"
#include "probes/trace/replay.hpp"
#include "probes/trace/step_trace.hpp"

namespace headroom::probes {

struct event_ref {
  std::size_t index = 0;
  std::string tensor;
  std::string phase;
  std::int64_t bytes = 0;
};

// The driver's view of the device (cudaMemGetInfo, NVML), bytes used device-wide.
struct device_memory_truth {
  std::optional<std::int64_t> before_context;  // NVML, before this process made a CUDA context
  std::int64_t after_context = 0;              // cudaMemGetInfo right after the context was made
  std::int64_t card_total = 0;                 // cudaMemGetInfo's total
  std::optional<std::int64_t> cap;  // --gpu-mem below the card: device-used the allocator may reach
};

// Fill + verify against a device-to-device copy, measured in the same run (bytes read + written / s).
struct touch_throughput {
  double fill_verify_gbs = 0, copy_gbs = 0;
  std::int64_t bytes = 0;  // buffer size used for both
  double ratio() const { return copy_gbs > 0 ? fill_verify_gbs / copy_gbs : 0; }
};

struct measurement {
  std::string backend;        // "sim" or "cuda"
  std::string device;         // sim_device::describe()
  std::string allocator;      // allocator::describe()
  stage_breakdown predicted;  // the planner's figures for the traced stage
  replay_result replayed;
  std::size_t events = 0;
  event_ref peak_reserved_at, peak_allocated_at;
  std::optional<event_ref> oom_at;
  // Fixed overheads outside the allocator; the sim backend does not know them (nullopt = not measured).
  std::optional<std::int64_t> context_bytes, nccl_bytes;
  // GPU only (nullopt on sim).
  std::optional<device_memory_truth> truth;
  std::optional<touch_throughput> throughput;
  std::optional<cleanup_check> cleanup;
  std::optional<pool_high_water> pool;
  std::optional<std::string> first_mismatch_tensor;  // the tensor whose block first failed verification
  std::optional<records::timeline> timeline;         // the replay's, reduced (when it recorded one)

  // Returns the replayed peak reserved minus the planner's model terms (persistent + transient +
  // activations): what the reserve has to cover for this rank, before context and NCCL.
  std::int64_t implied_reserve() const {
    return replayed.reserved.bytes - predicted.terms().held();
  }
};

// Returns the measurement of replaying `t` with its predicted figures `predicted`.
measurement measure(const step_trace& t, const stage_breakdown& predicted, const replay_result& r,
                    const std::string& backend, const std::string& device, const std::string& allocator);

nlohmann::json measurement_to_json(const measurement& m, const nlohmann::json& inputs,
                                   const environment& env);
// Returns the record of an overhead probe ("headroom.overheads/1").
nlohmann::json overheads_to_json(const overheads& o, const nlohmann::json& inputs, const environment& env);

}  // namespace headroom::probes
