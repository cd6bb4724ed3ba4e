// what_if.cpp: a snapshot's trace under other allocator settings (what_if.hpp).
#include "probes/snapshots/what_if.hpp"

#include <algorithm>

#include "planner/units.hpp"

namespace headroom::probes {

std::vector<what_if_row> what_if(const torch_snapshot& s, const snapshot_trace& t, std::int64_t capacity) {
  struct setting {
    std::string name;
    caching_options o;
  };
  std::vector<setting> settings;
  settings.push_back({"default (no options)", {}});
  caching_options exp;
  exp.expandable_segments = true;
  settings.push_back({"expandable_segments:True", exp});
  for (std::int64_t ms : {128, 512}) {
    caching_options o;
    o.max_split_size = ms * mib;
    settings.push_back({"max_split_size_mb:" + std::to_string(ms), o});
  }
  std::vector<what_if_row> rows;
  for (const auto& st : settings) {
    what_if_row row;
    row.setting = st.name;
    row.replayed = replay_snapshot(s, t, st.o, capacity, false);
    // The least capacity that runs: bisection in 2 MiB steps between the requested peak and what the
    // replay reserved at the full capacity (retries can make it run below that).
    std::int64_t lo = std::max<std::int64_t>(1, row.replayed.peak_requested / (2 * mib)),
                 hi = row.replayed.oom_event ? capacity / (2 * mib)
                                             : (row.replayed.peak_reserved + 2 * mib - 1) / (2 * mib);
    if (row.replayed.oom_event) {
      row.least_capacity = 0;  // does not run at the given capacity
    } else {
      while (lo < hi) {
        const std::int64_t mid = lo + (hi - lo) / 2;
        const auto r = replay_snapshot(s, t, st.o, mid * 2 * mib, false);
        if (r.oom_event)
          lo = mid + 1;
        else
          hi = mid;
      }
      row.least_capacity = hi * 2 * mib;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace headroom::probes
