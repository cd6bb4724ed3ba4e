// pattern.hpp: the kernels the probes launch on what they allocate: fill a buffer with a pattern that
// depends on (seed, byte offset), and count the words that do not hold it, so a probe knows every byte it
// was handed is really backed by device memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace headroom::kernels {

// Enqueues a fill of `bytes` at `device_ptr` (8-byte aligned; a tail under 8 bytes is left alone).
// Returns the launch's error code.
cudaError_t fill_pattern(void* device_ptr, std::size_t bytes, std::uint64_t seed, cudaStream_t stream);

// Counts the 8-byte words of the buffer that differ from fill_pattern's, synchronising `stream`.
// Returns the error code; the count goes to *mismatches.
cudaError_t count_mismatches(const void* device_ptr, std::size_t bytes, std::uint64_t seed,
                             cudaStream_t stream, std::uint64_t* mismatches);

// Returns why there is no usable CUDA device ("no CUDA driver (cudaErrorInsufficientDriver: ...)"), or
// nullopt when device 0 can be used. A host without a driver reports InsufficientDriver, not NoDevice.
std::optional<std::string> no_device_reason();

}  // namespace headroom::kernels
