// overheads.hpp: what the 10 GiB reserve is made of, measured as layered deltas of the device's used
// memory (nccl-tests' habit): the driver before any context (NVML), the CUDA context, a cuBLAS handle and
// the workspace its first bf16 GEMM of the model's shapes leaves behind, and a one-rank NCCL communicator
// before and after its first all-reduce of a gradient bucket. Buffers the probe allocates itself (GEMM
// operands, the bucket) are layers of their own, so the library layers are only the libraries'.
// The arithmetic runs over an `overhead_stack`, which the CUDA backend implements and tests fake.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace headroom::probes {

// The GPU stack, one call per layer; every call is synchronous, so device_used() after it is settled.
class overhead_stack {
 public:
  virtual ~overhead_stack() = default;
  // Returns the device-used bytes before this process has a CUDA context (NVML), or nullopt with `why`.
  virtual std::optional<std::int64_t> used_before_context(std::string& why) = 0;
  virtual void create_context() = 0;
  // Returns the device-used bytes now (cudaMemGetInfo: total - free).
  virtual std::int64_t device_used() = 0;
  // Allocates (cudaMalloc) `bytes` the probe itself needs, under a name; free_buffer gives it back.
  virtual void allocate_buffer(const std::string& name, std::int64_t bytes) = 0;
  virtual void free_buffer(const std::string& name) = 0;
  // Creates a cuBLAS handle on the probe's stream; false with `why` when cuBLAS cannot be loaded.
  virtual bool create_blas(std::string& why) = 0;
  // Runs C[m x n] = A[m x k] B[k x n] in bf16 with fp32 accumulation on the operands buffer.
  virtual void gemm(std::int64_t m, std::int64_t n, std::int64_t k) = 0;
  // Creates a one-rank NCCL communicator; false with `why` when NCCL cannot be loaded.
  virtual bool create_nccl(std::string& why) = 0;
  // All-reduces `bytes` of bf16 in the bucket buffer.
  virtual void all_reduce(std::int64_t bytes) = 0;
};

struct overhead_layer {
  std::string name;                   // "CUDA context", "cuBLAS handle", ...
  std::optional<std::int64_t> bytes;  // the delta; nullopt when the layer could not be measured
  std::int64_t used_after = 0;        // device-used after the layer
  bool library = false;               // part of the fixed overhead (not a buffer the probe made)
  std::string note;                   // how it was measured, or why it was not
};

struct overhead_shapes {
  std::int64_t m = 0, n = 0, k = 0;  // the GEMM: tokens x (QKV width / tp) x hidden
  std::int64_t bucket_bytes = 0;     // the all-reduce
  std::string gemm_origin;           // "QKV projection of gpt3-175b: seq 2048 x micro-batch 1 ..."
};

struct overheads {
  std::vector<overhead_layer> layers;
  overhead_shapes shapes;
  std::string module_loading;  // CUDA_MODULE_LOADING as the process ran ("LAZY" when unset, CUDA >= 12.2)
  // The context again, made by a child process under the other CUDA_MODULE_LOADING.
  std::optional<overhead_layer> context_other_mode;
  std::string other_module_loading;
  // Returns the sum of the library layers that were measured, bytes.
  std::int64_t fixed_bytes() const;
  // Returns the layer named `name`, or nullptr.
  const overhead_layer* find(const std::string& name) const;
};

// Runs the layers in order on `stack`. A library that cannot be loaded leaves its layers unmeasured with
// the reason; a failing CUDA call throws device_error.
overheads measure_overheads(overhead_stack& stack, const overhead_shapes& shapes, std::string module_loading);

}  // namespace headroom::probes
