// cuda_block_check.hpp: the block checker of a real GPU: kernels/pattern.cu fills each block when it is
// allocated and verifies it before it is freed, on the probe's stream, asynchronously; one tally (allocated
// once, before the trace) collects mismatches and the first tensor that had one. Also the throughput of
// fill + verify against a device-to-device copy, measured in the same run.
#pragma once

#include "probes/trace/block_check.hpp"
#include "probes/devices/cuda_device.hpp"
#include "probes/cases/measurement.hpp"

namespace headroom::probes {

class cuda_block_checker final : public block_checker {
 public:
  explicit cuda_block_checker(cudaStream_t stream);
  ~cuda_block_checker() override;
  cuda_block_checker(const cuda_block_checker&) = delete;
  cuda_block_checker& operator=(const cuda_block_checker&) = delete;

  void on_alloc(std::int32_t tensor, std::uint64_t address, std::int64_t bytes) override;
  void on_free(std::int32_t tensor, std::uint64_t address, std::int64_t bytes) override;
  verification finish() override;

 private:
  cudaStream_t m_stream;
  void* m_tally = nullptr;  // kernels::mismatch_tally on the device
  verification m_v;
};

// Returns fill + verify and copy throughput, GB/s of bytes read plus written, over `bytes` buffers (two
// for the copy), median of five timed runs after a warm-up. The buffers are freed before it returns.
touch_throughput measure_touch_throughput(cudaStream_t stream, std::int64_t bytes);

}  // namespace headroom::probes
