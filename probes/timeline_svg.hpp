// timeline_svg.hpp: bytes over the events of one step as an SVG: requested, allocated and reserved lines,
// the capacity line, phases shaded.
#pragma once

#include <string>

#include "replay.hpp"
#include "step_trace.hpp"

namespace headroom::probes {

// Returns the SVG document. The replay must have recorded its timeline.
std::string timeline_svg(const step_trace& t, const replay_result& r, std::int64_t capacity,
                         const std::string& title);

}  // namespace headroom::probes
