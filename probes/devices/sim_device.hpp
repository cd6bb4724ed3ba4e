// sim_device.hpp: a simulated GPU: a virtual address space of a given capacity and granularity with no
// memory behind it, so a 192 GiB step replays on a laptop. It knows nothing of CUDA contexts or NCCL: its
// free memory is capacity minus what it has mapped.
#pragma once

#include "probes/devices/device.hpp"

namespace headroom::probes {

class sim_device final : public device {
 public:
  // Throws bad_input when capacity or granularity is not positive.
  sim_device(std::int64_t capacity, std::int64_t granularity);

  std::optional<std::uint64_t> map(std::int64_t bytes) override;
  void unmap(std::uint64_t address, std::int64_t bytes) override;
  std::optional<std::uint64_t> reserve_range(std::int64_t bytes) override;
  bool map_at(std::uint64_t base, std::int64_t offset, std::int64_t bytes, std::int64_t page) override;
  void unmap_at(std::uint64_t base, std::int64_t offset, std::int64_t bytes, std::int64_t page) override;
  void release_range(std::uint64_t base, std::int64_t bytes) override;
  std::int64_t capacity() const override { return m_capacity; }
  std::int64_t used() const override { return m_used; }
  std::int64_t granularity() const override { return m_granularity; }
  memory_info memory() const override { return {m_capacity - m_used, m_capacity}; }
  std::string describe() const override;
  // Returns the most bytes ever mapped at once.
  std::int64_t peak_used() const { return m_peak; }

 private:
  bool take(std::int64_t bytes);
  std::int64_t m_capacity, m_granularity;
  std::int64_t m_used = 0, m_peak = 0;
  std::uint64_t m_next = 0x7f0000000000ULL;  // addresses only order blocks; never reused
};

}  // namespace headroom::probes
