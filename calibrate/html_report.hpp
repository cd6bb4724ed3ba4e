// html_report.hpp: one self-contained HTML file (inline CSS and SVG, no script, no network) that shows a
// set of records: predicted vs measured per case as bars, the residuals, the reserve's fitted parts when a
// calibration is given, and each case's memory timeline (the step trace re-built from the record's inputs
// and replayed on the simulated device: labelled emulated).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "calibration.hpp"
#include "probes/measurement.hpp"

namespace headroom::calibrate {

// Returns the HTML document.
std::string html_report(const std::vector<probes::measurement_record>& records,
                        const std::optional<calibration>& cal, const std::string& title);

}  // namespace headroom::calibrate
