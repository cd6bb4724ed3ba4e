// html_report.hpp: one self-contained HTML file (inline CSS and SVG, no script, no network) that shows a
// set of records as a team would share it: each `headroom plan --json` with its verdict and its per-GPU
// totals as the plan printed them (report_plan.hpp); a table of every record with its verdict and the
// command line that made it (for an observation, the plan flags of its run); every case's predicted totals
// (the plan's two: state + activations + reserve, and step peak + fixed overheads) with what was measured
// beside them, all on one scale against the capacity; the calibration with its units (the activation factor
// among them), its domain and a residual plot labelled in text; per measured snapshot the memory timeline
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
// the memory timelines one report draws (the first in the order given; the rest are named), and the rows of
// its chart of totals.
inline constexpr std::size_t max_records = 10'000;
inline constexpr std::size_t max_timelines = 50;
// The rows one chart of predicted totals draws (the plans, then the records in the order given).
inline constexpr std::size_t max_bars = 200;

// What a report shows beside the measurement records: the command line each record states (its
// "environment.command_line", "" when it has none; in the records' order, or empty), the
// `probe snapshot --json` records (origin, document), drawn beside the snapshot record of the same source,
// and the `headroom plan --json` documents (origin, document; report_plan.hpp reads them).
struct report_extras {
  std::vector<std::string> command_lines;
  std::vector<std::pair<std::string, nlohmann::json>> replays;
  std::vector<std::pair<std::string, nlohmann::json>> plans;
};

// Returns the HTML document. Throws bad_input naming the file and field when a plan is not what
// `headroom plan --json` writes (report_plan.hpp parse_plan).
std::string html_report(const std::vector<probes::measurement_record>& records,
                        const std::optional<calibration>& cal, const std::string& title,
                        const report_extras& extras = {});

}  // namespace headroom::calibrate
