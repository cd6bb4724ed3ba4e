// device.hpp: what an allocator policy asks of a GPU: map and unmap physical memory in multiples of the
// device's granularity, and report capacity and use. `sim_device` implements it without touching host
// memory; the CUDA backend (next issue) implements it with cudaMalloc / VMM.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace headroom::probes {

class device {
 public:
  virtual ~device() = default;
  // Maps `bytes` (a multiple of granularity()); returns its device address, or nullopt when the device
  // cannot hold it.
  virtual std::optional<std::uint64_t> map(std::int64_t bytes) = 0;
  // Unmaps what map() returned.
  virtual void unmap(std::uint64_t address, std::int64_t bytes) = 0;
  // Returns the device's bytes in all.
  virtual std::int64_t capacity() const = 0;
  // Returns the bytes mapped now.
  virtual std::int64_t used() const = 0;
  // Returns the physical page size, bytes (2 MiB on current GPUs).
  virtual std::int64_t granularity() const = 0;
  virtual std::string describe() const = 0;
};

// Returns `bytes` rounded up to a multiple of `granularity`.
inline std::int64_t round_up(std::int64_t bytes, std::int64_t granularity) {
  return (bytes + granularity - 1) / granularity * granularity;
}

}  // namespace headroom::probes
