// format.hpp: how numbers are written for people: GiB with a fixed number of decimals, and counts in the
// seed's engineering notation (175e9, 2.869e9). Bytes stay integers until this point.
#pragma once

#include <cstdint>
#include <string>

namespace headroom {

// Returns bytes / 2^30 with `decimals` decimals, e.g. gib_str(2.8e12) == "2607.7".
std::string gib_str(std::int64_t bytes, int decimals = 1);
// Returns x with `decimals` decimals.
std::string fixed(double x, int decimals);
// Returns x in engineering notation with up to 4 significant digits: 175e9, 2.869e9, 350e9, 80.
std::string eng(double x);
// Returns x without trailing zeros after at most `decimals` decimals: 34, 2.5, 10.333.
std::string trim(double x, int decimals = 3);

}  // namespace headroom
