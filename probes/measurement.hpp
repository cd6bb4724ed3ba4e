// measurement.hpp: what a probe saw, next to what the planner predicted for the same rank, and the
// versioned JSON record of it ("headroom.measurement/1.1", documented in results/README.md). On a GPU the
// record also states the driver's view beside the allocator's (device-used minus reserved is shown, not
// hidden), the fill / verify tally, and whether the device came back to its free memory.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "overheads.hpp"
#include "planner/estimate.hpp"
#include "probe_case.hpp"
#include "replay.hpp"
#include "step_trace.hpp"

namespace headroom::probes {

inline constexpr const char* measurement_schema = "headroom.measurement/1.4";

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

  // Returns the replayed peak reserved minus the planner's model terms (persistent + transient +
  // activations): what the reserve has to cover for this rank, before context and NCCL.
  std::int64_t implied_reserve() const {
    return replayed.reserved.bytes - (predicted.persistent + predicted.transient + predicted.activations);
  }
};

// Returns the measurement of replaying `t` with its predicted figures `predicted`.
measurement measure(const step_trace& t, const stage_breakdown& predicted, const replay_result& r,
                    const std::string& backend, const std::string& device, const std::string& allocator);

// The GPU stack a measurement was made on.
struct gpu_environment {
  std::string gpu;  // "NVIDIA H200"
  std::string pci_bus_id;
  std::string driver;               // NVML's driver version, else the CUDA driver API version
  std::string cuda_runtime;         // "13.0"
  std::optional<std::string> nccl;  // "2.27.7", nullopt when NCCL could not be loaded
};

// The environment a record states: tool version, git revision, command line, host, time, and the GPU stack
// (null on the sim backend).
struct environment {
  std::string tool_version, git_revision, command_line;
  std::optional<gpu_environment> gpu;
};

// Returns the inputs block of a record: the problem (model, recipe, training, device with its reserve) and
// the layout as structured fields (`layout_spec`, read back by measurement_from_json) and as text (`layout`).
nlohmann::json record_inputs(const problem& p, const layout& l);

// A record read back: the case it measured (problem and layout, exactly) and its figures. Every kind of
// record headroom writes: a probe (sim or cuda), an overheads probe, an imported PyTorch snapshot.
struct measurement_record {
  std::string origin, schema, kind;  // kind: "probe", "overheads", "snapshot"
  std::string backend;               // "sim", "cuda", "pytorch-snapshot"
  bool measured = false;             // on a GPU (cuda, snapshot), not emulated (sim)
  std::string gpu, driver, cuda_runtime, nccl, allocator;
  std::optional<problem> inputs;  // the case (absent for a snapshot without an attached model)
  std::optional<layout> where;
  int stage = 0;
  // A rank of a multi-rank probe (headroom.measurement/1.4 "rank" block); nullopt for a single-rank record.
  std::optional<int> rank;
  int world_size = 1;
  // Predicted figures for the case's stage (probe records, snapshot records with a model attached).
  std::int64_t persistent = 0, transient = 0, activations = 0, working_set = 0, output_phase = 0;
  // Measured / emulated: the allocator's reserved peak; on a GPU the device-used at that peak and before the
  // context; for an overheads record the fixed overheads.
  std::int64_t peak_reserved = 0, peak_allocated = 0;
  double fragmentation = 0;
  std::optional<std::int64_t> device_used_at_peak, used_before_context, used_after_context;
  std::optional<std::int64_t> fixed_overhead_bytes, context_bytes;
  bool out_of_memory = false;
  nlohmann::json raw;  // the document, for compare
};

// Returns the record in `j`. Throws bad_input naming the problem: an unknown schema or major version, a
// missing field.
measurement_record measurement_from_json(const nlohmann::json& j, const std::string& origin);

nlohmann::json measurement_to_json(const measurement& m, const nlohmann::json& inputs,
                                   const environment& env);
// Returns the current time as ISO 8601 UTC ("2026-11-30T17:00:00Z"), the stamp every record carries.
std::string utc_now();

// Returns the "environment" block every record carries.
nlohmann::json environment_json(const environment& env);
// Returns the record of an overhead probe ("headroom.overheads/1").
nlohmann::json overheads_to_json(const overheads& o, const nlohmann::json& inputs, const environment& env);

}  // namespace headroom::probes
