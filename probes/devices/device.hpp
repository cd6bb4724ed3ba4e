// device.hpp: what an allocator policy asks of a GPU: map and unmap physical memory in multiples of the
// device's granularity, reserve a virtual range and map pages at offsets inside it (VMM, for expandable
// segments), and report capacity, use and the driver's free/total. `sim_device` implements it without
// touching host memory; `cuda_device` (cuda_device.hpp) with cudaMalloc and the driver's VMM calls; tests
// use a fault-injecting fake.
//
// Errors: running out of memory is an answer (nullopt / false), not an exception. Any other failure (a
// CUDA call that fails for another reason, a lost device) throws device_error, whose text names the call.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace headroom::probes {

// A device failure other than out-of-memory: what() names the call, file and line where one exists.
class device_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The driver's view of the whole device, bytes (cudaMemGetInfo): other processes and the context included.
struct memory_info {
  std::int64_t free = 0;
  std::int64_t total = 0;
  std::int64_t used() const { return total - free; }
};

class device {
 public:
  virtual ~device() = default;
  // Maps `bytes` (a multiple of granularity()); returns its device address, or nullopt when the device
  // cannot hold it. Throws device_error for any other failure.
  virtual std::optional<std::uint64_t> map(std::int64_t bytes) = 0;
  // Unmaps what map() returned.
  virtual void unmap(std::uint64_t address, std::int64_t bytes) = 0;

  // Reserves `bytes` of virtual address space with no memory behind it (cuMemAddressReserve); returns its
  // base, or nullopt when no range that large is available.
  virtual std::optional<std::uint64_t> reserve_range(std::int64_t bytes) = 0;
  // Maps physical memory at [base + offset, base + offset + bytes) inside a reserved range, one physical
  // allocation per `page` bytes so that each page can be unmapped alone (bytes and offset are multiples of
  // page, page a multiple of granularity()). Returns false, with nothing mapped, when out of memory.
  virtual bool map_at(std::uint64_t base, std::int64_t offset, std::int64_t bytes, std::int64_t page) = 0;
  // Unmaps pages that map_at mapped; offset and bytes are multiples of the page they were mapped with.
  virtual void unmap_at(std::uint64_t base, std::int64_t offset, std::int64_t bytes, std::int64_t page) = 0;
  // Returns a reserved range (everything in it must be unmapped first).
  virtual void release_range(std::uint64_t base, std::int64_t bytes) = 0;

  // Returns the bytes an allocator may map in all (the card's, or less when capped).
  virtual std::int64_t capacity() const = 0;
  // Returns the bytes mapped now through this object.
  virtual std::int64_t used() const = 0;
  // Returns the physical page size, bytes (2 MiB on current GPUs).
  virtual std::int64_t granularity() const = 0;
  // Returns the driver's free and total memory of the whole device.
  virtual memory_info memory() const = 0;
  virtual std::string describe() const = 0;
};

// Returns `bytes` rounded up to a multiple of `granularity`.
inline std::int64_t round_up(std::int64_t bytes, std::int64_t granularity) {
  return (bytes + granularity - 1) / granularity * granularity;
}

}  // namespace headroom::probes
