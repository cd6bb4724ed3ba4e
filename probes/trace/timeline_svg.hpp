// timeline_svg.hpp: bytes over the events of one replayed step as a timeline (probes/records/timeline.hpp:
// requested, allocated and reserved reduced to columns, phases as runs) and as an SVG drawn from it.
#pragma once

#include <cstddef>
#include <string>

#include "probes/records/timeline.hpp"
#include "probes/trace/replay.hpp"
#include "probes/trace/step_trace.hpp"

namespace headroom::probes {

// Returns the replay's timeline reduced to at most `max_columns` columns, each the largest value of its
// events. The replay must have recorded its timeline.
records::timeline reduce_timeline(const step_trace& t, const replay_result& r, std::size_t max_columns);

// Returns the SVG document (1200 columns at most). The replay must have recorded its timeline.
std::string timeline_svg(const step_trace& t, const replay_result& r, std::int64_t capacity,
                         const std::string& title);

}  // namespace headroom::probes
