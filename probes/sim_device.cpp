// sim_device.cpp: the simulated device (see sim_device.hpp).
#include "sim_device.hpp"

#include <algorithm>

#include "planner/errors.hpp"
#include "planner/format.hpp"

namespace headroom::probes {

sim_device::sim_device(std::int64_t capacity, std::int64_t granularity)
    : m_capacity(capacity), m_granularity(granularity) {
  if (capacity <= 0) throw bad_input("gpu-mem", "device capacity must be positive");
  if (granularity <= 0 || granularity > capacity)
    throw bad_input("granularity", "must be positive and below capacity");
}

std::optional<std::uint64_t> sim_device::map(std::int64_t bytes) {
  const std::int64_t rounded = round_up(bytes, m_granularity);
  if (rounded > m_capacity - m_used) return std::nullopt;
  m_used += rounded;
  m_peak = std::max(m_peak, m_used);
  const std::uint64_t a = m_next;
  m_next += static_cast<std::uint64_t>(rounded);
  return a;
}

void sim_device::unmap(std::uint64_t, std::int64_t bytes) {
  m_used -= round_up(bytes, m_granularity);
}

std::string sim_device::describe() const {
  return "sim (" + gib_str(m_capacity) + " GiB, " + trim(static_cast<double>(m_granularity) / (1 << 20), 3) +
         " MiB granularity)";
}

}  // namespace headroom::probes
