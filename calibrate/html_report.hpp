// html_report.hpp: one self-contained HTML file (inline CSS and SVG, no script, no network) that shows a
// set of records as a team would share it: a table of every record with its verdict and the command line
// that made it; the plan's predicted stages against the capacity, each record on its own scale; the
// calibration with its units, its domain and a residual plot; per measured snapshot the memory timeline
// stacked by top user frame, the largest allocations and the segments at the peak, and the real allocator
// beside the emulation with the what-if table (report_snapshot.hpp); each probe record's timeline as the
// record carries it. Nothing is replayed: records are all it reads. A section with nothing to show is left
// out or says why.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "calibration.hpp"
#include "probes/records/measurement_record.hpp"

namespace headroom::calibrate {

// Bounds that keep a report's time and size in proportion (README, limits): the records one command reads,
// and the memory timelines one report draws (the first in the order given; the rest are named).
inline constexpr std::size_t max_records = 10'000;
inline constexpr std::size_t max_timelines = 50;

// What a report shows beside the measurement records: the command line each record states (its
// "environment.command_line", "" when it has none; in the records' order, or empty), and the
// `probe snapshot --json` records (origin, document), drawn beside the snapshot record of the same source.
struct report_extras {
  std::vector<std::string> command_lines;
  std::vector<std::pair<std::string, nlohmann::json>> replays;
};

// Returns the HTML document.
std::string html_report(const std::vector<probes::measurement_record>& records,
                        const std::optional<calibration>& cal, const std::string& title,
                        const report_extras& extras = {});

}  // namespace headroom::calibrate
