// units.hpp: byte units. Bytes are integers everywhere; GiB and MiB exist only for printing and for flags.
#pragma once

#include <cstdint>

namespace headroom {

inline constexpr std::int64_t kib = 1024;
inline constexpr std::int64_t mib = 1024 * kib;  // 2^20 bytes: write `mib`, not (1 << 20)
inline constexpr std::int64_t gib = 1024 * mib;  // 2^30 bytes

// Returns bytes expressed in GiB (2^30 bytes), for printing only.
inline constexpr double to_gib(std::int64_t bytes) {
  return static_cast<double>(bytes) / static_cast<double>(gib);
}

// Returns bytes expressed in MiB (2^20 bytes), for printing only.
inline constexpr double to_mib(std::int64_t bytes) {
  return static_cast<double>(bytes) / static_cast<double>(mib);
}

}  // namespace headroom
