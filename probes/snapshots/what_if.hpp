// what_if.hpp: a snapshot's trace under other allocator settings: the reserved peak and the least capacity
// at which it runs, per setting, every setting from the same starting state; and the one-line answers
// built on them (the expandable-segments verdict, the least card that runs the trace).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "probes/snapshots/replay.hpp"

namespace headroom::probes {

// Returns `t` as every setting replays it in the what-if table: a cold trace as it is; a warm one with its
// reconstructed start set aside, so that the blocks alive before recording are allocated first under every
// setting (the reconstructed segments are the recorded policy's, and no other policy could adopt them).
snapshot_trace common_start(const snapshot_trace& t);
// Returns the starting state `common_start` gives, in words.
std::string common_start_text(const snapshot_trace& t);

// Returns the least capacity, in bytes (2 MiB steps), at which `t` runs under `o` without running out of
// memory, found by bisection between the requested peak and the reserved peak of `at_full` (its replay under
// `o` at the full capacity); 0 when `at_full` ran out of memory.
std::int64_t least_capacity(const torch_snapshot& s, const snapshot_trace& t, const caching_options& o,
                            const snapshot_replay& at_full);

// One row of the what-if table: a setting, its emulated reserved peak, and the least capacity (2 MiB
// steps) at which the trace runs without running out of memory under it.
struct what_if_row {
  std::string setting;
  caching_options options;
  snapshot_replay replayed;
  std::int64_t least_capacity = 0;
};
// Returns the rows for the default settings, expandable segments, max_split_size 128 and 512 MiB, and the
// recorded settings when they are none of those, every one replayed from `common_start(t)`.
std::vector<what_if_row> what_if(const torch_snapshot& s, const snapshot_trace& t, std::int64_t capacity);

// The expandable-segments verdict: the recorded settings with expandable segments off and on, from the same
// starting state, by two figures of each replay (what_if_row):
//   reserved peak  - the most the allocator holds on a card large enough that it never has to free its cache
//                    (the replay at the full capacity); saving_bytes = peak_off - peak_on;
//   least capacity - the smallest allocator share (2 MiB steps) on which the step runs, freeing its cache
//                    when a request fails; least_change_bytes = least_on - least_off (negative: it falls).
// The two differ in sign when the cache that expandable segments save is what the allocator frees under
// pressure anyway. Whether a step fits is the least capacity's question, so the verdict follows it: worth
// setting when the least capacity falls by at least worth_setting_fraction of least_off.
struct expandable_verdict {
  std::int64_t peak_off = 0, peak_on = 0, least_off = 0, least_on = 0;
  std::int64_t saving_bytes = 0, least_change_bytes = 0;
  bool oom_off = false, oom_on = false;
  bool worth_setting = false;
};
inline constexpr double worth_setting_fraction = 0.01;
expandable_verdict expandable_from_rows(const std::vector<what_if_row>& rows, const torch_snapshot& s);

// Returns the one-line verdict, "expandable_segments: lowers the reserved peak by 56.00 MiB (...); the least
// capacity that runs this step rises by 52.00 MiB (...): not worth it (...)".
std::string expandable_line(const expandable_verdict& v, const std::string& start);

// Returns what the what-if table's two figures are, in one line (the same definitions as expandable_verdict's).
std::string what_if_definitions();

}  // namespace headroom::probes
