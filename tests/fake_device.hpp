// fake_device.hpp: a fault-injecting `device` for the CPU tests (google/benchmark tests its reporters with
// fakes the same way): a sim device underneath, plus a chosen map call that reports out-of-memory, a
// chosen call that fails as a broken GPU would (device_error), free memory it reports as chosen, and a leak
// it can be told to have. It also checks what a real driver would refuse: unmapping what was not mapped,
// mapping over a mapped page, releasing a range with pages in it.
#pragma once

#include <map>
#include <set>

#include "probes/trace/block_check.hpp"
#include "probes/devices/sim_device.hpp"

namespace headroom::test {

class fake_device final : public probes::device {
 public:
  fake_device(std::int64_t capacity, std::int64_t granularity) : m_sim(capacity, granularity) {}

  std::optional<int> oom_at_map;              // this map / map_at call (1-based) reports out of memory
  std::optional<int> fail_at_map;             // this one throws device_error
  std::optional<std::int64_t> free_override;  // memory() reports this free instead
  std::int64_t leak_per_unmap = 0;            // bytes the device "loses" at every unmap (a driver leak)
  int maps = 0, unmaps = 0;

  std::optional<std::uint64_t> map(std::int64_t bytes) override {
    if (const auto r = fault()) return std::nullopt;
    auto a = m_sim.map(bytes);
    if (a) m_live[*a] = bytes;
    return a;
  }
  void unmap(std::uint64_t address, std::int64_t bytes) override {
    ++unmaps;
    const auto it = m_live.find(address);
    if (it == m_live.end() || it->second != bytes)
      throw probes::device_error("fake: unmap of what was not mapped");
    m_live.erase(it);
    m_sim.unmap(address, bytes);
    m_lost += leak_per_unmap;
  }
  std::optional<std::uint64_t> reserve_range(std::int64_t bytes) override {
    auto a = m_sim.reserve_range(bytes);
    if (a) m_ranges[*a] = bytes;
    return a;
  }
  bool map_at(std::uint64_t base, std::int64_t offset, std::int64_t bytes, std::int64_t page) override {
    if (!in_range(base, offset, bytes) || offset % page || bytes % page)
      throw probes::device_error("fake: map_at outside its range or off a page boundary");
    if (fault()) return false;
    if (!m_sim.map_at(base, offset, bytes, page)) return false;
    for (std::int64_t o = offset; o < offset + bytes; o += page)
      if (!m_pages.insert(base + static_cast<std::uint64_t>(o)).second)
        throw probes::device_error("fake: a page mapped twice");
    return true;
  }
  void unmap_at(std::uint64_t base, std::int64_t offset, std::int64_t bytes, std::int64_t page) override {
    ++unmaps;
    for (std::int64_t o = offset; o < offset + bytes; o += page)
      if (m_pages.erase(base + static_cast<std::uint64_t>(o)) != 1)
        throw probes::device_error("fake: unmap_at of a page that was not mapped");
    m_sim.unmap_at(base, offset, bytes, page);
    m_lost += leak_per_unmap;
  }
  void release_range(std::uint64_t base, std::int64_t bytes) override {
    for (auto p : m_pages)
      if (p >= base && p < base + static_cast<std::uint64_t>(bytes))
        throw probes::device_error("fake: range released with pages still mapped");
    m_ranges.erase(base);
  }
  std::int64_t capacity() const override { return m_sim.capacity(); }
  std::int64_t used() const override { return m_sim.used(); }
  std::int64_t granularity() const override { return m_sim.granularity(); }
  probes::memory_info memory() const override {
    auto m = m_sim.memory();
    m.free -= m_lost;
    if (free_override) m.free = *free_override;
    return m;
  }
  std::string describe() const override { return "fake " + m_sim.describe(); }

  std::size_t live_mappings() const { return m_live.size() + m_pages.size(); }
  std::size_t ranges() const { return m_ranges.size(); }
  // Returns whether [address, address + bytes) lies inside one reserved range.
  bool inside_a_range(std::uint64_t address, std::int64_t bytes) const {
    for (const auto& [b, n] : m_ranges)
      if (address >= b && address + static_cast<std::uint64_t>(bytes) <= b + static_cast<std::uint64_t>(n))
        return true;
    return false;
  }

 private:
  std::optional<int> fault() {
    ++maps;
    if (fail_at_map && maps == *fail_at_map)
      throw probes::device_error("fake: the device failed at map " + std::to_string(maps));
    if (oom_at_map && maps == *oom_at_map) return 1;
    return std::nullopt;
  }
  bool in_range(std::uint64_t base, std::int64_t offset, std::int64_t bytes) const {
    const auto it = m_ranges.find(base);
    return it != m_ranges.end() && offset >= 0 && offset + bytes <= it->second;
  }

  probes::sim_device m_sim;
  std::map<std::uint64_t, std::int64_t> m_live;
  std::map<std::uint64_t, std::int64_t> m_ranges;
  std::set<std::uint64_t> m_pages;
  std::int64_t m_lost = 0;
};

// A block checker that keeps the pattern of every block on the host, as the GPU kernels would: a block
// "written" by another tensor, or planted as corrupt, fails verification and is named.
class fake_checker final : public probes::block_checker {
 public:
  std::optional<std::int32_t> corrupt;  // this tensor's block is overwritten between fill and verify

  void on_alloc(std::int32_t tensor, std::uint64_t address, std::int64_t bytes) override {
    for (const auto& [a, blk] : m_blocks)  // a live block overlapping this one would be overwritten
      if (address < a + static_cast<std::uint64_t>(blk.bytes) &&
          a < address + static_cast<std::uint64_t>(bytes))
        m_overlap = true;
    m_blocks[address] = {tensor, bytes};
    ++m_v.blocks_filled;
    m_v.bytes_filled += bytes;
  }
  void on_free(std::int32_t tensor, std::uint64_t address, std::int64_t bytes) override {
    const auto it = m_blocks.find(address);
    const bool intact =
        it != m_blocks.end() && it->second.tensor == tensor && !(corrupt && *corrupt == tensor);
    if (!intact) {
      m_v.mismatched_words += bytes / 8;
      if (!m_v.first_mismatch) m_v.first_mismatch = tensor;
    }
    if (it != m_blocks.end()) m_blocks.erase(it);
    ++m_v.blocks_verified;
    m_v.bytes_verified += bytes;
  }
  probes::verification finish() override { return m_v; }
  bool overlap_seen() const { return m_overlap; }
  std::size_t live() const { return m_blocks.size(); }

 private:
  struct blk {
    std::int32_t tensor;
    std::int64_t bytes;
  };
  std::map<std::uint64_t, blk> m_blocks;
  probes::verification m_v;
  bool m_overlap = false;
};

}  // namespace headroom::test
