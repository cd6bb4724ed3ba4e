// pattern.hpp: the kernels the probes launch on what they allocate: fill a buffer with a pattern that
// depends on (seed, word offset), and tally the words that do not hold it, so a probe knows every byte it
// was handed is really backed by device memory and nothing else wrote over it. Launch errors come back as
// the cudaError_t of the launch; callers check them through probes/devices/cuda_check.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace headroom::kernels {

// What verify_pattern accumulates on the device: mismatching 8-byte words over every verified buffer, and
// the tag of the first buffer found with one, plus one (0: none). Allocated once, before a trace, by the
// caller, and zeroed by it.
struct mismatch_tally {
  unsigned long long words;
  unsigned long long first_tag_plus_one;
};

// Enqueues a fill of `bytes` at `device_ptr` (8-byte aligned; a tail under 8 bytes is left alone).
// Returns the launch's error code.
cudaError_t fill_pattern(void* device_ptr, std::size_t bytes, std::uint64_t seed, cudaStream_t stream);

// Enqueues a check of the buffer against fill_pattern(seed), adding its mismatching words to
// `device_tally` and recording `tag` there when it is the first buffer with any. Returns the launch's error
// code; the tally is read by the caller after synchronising `stream`.
cudaError_t verify_pattern(const void* device_ptr, std::size_t bytes, std::uint64_t seed, std::uint64_t tag,
                           mismatch_tally* device_tally, cudaStream_t stream);

}  // namespace headroom::kernels
