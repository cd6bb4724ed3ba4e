// validate_command.cpp: `headroom validate` (see validate_command.hpp): reads the packs, has the library
// judge every row and summarise the measured ones (calibrate/validation.hpp), and prints text or JSON.
#include "validate_command.hpp"

#include <algorithm>
#include <iostream>

#include "calibrate/validation.hpp"
#include "exit_codes.hpp"
#include "planner/format.hpp"
#include "planner/model_files.hpp"
#include "probes/records/schema.hpp"

namespace headroom::cli {

CLI::App* add_validate_command(CLI::App& app, validate_options& o) {
  auto* c = app.add_subcommand("validate",
                               "Compare the planner with published figures and fit / out-of-memory outcomes");
  c->add_option("--pack", o.packs,
                "Validation pack, repeatable (default: presets/validation/published.json and measured.json)");
  c->add_flag("--json", o.json,
              "Write the results as JSON (schema " + records::schema_of(records::kind::validate) + ")");
  return c;
}

namespace {

std::string validate_percent(double fraction) {
  return (fraction >= 0 ? "+" : "") + fixed(100 * fraction, 1) + "%";
}

std::string validate_stats_line(const calibrate::error_stats& s) {
  if (s.n == 0) return "no rows";
  return std::to_string(s.n) + " rows, mean |error| " + fixed(100 * s.mean_abs, 1) + "%, worst " +
         validate_percent(s.worst) + " (" + printable(s.worst_id) + ")";
}

// Prints the measured rows: predicted against measured, the skipped rows with why, and the errors before and
// after the calibration fitted on the rows marked for it.
void validate_print_measured(std::ostream& out, const std::vector<calibrate::validation_result>& results,
                             const calibrate::measured_summary& s) {
  if (s.priced + s.skipped == 0) return;
  out << "\nmeasured memory figures: " << s.priced << " priced, " << s.skipped
      << " skipped (a setting the planner does not model)\n";
  for (const auto& r : results) {
    if (r.judged) continue;
    out << "\n"
        << (r.skipped  ? "skipped  "
            : r.fit_on ? "measured (fit on)"
                       : "measured ")
        << "  " << printable(r.id) << "\n  published: " << printable(r.published) << "\n";
    if (r.skipped) {
      out << "  why: " << printable(r.why, 1000) << "\n";
    } else {
      out << "  predicted: " << printable(r.predicted) << "   (error " << validate_percent(r.error) << ")\n";
      if (r.calibrated_bytes)
        out << "  calibrated: " << fixed(*r.calibrated_bytes / (1024.0 * 1024 * 1024), 2) << " GiB"
            << (r.calibrated_band ? " +/- " + fixed(*r.calibrated_band / (1024.0 * 1024 * 1024), 2) : std::string())
            << "   (error "
            << validate_percent(*r.calibrated_error) << (r.fit_on ? ", in the fit" : ", held out") << ")\n";
      for (const auto& line : r.outside_domain)
        out << "    outside the calibration's domain: " << printable(line, 300) << "\n";
    }
    out << "  source: " << printable(r.citation, 1000) << "\n";
    if (!r.expresses.empty()) out << "  expressed as: " << printable(r.expresses, 1000) << "\n";
  }
  out << "\nmeasured rows, uncalibrated (no calibration: reserved peaks through the caching allocator's "
         "emulation, device figures with the default fixed overheads): "
      << validate_stats_line(s.uncalibrated) << "\n";
  for (const auto& [figure, e] : s.uncalibrated_by_figure)
    out << "  " << printable(figure) << ": " << validate_stats_line(e) << "\n";
  if (s.uncalibrated_moe.n) out << "  mixture-of-experts: " << validate_stats_line(s.uncalibrated_moe) << "\n";
  out << "  held out of the calibration: " << validate_stats_line(s.uncalibrated_held_out) << "\n";
  if (!s.calibrated) {
    out << "no calibration: " << printable(s.calibration, 1000) << "\n";
    return;
  }
  out << "calibration fitted on " << s.fitted_on.size() << " row(s), " << printable(s.fit_rule, 300) << ":";
  for (const auto& id : s.fitted_on) out << "\n  " << printable(id);
  out << "\n  " << printable(s.calibration, 1000) << "\n";
  out << "  verdict: "
      << (s.weak.empty() ? std::string("usable (calibrate/strength.hpp's rule)")
                         : "too weak to use: " + printable(s.weak, 300) +
                               " (plan --calibration would keep the default reserve; the calibrated rows below "
                               "show what the fit would have given)")
      << "\n";
  out << "calibrated, held-out rows inside its domain: " << validate_stats_line(s.calibrated_held_out) << "\n";
  out << "calibrated, held-out rows outside its domain (the planner warns there): "
      << validate_stats_line(s.calibrated_outside_domain) << "\n";
  out << "coverage: " << s.covered << " of " << s.coverage_rows
      << " held-out rows measured inside the calibrated prediction's printed +/- (plan --calibration's band)"
      << (s.no_spread.empty() ? "" : "; " + printable(s.no_spread, 200)) << "\n";
  out << "calibrated, the rows it was fitted on: " << validate_stats_line(s.calibrated_in_fit) << "\n";
}

// Prints the verdicts; every string from the pack is sanitised (printable) before it reaches the terminal.
void print_text(std::ostream& out, const std::vector<calibrate::validation_result>& results,
                const std::string& path, int disagree) {
  const auto judged = static_cast<std::size_t>(
      std::count_if(results.begin(), results.end(), [](const auto& r) { return r.judged; }));
  out << "headroom validate: " << judged << " published figures and outcomes (" << printable(path)
      << ")\npredicted by the analytic model (not measured) against what each source published\n";
  for (const auto& r : results) {
    if (!r.judged) continue;
    out << "\n" << (r.agrees ? "agrees   " : "DISAGREES") << "  " << printable(r.id) << "\n";
    out << "  published: " << printable(r.published) << "\n  predicted: " << printable(r.predicted);
    if (r.has_error) out << "   (error " << (r.error >= 0 ? "+" : "") << fixed(100 * r.error, 2) << "%)";
    out << "\n";
    if (!r.why.empty()) out << "  " << printable(r.why, 1000) << "\n";
    out << "  source: " << printable(r.citation, 1000) << "\n";
    if (!r.expresses.empty()) out << "  expressed as: " << printable(r.expresses, 1000) << "\n";
  }
  out << "\n" << judged - static_cast<std::size_t>(disagree) << " of " << judged << " agree\n";
}

}  // namespace

int run_validate(const validate_options& o) {
  const std::vector<std::string> paths =
      o.packs.empty()
          ? std::vector<std::string>{calibrate::default_validation_pack(), calibrate::default_measured_pack()}
          : o.packs;
  std::vector<calibrate::validation_row> rows;
  for (const auto& path : paths) {
    auto more = calibrate::validation_rows(read_json_file(path), path);
    rows.insert(rows.end(), more.begin(), more.end());
  }
  std::vector<calibrate::validation_result> results;
  for (const auto& row : rows) results.push_back(calibrate::evaluate(row));
  const auto measured = calibrate::summarise_measured(rows, results);
  const int disagree = calibrate::disagreements(results);
  std::string shown = paths.front();
  for (std::size_t i = 1; i < paths.size(); ++i) shown += ", " + paths[i];
  if (o.json)
    std::cout << calibrate::validation_to_json(results, paths.front(), &measured).dump(2) << "\n";
  else {
    print_text(std::cout, results, shown, disagree);
    validate_print_measured(std::cout, results, measured);
  }
  return disagree ? exit_validation_failed : exit_fits;
}

}  // namespace headroom::cli
