// option_units.hpp: the units people write on the command line. Memory options take GiB by default and
// accept "80GB" (10^9 bytes), "80GiB" or "80G" (2^30), "81920MiB", "0.5TiB"; sequence lengths accept "8k" /
// "32K" (1024-based, as frameworks count sequence lengths). A plain number keeps its meaning. Used as CLI11
// transforms, so every option that takes them reads them the same way.
#pragma once

#include <string>

namespace headroom::cli {

// Returns `text` (a number with an optional memory unit) as GiB, written as a decimal number CLI11 then reads;
// throws CLI::ValidationError naming the unit when it is not one of B, KB, MB, GB, TB (powers of 1000), KiB,
// MiB, GiB, TiB or K, M, G, T (powers of 1024), case-insensitive.
std::string gib_from_text(const std::string& text);
// Returns `text` (an integer with an optional k / K suffix, 1024 each) as a plain integer; throws
// CLI::ValidationError otherwise.
std::string count_from_text(const std::string& text);

}  // namespace headroom::cli
