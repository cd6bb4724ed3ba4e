// timeline.hpp: a step's memory over its events as a record carries it and the report draws it: the
// requested, allocated and reserved bytes reduced to columns (each the largest value of its events, so no
// peak is lost) and the phases as runs of events. Built from a replay by probes/trace/timeline_svg.hpp;
// drawn here, so a reader of records draws without replaying anything.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace headroom::records {

struct timeline_column {
  std::int64_t first = 0, end = 0;                          // events [first, end)
  std::int64_t requested = 0, allocated = 0, reserved = 0;  // bytes, the largest over those events
};

struct phase_run {
  std::int64_t first = 0, end = 0;  // events [first, end)
  std::string phase;                // state, forward, output, backward, optimizer
};

struct timeline {
  std::int64_t events = 0;  // events replayed
  std::vector<timeline_column> columns;
  std::vector<phase_run> phases;
};

// Returns the timeline as JSON: {"events", "columns": [[first, end, requested, allocated, reserved], ...],
// "phases": [[first, end, phase], ...]}.
nlohmann::json timeline_to_json(const timeline& t);
// Returns the timeline in `j`. Throws bad_input(origin, ...) naming what is malformed: columns or runs
// out of order or outside the events, negative bytes, an unknown phase.
timeline timeline_from_json(const nlohmann::json& j, const std::string& origin);

// Returns the SVG document of `t` against a device of `capacity` bytes, titled `title` (wrapped at "; ").
std::string timeline_svg(const timeline& t, std::int64_t capacity, const std::string& title);

}  // namespace headroom::records
