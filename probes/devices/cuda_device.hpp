// cuda_device.hpp: the `device` of a real GPU. map/unmap are cudaMalloc/cudaFree; the address ranges of
// expandable segments are the driver's VMM (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess,
// cuMemUnmap, cuMemRelease, cuMemAddressFree), reached through cudaGetDriverEntryPointByVersion so that
// nothing links libcuda; memory() is cudaMemGetInfo. With a cap the device refuses what would take the
// device-used memory above it, so a 139 GiB H200 stands in for a smaller card (the context counts).
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <map>

#include "probes/devices/device.hpp"

namespace headroom::probes {

// Returns why device 0 cannot be used ("no CUDA driver (cudaErrorInsufficientDriver: ...)"), or nullopt.
// A host without a driver reports InsufficientDriver (or StubLibrary), not NoDevice: all mean "no device".
std::optional<std::string> no_device_reason();

class cuda_device final : public device {
 public:
  // The context of `ordinal` must be current. `cap`: device-used bytes the card may reach in all.
  // Throws bad_input when cap is above the card's total, device_error when CUDA fails.
  cuda_device(int ordinal, std::optional<std::int64_t> cap, cudaStream_t stream);
  ~cuda_device() override;
  cuda_device(const cuda_device&) = delete;
  cuda_device& operator=(const cuda_device&) = delete;

  std::optional<std::uint64_t> map(std::int64_t bytes) override;
  void unmap(std::uint64_t address, std::int64_t bytes) override;
  std::optional<std::uint64_t> reserve_range(std::int64_t bytes) override;
  bool map_at(std::uint64_t base, std::int64_t offset, std::int64_t bytes, std::int64_t page) override;
  void unmap_at(std::uint64_t base, std::int64_t offset, std::int64_t bytes, std::int64_t page) override;
  void release_range(std::uint64_t base, std::int64_t bytes) override;
  std::int64_t capacity() const override { return m_budget; }
  std::int64_t used() const override { return m_used; }
  std::int64_t granularity() const override { return m_granularity; }
  memory_info memory() const override;
  std::string describe() const override;

  int ordinal() const { return m_ordinal; }
  cudaStream_t stream() const { return m_stream; }
  std::int64_t card_total() const { return m_total; }
  std::optional<std::int64_t> cap() const { return m_cap; }

 private:
  struct driver_api;
  bool within_budget(std::int64_t bytes) const { return bytes <= m_budget - m_used; }

  int m_ordinal;
  cudaStream_t m_stream;
  std::optional<std::int64_t> m_cap;
  std::int64_t m_total = 0, m_budget = 0, m_used = 0, m_granularity = 2 << 20;
  std::string m_name;
  const driver_api* m_driver = nullptr;  // nullptr: no VMM on this device or driver
  CUmemAllocationProp m_prop{};
  struct vmm_page {
    CUmemGenericAllocationHandle handle;
    std::size_t size;
  };
  std::map<std::uint64_t, vmm_page> m_pages;  // mapped VMM pages by address
};

}  // namespace headroom::probes
