// measurement_record.hpp: the measurement records as readers see them (calibrate, compare, report,
// validate): every kind headroom writes (a probe on sim or cuda, one rank of a multi-rank probe, an
// overheads probe, an imported PyTorch snapshot) read back into one type, with the case it measured and
// the timeline it drew. Also the blocks every record shares: the environment and the inputs.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "planner/estimate.hpp"
#include "planner/layout.hpp"
#include "planner/problem_json.hpp"
#include "probes/records/timeline.hpp"

namespace headroom::probes {

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
// The tool's version and git revision are the envelope's (probes/records/envelope.hpp), not repeated here.
struct environment {
  std::string command_line;
  std::optional<gpu_environment> gpu;
};

// Returns the inputs block of a record: the problem (model, recipe, training, device with its reserve) and
// the layout as structured fields (`layout_spec`, read back by measurement_from_json) and as text (`layout`).
nlohmann::json record_inputs(const problem& p, const layout& l);

// Returns the predicted block of a record: the planner's figures for stage `w` (bytes: persistent, transient,
// activations, working set, output phase, step peak, reserve, total, capacity), as measurement_from_json
// reads them. Every writer of a measurement record (probe, snapshot, observation) takes it from here.
nlohmann::json predicted_block(const stage_breakdown& w);

// The largest memory figure a record may hold, in bytes (16 TiB): no GPU holds more, so a larger figure is
// a record no device produced, refused when it is read rather than fitted (README, limits).
inline constexpr std::int64_t max_record_bytes = std::int64_t{1} << 44;

// A record read back: the case it measured (problem and layout, exactly) and its figures. Every kind of
// record headroom writes: a probe (sim or cuda), an overheads probe, an imported PyTorch snapshot.
struct measurement_record {
  std::string origin, schema, kind;  // kind: "probe", "overheads", "snapshot", "observation"
  std::string backend;               // "sim", "cuda", "pytorch-snapshot", "observation"
  bool measured = false;             // on a GPU (cuda, snapshot, observation), not emulated (sim)
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
  std::optional<records::timeline> timeline;  // probe records from headroom.measurement/1.5 on
  // An observation (kind "observation", backend "observation"; calibrate/observations.hpp) holds one figure,
  // in peak_reserved, peak_allocated or device_used_at_peak as `figure` says, with inputs and where set and
  // the predicted terms of its case's worst stage; the others stay 0 / nullopt. Made in code by filling those
  // fields (measured = true), or read back from observation_record()'s JSON.
  // An observation's kind of figure (calibrate/observations.hpp): "device_used" (nvidia-smi: holds the CUDA
  // context and NCCL), "reserved_peak" (torch.cuda.max_memory_reserved), "allocated_peak"; "" for the
  // records headroom writes itself.
  std::string figure;
  // A snapshot record's view for the report (memory timeline by top frame, largest allocations and segments
  // at the peak; probes/snapshots/snapshot_record.hpp); null when the record has none.
  nlohmann::json snapshot_view;
  nlohmann::json raw;  // what compare reads of the document: inputs.layout, module_loading, source, layers
};

// Returns the record in `j`. Throws bad_input naming the problem: an unknown schema or major version, a
// missing field.
measurement_record measurement_from_json(const nlohmann::json& j, const std::string& origin);

// Returns the "environment" block every record carries.
nlohmann::json environment_json(const environment& env);
}  // namespace headroom::probes
