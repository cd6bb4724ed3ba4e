// gpu_backend.hpp: the CUDA backend as the CLI and the probes see it, with no CUDA header, so everything
// above it builds with or without nvcc. Implemented by cuda_backend.cpp when CUDA was found at configure
// time, and by no_cuda_backend.cpp (every entry says why there is no GPU) otherwise.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "probes/trace/block_check.hpp"
#include "probes/allocators/caching_allocator.hpp"
#include "probes/cases/measurement.hpp"
#include "probes/cases/overheads.hpp"

namespace headroom::probes {

// One NCCL communicator of the layout's groups, as this rank joins it.
struct nccl_group_spec {
  std::string name;  // "tp", "cp", "dp", "pp"
  int size = 1, rank_in_group = 0;
  std::string unique_id;         // the id the group's first rank made (nccl_unique_id), as bytes
  std::int64_t first_bytes = 0;  // the payload of its first collective
  bool point_to_point = false;   // pp: send to the next stage and receive from the previous, as 1F1B does
};

// What joining one group cost this rank, as device-used deltas.
struct nccl_group_memory {
  std::string name;
  int size = 1, rank_in_group = 0;
  std::int64_t first_bytes = 0;
  std::string collective;                        // "all-reduce", "send/recv ring"
  std::optional<std::int64_t> init_bytes;        // ncclCommInitRank
  std::optional<std::int64_t> collective_bytes;  // the first collective, its own buffer excluded
  std::int64_t total() const { return init_bytes.value_or(0) + collective_bytes.value_or(0); }
};

// Device 0, opened for probing: the context, one stream, the driver's view before and after the context.
class gpu_backend {
 public:
  virtual ~gpu_backend() = default;
  virtual device& dev() = 0;
  // Returns a fresh allocator of the policy named raw, caching (with `copt`) or driver-pool.
  virtual std::unique_ptr<allocator> make_allocator(const std::string& name, const caching_options& copt) = 0;
  // Returns a checker that fills and verifies blocks with kernels on the probe's stream; its tally is
  // allocated now, before the case's starting free memory is read.
  virtual std::unique_ptr<block_checker> make_checker() = 0;
  // Returns fill + verify and device-to-device copy throughput over `bytes` buffers (freed afterwards).
  virtual touch_throughput measure_throughput(std::int64_t bytes) = 0;
  virtual device_memory_truth truth() const = 0;
  virtual const gpu_environment& environment() const = 0;
  // Returns how much the device's free memory may move between cases without counting as a leak, bytes.
  virtual std::int64_t cleanup_slack() const = 0;
  // Returns a fresh NCCL unique id as bytes, or nullopt with `why` when NCCL cannot be loaded.
  virtual std::optional<std::string> nccl_unique_id(std::string& why) = 0;
  // Joins every group in order (each a collective call with the group's other ranks, so every rank passes
  // its groups in the same order), runs the group's first collective, and returns each one's memory as
  // device-used deltas. The communicators live as long as the backend, so the case replayed afterwards
  // runs beside them as it would in training. Throws device_error.
  virtual std::vector<nccl_group_memory> join_nccl_groups(const std::vector<nccl_group_spec>& groups) = 0;
};

// Returns why no CUDA device can be used here ("no CUDA driver (cudaErrorInsufficientDriver: ...)", "this
// build has no CUDA backend (...)"), or nullopt when device 0 can be used.
std::optional<std::string> cuda_unavailable_reason();

// Opens device 0: NVML's device-used is read first, then the context is made. `cap` (bytes of device-used
// memory, as if the card were that large) must not exceed the card. Throws bad_input for a cap above the
// card, device_error when CUDA fails.
std::unique_ptr<gpu_backend> open_gpu_backend(std::optional<std::int64_t> cap);

// Runs the layered overhead probe on device 0 in this process (which must not have a CUDA context yet).
// Throws device_error when CUDA fails.
overheads probe_overheads(const overhead_shapes& shapes);

// Measures the CUDA context alone (NVML before it, cudaMemGetInfo after) in this process, which must not
// have a context yet: `headroom context-probe` runs it in a child with the other CUDA_MODULE_LOADING.
overhead_layer probe_context_only();

// Returns the GPU stack of device 0 (name, driver, runtime, NCCL when it can be loaded).
gpu_environment read_gpu_environment();

}  // namespace headroom::probes
