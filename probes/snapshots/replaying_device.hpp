// replaying_device.hpp: the device a snapshot replay runs on (internal to probes/snapshots/): a simulated
// device that hands the emulation the real allocator's segment addresses while the replay agrees with it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "planner/units.hpp"
#include "probes/devices/sim_device.hpp"

namespace headroom::probes {

// A device that hands the emulation the real segment addresses, in the order the real trace allocated
// them, while the sizes agree; the bytes are accounted by a simulated device of the given capacity.
class replaying_device final : public device {
 public:
  // `real_maps`: the addresses of the real trace's segment_map events, in order. A range is reserved just
  // before its first page is mapped, so while the replay agrees its base is the next real map's address.
  replaying_device(std::int64_t capacity, std::vector<std::pair<std::uint64_t, std::int64_t>> real,
                   std::vector<std::uint64_t> real_maps = {})
      : m_sim(capacity, 2 * mib), m_real(std::move(real)), m_real_maps(std::move(real_maps)) {}
  std::optional<std::uint64_t> map(std::int64_t bytes) override {
    auto a = m_sim.map(bytes);
    if (!a) return std::nullopt;
    maps.push_back({*a, bytes});
    if (m_next < m_real.size() && m_real[m_next].second == bytes && m_in_step) {
      const auto r = m_real[m_next++].first;
      maps.back().first = r;
      return r;
    }
    if (m_next < m_real.size()) ++m_next;
    return a;
  }
  void unmap(std::uint64_t address, std::int64_t bytes) override {
    m_sim.unmap(address, bytes);
    unmaps.push_back({address, bytes});
  }
  std::optional<std::uint64_t> reserve_range(std::int64_t bytes) override {
    auto a = m_sim.reserve_range(bytes);
    if (!a || !m_in_step || m_next_map >= m_real_maps.size()) return a;
    return m_real_maps[m_next_map];
  }
  bool map_at(std::uint64_t base, std::int64_t offset, std::int64_t bytes, std::int64_t page) override {
    if (!m_sim.map_at(base, offset, bytes, page)) return false;
    ++m_next_map;
    maps.push_back({base + static_cast<std::uint64_t>(offset), bytes});
    return true;
  }
  void unmap_at(std::uint64_t base, std::int64_t offset, std::int64_t bytes, std::int64_t page) override {
    m_sim.unmap_at(base, offset, bytes, page);
    unmaps.push_back({base + static_cast<std::uint64_t>(offset), bytes});
  }
  void release_range(std::uint64_t base, std::int64_t bytes) override { m_sim.release_range(base, bytes); }
  std::int64_t capacity() const override { return m_sim.capacity(); }
  std::int64_t used() const override { return m_sim.used(); }
  std::int64_t granularity() const override { return m_sim.granularity(); }
  memory_info memory() const override { return m_sim.memory(); }
  std::string describe() const override { return "snapshot replay over " + m_sim.describe(); }

  // Stop handing out real addresses once the emulation has diverged.
  void diverged() { m_in_step = false; }

  std::vector<std::pair<std::uint64_t, std::int64_t>> maps, unmaps;

 private:
  sim_device m_sim;
  std::vector<std::pair<std::uint64_t, std::int64_t>> m_real;
  std::vector<std::uint64_t> m_real_maps;
  std::size_t m_next = 0, m_next_map = 0;
  bool m_in_step = true;
};

}  // namespace headroom::probes
