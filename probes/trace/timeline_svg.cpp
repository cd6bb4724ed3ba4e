// timeline_svg.cpp: a replay reduced to its timeline (timeline_svg.hpp); the drawing is
// probes/records/timeline.cpp's.
#include "probes/trace/timeline_svg.hpp"

#include <algorithm>

namespace headroom::probes {

records::timeline reduce_timeline(const step_trace& t, const replay_result& r, std::size_t max_columns) {
  records::timeline out;
  const std::size_t n = r.timeline.size();
  out.events = static_cast<std::int64_t>(n);
  const std::size_t cols =
      std::max<std::size_t>(1, std::min<std::size_t>(n, std::max<std::size_t>(1, max_columns)));
  for (std::size_t c = 0; c < cols && n > 0; ++c) {
    const std::size_t a = c * n / cols, b = std::max(a + 1, (c + 1) * n / cols);
    records::timeline_column col{static_cast<std::int64_t>(a), static_cast<std::int64_t>(b), 0, 0, 0};
    for (std::size_t i = a; i < b; ++i) {
      col.requested = std::max(col.requested, r.timeline[i].requested);
      col.allocated = std::max(col.allocated, r.timeline[i].allocated);
      col.reserved = std::max(col.reserved, r.timeline[i].reserved);
    }
    out.columns.push_back(col);
  }
  // Phases, as runs of events.
  std::size_t start = 0;
  for (std::size_t i = 1; i <= n; ++i) {
    if (i < n && t.events[i].when == t.events[start].when) continue;
    out.phases.push_back(
        {static_cast<std::int64_t>(start), static_cast<std::int64_t>(i), to_string(t.events[start].when)});
    start = i;
  }
  return out;
}

std::string timeline_svg(const step_trace& t, const replay_result& r, std::int64_t capacity,
                         const std::string& title) {
  return records::timeline_svg(reduce_timeline(t, r, 1200), capacity, title);
}

}  // namespace headroom::probes
