// allocator.hpp: an allocator policy between the step trace and a device. Each keeps three numbers that
// the measurement reports: requested (what the program asked for), allocated (blocks handed out, after
// rounding) and reserved (what the policy holds from the device), and hands back each block's device
// address so that kernels can fill and verify it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "probes/devices/device.hpp"

namespace headroom::probes {

struct allocator_stats {
  std::int64_t requested = 0;
  std::int64_t allocated = 0;
  std::int64_t reserved = 0;
  std::int64_t retries = 0;   // times every cached segment was freed and the device asked again
  std::int64_t segments = 0;  // device mappings held now
};

// A driver-managed pool's own high-water marks (cudaMemPoolAttrReservedMemHigh / UsedMemHigh), bytes.
struct pool_high_water {
  std::int64_t reserved_high = 0, used_high = 0;
};

class allocator {
 public:
  virtual ~allocator() = default;
  // Returns a handle to a block of at least `bytes`, or nullopt when the device is out of memory after
  // the policy's retries.
  virtual std::optional<std::int64_t> allocate(std::int64_t bytes) = 0;
  // Returns a handle to a block of at least `bytes` used on `stream`; policies without streams ignore it.
  virtual std::optional<std::int64_t> allocate_on(std::int64_t bytes, std::int64_t /*stream*/) {
    return allocate(bytes);
  }
  // Returns the block to the policy.
  virtual void release(std::int64_t handle) = 0;
  // Returns the device address of a live block.
  virtual std::uint64_t address_of(std::int64_t handle) const = 0;
  // Returns every cached byte that holds no live block to the device (torch.cuda.empty_cache()); with no
  // live block left, reserved is 0 afterwards.
  virtual void empty_cache() = 0;
  virtual const allocator_stats& stats() const = 0;
  // Returns the driver's own high-water marks when the policy is the driver's pool, else nullopt.
  virtual std::optional<pool_high_water> driver_high_water() const { return std::nullopt; }
  virtual std::string describe() const = 0;
};

// One device allocation per tensor, rounded to the device's granularity.
std::unique_ptr<allocator> make_raw_allocator(device& dev);

}  // namespace headroom::probes
