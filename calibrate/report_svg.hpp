// report_svg.hpp: the pieces the HTML report (html_report.hpp) is drawn with: escaping, readable byte
// figures, and the SVG charts that read only the planner's terms and a calibration's observations (the
// plan's stages against the capacity, the residuals). Every chart is inline SVG with a <title> on each
// mark for hover detail: no script, nothing fetched.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace headroom::calibrate::report {

// Returns `s` as HTML text or attribute value: every string from a record goes through this, so a model
// name or a file name with markup ("<script>") is shown, never run.
std::string esc(const std::string& s);

// Returns `bytes` readable: "12.34 GiB" from 1 GiB, "512.0 MiB" from 1 MiB, "3.0 KiB", "12 B" (never an
// exponent); negative figures keep their sign.
std::string bytes_text(double bytes);

// Returns the file name of `path` (the part after the last '/').
std::string short_name(const std::string& path);

// One record's predicted stages, bytes, for the stacked bar: state (persistent + transient), activations,
// the step's transient peak (max of the backward working set and the output phase), the fixed part of the
// reserve, the rest of the reserve; against the capacity, with the measured or emulated footprint when
// there is one.
struct stage_bar {
  std::string name, what_measured;
  std::int64_t state = 0, activations = 0, peak_extra = 0, fixed = 0, reserve_rest = 0, capacity = 0;
  std::optional<double> measured;
};

// Returns the SVG of the bars, one row per record, each on its own scale (its largest figure), the name
// above its bar.
std::string stage_bars_svg(const std::vector<stage_bar>& bars);

// One point of the residual plot: the reserve predicted for a record and what it had to cover, bytes.
struct residual_point {
  std::string name;
  double predicted = 0, needed = 0;
};

// Returns the SVG scatter of residual (needed - predicted, GiB) against the predicted reserve (GiB).
std::string residual_svg(const std::vector<residual_point>& points);

}  // namespace headroom::calibrate::report
