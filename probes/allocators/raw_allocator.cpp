// raw_allocator.cpp: the `raw` policy: one device mapping per tensor (cudaMalloc / cudaFree on a CUDA
// device), nothing cached.
#include <algorithm>
#include <vector>

#include "probes/allocators/allocator.hpp"

namespace headroom::probes {

namespace {

class raw_allocator final : public allocator {
 public:
  explicit raw_allocator(device& dev) : m_dev(dev) {}

  // A block still live at destruction (an exception unwound past the replay) goes back to the device;
  // a failure to unmap it cannot be reported from here.
  ~raw_allocator() override {
    for (auto& b : m_blocks) {
      if (!b.live) continue;
      try {
        m_dev.unmap(b.address, b.size);
      } catch (...) {
      }
    }
  }

  std::optional<std::int64_t> allocate(std::int64_t bytes) override {
    const std::int64_t rounded = round_up(std::max<std::int64_t>(bytes, 1), m_dev.granularity());
    auto addr = m_dev.map(rounded);
    if (!addr) return std::nullopt;
    m_blocks.push_back({*addr, rounded, bytes, true});
    m_stats.requested += bytes;
    m_stats.allocated += rounded;
    m_stats.reserved += rounded;
    ++m_stats.segments;
    return static_cast<std::int64_t>(m_blocks.size() - 1);
  }

  void release(std::int64_t handle) override {
    auto& b = m_blocks[static_cast<std::size_t>(handle)];
    b.live = false;
    m_dev.unmap(b.address, b.size);
    m_stats.requested -= b.requested;
    m_stats.allocated -= b.size;
    m_stats.reserved -= b.size;
    --m_stats.segments;
  }

  std::uint64_t address_of(std::int64_t handle) const override {
    return m_blocks[static_cast<std::size_t>(handle)].address;
  }
  void empty_cache() override {}  // nothing is cached
  const allocator_stats& stats() const override { return m_stats; }
  std::string describe() const override { return "raw (one device allocation per tensor)"; }

 private:
  struct block {
    std::uint64_t address;
    std::int64_t size, requested;
    bool live;
  };
  device& m_dev;
  std::vector<block> m_blocks;
  allocator_stats m_stats;
};

}  // namespace

std::unique_ptr<allocator> make_raw_allocator(device& dev) {
  return std::make_unique<raw_allocator>(dev);
}

}  // namespace headroom::probes
