// report_svg.hpp: the pieces the HTML report (html_report.hpp) is drawn with: escaping, byte figures in one
// unit per column, and the SVG charts that read only the planner's terms and a calibration's observations
// (the plan's totals against the capacity with what was measured beside them, the residuals). Every figure
// a chart shows is printed as text beside its mark, so that a printed or exported page (PDF, PNG) keeps it;
// the <title> on each mark only repeats it for hover. No script, nothing fetched.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace headroom::calibrate::report {

// Returns `s` as HTML text or attribute value: every string from a record goes through this, so a model
// name or a file name with markup ("<script>") is shown, never run.
std::string esc(const std::string& s);

// Returns `bytes` readable for prose: "12.34 GiB" from 1 GiB, "512.0 MiB" from 1 MiB, "3.0 KiB", "12 B"
// (never an exponent); negative figures keep their sign. Tables use byte_unit instead (one unit a column).
std::string bytes_text(double bytes);

// Returns `bytes` in GiB with `decimals` decimals and the unit: "79.6 GiB" (as `headroom plan` prints it
// with decimals 1).
std::string gib_text(double bytes, int decimals);

// Returns the file name of `path` (the part after the last '/').
std::string short_name(const std::string& path);

// One unit for a whole column of byte figures: GiB (2 decimals) when its largest figure is at least
// 1 GiB, MiB (1 decimal) when at least 1 MiB, else KiB (1 decimal).
struct byte_unit {
  std::string name;  // "GiB"
  double bytes = 1;  // bytes in one unit
  int decimals = 2;
};
// Returns the unit for a column holding `figures` (bytes; signs ignored).
byte_unit unit_for(const std::vector<double>& figures);
// Returns `bytes` in unit `u`, without the unit's name ("12.34").
std::string in_unit(double bytes, const byte_unit& u);

// One case's predicted totals, as `headroom plan` prints them for one stage, and what was measured on it.
// Two stacked bars: the reference total (state + activations + reserve) and the step peak + fixed overheads
// (state + activations + library workspaces + the larger of the backward working set and the output phase +
// fixed overheads); the totals are the planner's figures, the parts stack to them exactly.
struct bar_row {
  std::string name;    // the row's title (a file name)
  std::string detail;  // a second line under it ("plan, stage 0 of 2", "observation reserved_peak")
  std::int64_t state = 0, activations = 0, reserve = 0, total = 0;
  std::int64_t workspaces = 0, peak_extra = 0, fixed_overheads = 0, peak_total = 0;
  std::int64_t capacity = 0;
  std::optional<double> measured;  // bytes, when the row has a measured or emulated figure
  std::string what_measured;       // "measured reserved peak (torch.cuda.max_memory_reserved)"
};

// Bytes a chart may leave between a label and a capacity line, in chart pixels: labels are placed this far
// clear of it (tests/report_test.cpp checks it from the SVG).
inline constexpr double label_clearance = 4;
// The width a chart label of `chars` characters takes at font-size 11, at most, in chart pixels.
double label_width(std::size_t chars);

// Returns the SVG of the rows, all on one scale in GiB (axis on top), the capacity of each row dashed across
// it (or named in its title column when it lies far beyond every figure), every total and measured figure
// printed beside its bar, clear of the capacity line. Scales to the page's width (viewBox).
std::string bars_svg(const std::vector<bar_row>& rows);

// One point of the residual plot: the reserve predicted for a record and what it had to cover, bytes.
struct residual_point {
  std::string name;
  double predicted = 0, needed = 0;
};

// Returns the SVG scatter of residual (needed - predicted, GiB) against the predicted reserve (GiB); each
// point labelled in text with its number (the residual table's #), and with its name and residual when
// there are few enough to read.
std::string residual_svg(const std::vector<residual_point>& points);

}  // namespace headroom::calibrate::report
