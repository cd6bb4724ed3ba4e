// driver_pool_allocator.hpp: the `driver-pool` policy: CUDA's own stream-ordered allocator
// (cudaMallocFromPoolAsync on a pool of its own, release threshold set to the maximum so the pool keeps
// what is freed, as a caching allocator would). Reserved and allocated are the pool's attributes
// (ReservedMemCurrent, UsedMemCurrent); its high-water marks go into the record.
#pragma once

#include <memory>

#include "probes/allocators/allocator.hpp"
#include "probes/devices/cuda_device.hpp"

namespace headroom::probes {

// Returns the policy on `dev`'s GPU and stream. Throws device_error when the pool cannot be made.
std::unique_ptr<allocator> make_driver_pool_allocator(cuda_device& dev);

}  // namespace headroom::probes
