// html_report.hpp: one self-contained HTML file (inline CSS and SVG, no script, no network) that shows a
// set of records: predicted vs measured per case as bars, the residuals, the reserve's fitted parts when a
// calibration is given, and each probe record's memory timeline as the record carries it (measured or
// emulated, as the record says). Nothing is replayed: records are all it reads.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "calibration.hpp"
#include "probes/records/measurement_record.hpp"

namespace headroom::calibrate {

// Bounds that keep a report's time and size in proportion (README, limits): the records one command reads,
// and the memory timelines one report draws (the first in the order given; the rest are named).
inline constexpr std::size_t max_records = 10'000;
inline constexpr std::size_t max_timelines = 50;

// Returns the HTML document.
std::string html_report(const std::vector<probes::measurement_record>& records,
                        const std::optional<calibration>& cal, const std::string& title);

}  // namespace headroom::calibrate
