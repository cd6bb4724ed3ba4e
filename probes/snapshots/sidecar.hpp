// sidecar.hpp: the sidecar tools/headroom_capture.py writes beside a snapshot it captured (schema
// headroom.capture/1, SNAPSHOT.headroom.json): the GPU and software stack, where the process sat in a
// multi-rank run, and what torch.cuda measured (its peaks, the device memory used at the peak). Read by
// `headroom snapshot` and `headroom probe snapshot` when it lies beside the snapshot (docs/snapshots.md).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "probes/snapshots/snapshot.hpp"

namespace headroom::probes {

struct capture_sidecar {
  std::string path;  // where it was read from
  std::string gpu;   // "NVIDIA H200"
  std::int64_t gpu_total_memory = 0;  // bytes (torch.cuda.get_device_properties().total_memory)
  int gpu_index = 0;
  std::string driver, driver_from;          // "" when the script found none
  std::string torch, cuda_runtime, nccl;    // "" when not reported
  std::string alloc_conf;                   // PYTORCH_CUDA_ALLOC_CONF as the process saw it
  std::string launcher;                     // "" for a single process
  int rank = 0, world_size = 1;  // world_size 0: not known (the sidecar's null)
  std::optional<int> local_rank;
  std::int64_t max_reserved = 0, max_allocated = 0;  // bytes: torch.cuda.max_memory_{reserved,allocated}
  // Bytes: the device memory used at the allocator's peak, approximated as the reserved peak plus what was
  // outside the allocator when the capture ended (`used_how` says so).
  std::int64_t device_used_at_peak = 0;
  std::string used_how;
  std::int64_t outside_allocator = 0;  // bytes used on the device and not reserved by the allocator, at the end
  std::string started_utc, ended_utc, ended_by;
  nlohmann::json problem;  // null, or {"kind": "file" | "megatron_args", ...} as written
};

// Returns the sidecar's path for the snapshot at `snapshot_path`: the path with ".headroom.json" appended.
std::string sidecar_path(const std::string& snapshot_path);

// Returns the sidecar in `j`, read from `origin`, for the snapshot file named `snapshot_name` (its base
// name). Throws bad_input("<origin>: <field>", ...) naming the first malformed field: a missing or
// mistyped one, a figure outside 0..16 TiB, peaks larger than the GPU, max_memory_allocated above
// max_memory_reserved, memory outside the allocator (the CUDA context) negative or larger than the GPU, a
// rank not below the world size, another schema, or a sidecar that names another snapshot.
capture_sidecar parse_sidecar(const nlohmann::json& j, const std::string& origin, const std::string& snapshot_name);

// Returns the sidecar beside the snapshot at `snapshot_path`, or nullopt when there is none. Throws
// bad_input when one is there and cannot be read or is malformed: a sidecar is never ignored silently.
std::optional<capture_sidecar> load_sidecar_beside(const std::string& snapshot_path);

// Throws bad_input("<sidecar>: <field>", ...) when the sidecar contradicts the snapshot `s` it lies beside:
// torch's peaks below what the snapshot's final segments reserve or allocate on the captured GPU, a GPU
// smaller than those segments, or device memory used at the peak below the reserved peak.
void check_sidecar_against(const capture_sidecar& c, const torch_snapshot& s);

// Returns a one-line warning when the sidecar's PYTORCH_CUDA_ALLOC_CONF differs from `snapshot_conf`, the
// snapshot's own recorded allocator_settings string; "" when they agree. Call it only for a snapshot that
// recorded its settings.
std::string sidecar_conf_warning(const capture_sidecar& c, const std::string& snapshot_conf);

// Returns the "environment" block of a record made from a captured snapshot (the keys measurement_from_json
// reads: gpu, driver, cuda_runtime, nccl; and torch, the allocator settings and the rank).
nlohmann::json sidecar_environment(const capture_sidecar& c);

// Returns the record's "capture" block: the sidecar's path, its peaks, the device memory used at the peak
// with how it was approximated, the capture's dates and the run's problem.
nlohmann::json sidecar_capture_block(const capture_sidecar& c);

}  // namespace headroom::probes
