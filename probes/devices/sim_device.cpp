// sim_device.cpp: the simulated device (see sim_device.hpp).
#include "probes/devices/sim_device.hpp"

#include <algorithm>

#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/units.hpp"

namespace headroom::probes {

sim_device::sim_device(std::int64_t capacity, std::int64_t granularity)
    : m_capacity(capacity), m_granularity(granularity) {
  if (capacity <= 0) throw bad_input("gpu-mem", "device capacity must be positive");
  if (granularity <= 0 || granularity > capacity)
    throw bad_input("granularity", "must be positive and below capacity");
}

bool sim_device::take(std::int64_t bytes) {
  if (bytes > m_capacity - m_used) return false;
  m_used += bytes;
  m_peak = std::max(m_peak, m_used);
  return true;
}

std::optional<std::uint64_t> sim_device::map(std::int64_t bytes) {
  const std::int64_t rounded = round_up(bytes, m_granularity);
  if (!take(rounded)) return std::nullopt;
  const std::uint64_t a = m_next;
  m_next += static_cast<std::uint64_t>(rounded);
  return a;
}

void sim_device::unmap(std::uint64_t, std::int64_t bytes) {
  m_used -= round_up(bytes, m_granularity);
}

std::optional<std::uint64_t> sim_device::reserve_range(std::int64_t bytes) {
  // Address space only: nothing is counted until pages are mapped inside it.
  const std::uint64_t a = m_next;
  m_next += static_cast<std::uint64_t>(round_up(bytes, m_granularity));
  return a;
}

bool sim_device::map_at(std::uint64_t, std::int64_t, std::int64_t bytes, std::int64_t) {
  return take(round_up(bytes, m_granularity));
}

void sim_device::unmap_at(std::uint64_t, std::int64_t, std::int64_t bytes, std::int64_t) {
  m_used -= round_up(bytes, m_granularity);
}

void sim_device::release_range(std::uint64_t, std::int64_t) {}

std::string sim_device::describe() const {
  return "sim (" + gib_str(m_capacity) + " GiB, " + trim(to_mib(m_granularity), 3) +
         " MiB granularity)";
}

}  // namespace headroom::probes
