// what_if.hpp: a snapshot's trace under other allocator settings: the reserved peak and the least capacity
// at which it runs, per setting.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "probes/snapshots/replay.hpp"

namespace headroom::probes {

// One row of the what-if table: a setting, its emulated reserved peak, and the least capacity (2 MiB
// steps) at which the trace runs without running out of memory under it.
struct what_if_row {
  std::string setting;
  snapshot_replay replayed;
  std::int64_t least_capacity = 0;
};
std::vector<what_if_row> what_if(const torch_snapshot& s, const snapshot_trace& t, std::int64_t capacity);

}  // namespace headroom::probes
