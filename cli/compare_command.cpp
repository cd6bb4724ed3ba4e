// compare_command.cpp: `headroom compare` (see compare_command.hpp). Parsing and printing only: the comparison
// lives in calibrate/compare.cpp.
#include "compare_command.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "calibrate/compare.hpp"
#include "exit_codes.hpp"
#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "record_files.hpp"

namespace headroom::cli {

CLI::App* add_compare_command(CLI::App& app, compare_options& o) {
  auto* c = app.add_subcommand("compare", "List what moved between two record sets (regression check)");
  c->add_option("baseline", o.baseline, "Baseline record file or directory")->required();
  c->add_option("new", o.fresh, "New record file or directory")->required();
  c->add_option("--tolerance", o.tolerance_pct, "Percent a byte figure may move")->capture_default_str();
  c->add_option("--tolerance-mib", o.tolerance_mib, "MiB a byte figure may move (the larger bound applies)")
      ->capture_default_str();
  return c;
}

namespace {

// One moved figure as a line of the comparison, with the change its tolerance allowed.
std::string moved_line(const calibrate::moved_figure& m) {
  char line[400];
  const std::string figure = printable(m.figure, 80);
  const char* label = !m.exceeds ? "moved     " : m.worse ? "REGRESSION" : "improved  ";
  switch (m.unit) {
    case calibrate::figure_unit::bytes:
      std::snprintf(line, sizeof line, "%s %s: %s -> %s (%+.1f MiB, %+.2f%%; tolerance %.1f MiB)", label,
                    figure.c_str(), gib_text(m.old_value).c_str(), gib_text(m.new_value).c_str(),
                    (m.new_value - m.old_value) / (1 << 20),
                    m.old_value != 0 ? 100 * (m.new_value - m.old_value) / std::fabs(m.old_value) : 0.0,
                    m.allowed / (1 << 20));
      break;
    case calibrate::figure_unit::fraction:
      std::snprintf(line, sizeof line, "%s %s: %.4f -> %.4f (tolerance %.4f)", label, figure.c_str(),
                    m.old_value, m.new_value, m.allowed);
      break;
    case calibrate::figure_unit::count:
      std::snprintf(line, sizeof line, "%s %s: %.0f -> %.0f (%+.0f; tolerance %.2f)", label, figure.c_str(),
                    m.old_value, m.new_value, m.new_value - m.old_value, m.allowed);
      break;
  }
  return std::string(line) + "   [" + printable(m.key) + "]";
}

// True when both sides are the same files (a set compared with itself: the same directory or files twice, in
// any spelling).
bool same_record_files(const std::vector<probes::measurement_record>& a,
                       const std::vector<probes::measurement_record>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::error_code ec;
    if (!std::filesystem::equivalent(a[i].origin, b[i].origin, ec) || ec) return false;
  }
  return true;
}

}  // namespace

int run_compare(const compare_options& o) {
  if (!(o.tolerance_pct >= 0) || o.tolerance_pct > 1000 || !(o.tolerance_mib >= 0) || o.tolerance_mib > 1e9)
    throw bad_input("tolerance", "must be a non-negative percent and MiB");
  const auto a = read_records({o.baseline});
  const auto b = read_records({o.fresh});
  // An empty side would pass the gate having compared nothing.
  if (a.empty()) throw bad_input(o.baseline, "holds no records to compare");
  if (b.empty()) throw bad_input(o.fresh, "holds no records to compare");
  calibrate::tolerance tol;
  tol.fraction = o.tolerance_pct / 100;
  tol.bytes = static_cast<std::int64_t>(o.tolerance_mib * (1 << 20));
  tol.fragmentation = o.tolerance_pct / 100;
  tol.segments = o.tolerance_pct / 100;
  const auto c = calibrate::compare(a, b, tol);
  // Records pair by their whole case (calibrate/compare.hpp, case_of): sets of other problems (another
  // micro-batch, sequence or layout) share none, and a gate that compared nothing must not pass.
  if (c.compared == 0) {
    const std::string nearest = c.nearest_difference.empty() ? std::string()
                                                             : " (the nearest records differ in " +
                                                                   printable(c.nearest_difference, 160) + ")";
    throw bad_input(
        "compare", "no record of " + in_quotes(o.fresh) + " is of a case in " + in_quotes(o.baseline) +
                       ", so nothing was compared: records pair by their whole problem and layout" + nearest);
  }
  std::ostringstream out;
  out << "headroom compare: " << a.size() << " baseline records, " << b.size() << " new records; tolerance "
      << o.tolerance_pct << "% or " << o.tolerance_mib << " MiB for bytes (whichever is larger), "
      << o.tolerance_pct / 100 << " for fragmentation, " << o.tolerance_pct << "% for segment counts\n";
  for (const auto& e : c.baseline_environments) out << "  baseline: " << printable(e, 300) << "\n";
  for (const auto& e : c.new_environments) out << "  new:      " << printable(e, 300) << "\n";
  if (c.environment_changes.empty()) out << "  the two sides state the same environment\n";
  if (same_record_files(a, b))
    out << "  the two sides are the same " << a.size()
        << " record file(s): a baseline check, nothing can move\n";
  for (const auto& e : c.environment_changes) out << "  changed: " << printable(e, 300) << "\n";
  for (const auto& p : c.paired) out << "  " << printable(p, 400) << "\n";
  for (const auto& k : c.only_baseline)
    out << "  only in the baseline, not compared: " << printable(k, 400) << "\n";
  for (const auto& k : c.only_new)
    out << "  only in the new set, not compared: " << printable(k, 400) << "\n";
  if (c.moved.empty()) out << "nothing moved\n";
  for (const auto& m : c.moved) out << moved_line(m) << "\n";
  out << (c.regressions ? "verdict: REGRESSION: " : "verdict: no regression: ") << c.regressions
      << " figure(s) beyond the tolerance grew; " << c.improved << " shrank beyond it\n";
  std::cout << out.str();
  return c.regressions ? exit_validation_failed : exit_fits;
}

}  // namespace headroom::cli
