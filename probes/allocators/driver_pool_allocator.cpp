// driver_pool_allocator.cpp: CUDA's pool allocator as a policy (see driver_pool_allocator.hpp). A capped
// device (--gpu-mem below the card) is honoured by refusing an allocation that took the pool's reserved
// bytes past the device's budget.
#include "probes/allocators/driver_pool_allocator.hpp"

#include <cstdint>
#include <limits>
#include <vector>

#include "probes/devices/cuda_check.hpp"

namespace headroom::probes {

namespace {

class driver_pool_allocator final : public allocator {
 public:
  explicit driver_pool_allocator(cuda_device& dev) : m_dev(dev) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev.ordinal();
    HEADROOM_CUDA_CALL(cudaMemPoolCreate(&m_pool, &props));
    std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
    HEADROOM_CUDA_CALL(cudaMemPoolSetAttribute(m_pool, cudaMemPoolAttrReleaseThreshold, &keep));
    std::uint64_t zero = 0;  // writing 0 resets a high-water mark
    HEADROOM_CUDA_CALL(cudaMemPoolSetAttribute(m_pool, cudaMemPoolAttrReservedMemHigh, &zero));
    HEADROOM_CUDA_CALL(cudaMemPoolSetAttribute(m_pool, cudaMemPoolAttrUsedMemHigh, &zero));
  }

  ~driver_pool_allocator() override {
    for (auto& b : m_blocks)
      if (b.live) (void)HEADROOM_CUDA_CALL_NOTHROW(cudaFreeAsync(b.ptr, m_dev.stream()));
    (void)HEADROOM_CUDA_CALL_NOTHROW(cudaStreamSynchronize(m_dev.stream()));
    (void)HEADROOM_CUDA_CALL_NOTHROW(cudaMemPoolDestroy(m_pool));
  }

  std::optional<std::int64_t> allocate(std::int64_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaMallocFromPoolAsync(
        &p, static_cast<std::size_t>(std::max<std::int64_t>(bytes, 1)), m_pool, m_dev.stream());
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return std::nullopt;
    }
    HEADROOM_CUDA_CALL(e);
    refresh();
    if (m_stats.reserved > m_dev.capacity()) {  // past the cap: as if the card had run out
      HEADROOM_CUDA_CALL(cudaFreeAsync(p, m_dev.stream()));
      empty_cache();
      return std::nullopt;
    }
    m_blocks.push_back({p, bytes, true});
    m_requested += bytes;
    m_stats.requested = m_requested;
    return static_cast<std::int64_t>(m_blocks.size() - 1);
  }

  void release(std::int64_t handle) override {
    auto& b = m_blocks[static_cast<std::size_t>(handle)];
    HEADROOM_CUDA_CALL(cudaFreeAsync(b.ptr, m_dev.stream()));
    b.live = false;
    m_requested -= b.bytes;
    refresh();
  }

  std::uint64_t address_of(std::int64_t handle) const override {
    return reinterpret_cast<std::uint64_t>(m_blocks[static_cast<std::size_t>(handle)].ptr);
  }

  void empty_cache() override {
    HEADROOM_CUDA_CALL(cudaStreamSynchronize(m_dev.stream()));
    HEADROOM_CUDA_CALL(cudaMemPoolTrimTo(m_pool, 0));
    refresh();
  }

  const allocator_stats& stats() const override { return m_stats; }

  std::optional<pool_high_water> driver_high_water() const override {
    return pool_high_water{attribute(cudaMemPoolAttrReservedMemHigh), attribute(cudaMemPoolAttrUsedMemHigh)};
  }

  std::string describe() const override {
    return "driver-pool (cudaMallocFromPoolAsync, release threshold max)";
  }

 private:
  struct block {
    void* ptr;
    std::int64_t bytes;
    bool live;
  };

  std::int64_t attribute(cudaMemPoolAttr a) const {
    std::uint64_t v = 0;
    HEADROOM_CUDA_CALL(cudaMemPoolGetAttribute(m_pool, a, &v));
    return static_cast<std::int64_t>(v);
  }
  void refresh() {
    m_stats.reserved = attribute(cudaMemPoolAttrReservedMemCurrent);
    m_stats.allocated = attribute(cudaMemPoolAttrUsedMemCurrent);
    m_stats.requested = m_requested;
    m_stats.segments = m_stats.reserved > 0 ? 1 : 0;
  }

  cuda_device& m_dev;
  cudaMemPool_t m_pool{};
  std::vector<block> m_blocks;
  std::int64_t m_requested = 0;
  allocator_stats m_stats;
};

}  // namespace

std::unique_ptr<allocator> make_driver_pool_allocator(cuda_device& dev) {
  return std::make_unique<driver_pool_allocator>(dev);
}

}  // namespace headroom::probes
