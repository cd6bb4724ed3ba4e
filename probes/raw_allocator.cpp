// raw_allocator.cpp: the `raw` policy: one device mapping per tensor, nothing cached.
#include <vector>

#include "allocator.hpp"

namespace headroom::probes {

namespace {

class raw_allocator final : public allocator {
 public:
  explicit raw_allocator(device& dev) : m_dev(dev) {}

  std::optional<std::int64_t> allocate(std::int64_t bytes) override {
    const std::int64_t rounded = round_up(std::max<std::int64_t>(bytes, 1), m_dev.granularity());
    auto addr = m_dev.map(rounded);
    if (!addr) return std::nullopt;
    m_blocks.push_back({*addr, rounded, bytes});
    m_stats.requested += bytes;
    m_stats.allocated += rounded;
    m_stats.reserved += rounded;
    ++m_stats.segments;
    return static_cast<std::int64_t>(m_blocks.size() - 1);
  }

  void release(std::int64_t handle) override {
    auto& b = m_blocks[static_cast<std::size_t>(handle)];
    m_dev.unmap(b.address, b.size);
    m_stats.requested -= b.requested;
    m_stats.allocated -= b.size;
    m_stats.reserved -= b.size;
    --m_stats.segments;
  }

  const allocator_stats& stats() const override { return m_stats; }
  std::string describe() const override { return "raw (one device allocation per tensor)"; }

 private:
  struct block {
    std::uint64_t address;
    std::int64_t size, requested;
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
