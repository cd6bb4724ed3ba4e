// measurement.hpp: what a probe saw, next to what the planner predicted for the same rank, and the
// versioned JSON record of it ("headroom.measurement/1", documented in results/README.md).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "planner/estimate.hpp"
#include "replay.hpp"
#include "step_trace.hpp"

namespace headroom::probes {

inline constexpr const char* measurement_schema = "headroom.measurement/1";

struct event_ref {
  std::size_t index = 0;
  std::string tensor;
  std::string phase;
  std::int64_t bytes = 0;
};

struct measurement {
  std::string backend;        // "sim" (or "cuda")
  std::string device;         // sim_device::describe()
  std::string allocator;      // allocator::describe()
  stage_breakdown predicted;  // the planner's figures for the traced stage
  replay_result replayed;
  std::size_t events = 0;
  event_ref peak_reserved_at, peak_allocated_at;
  std::optional<event_ref> oom_at;
  // Fixed overheads outside the allocator; the sim backend does not know them (nullopt = not measured).
  std::optional<std::int64_t> context_bytes, nccl_bytes;

  // Returns the replayed peak reserved minus the planner's model terms (persistent + transient +
  // activations): what the reserve has to cover for this rank, before context and NCCL.
  std::int64_t implied_reserve() const {
    return replayed.reserved.bytes - (predicted.persistent + predicted.transient + predicted.activations);
  }
};

// Returns the measurement of replaying `t` with its predicted figures `predicted`.
measurement measure(const step_trace& t, const stage_breakdown& predicted, const replay_result& r,
                    const std::string& backend, const std::string& device, const std::string& allocator);

// The environment a record states: tool version, git revision, command line, host, time.
struct environment {
  std::string tool_version, git_revision, command_line;
};

nlohmann::json measurement_to_json(const measurement& m, const nlohmann::json& inputs,
                                   const environment& env);

}  // namespace headroom::probes
