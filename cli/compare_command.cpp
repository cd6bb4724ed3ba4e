// compare_command.cpp: `headroom compare` (see compare_command.hpp). Parsing and printing only: the comparison
// lives in calibrate/compare.cpp.
#include "compare_command.hpp"

#include <cmath>
#include <cstdio>
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

// One moved figure as a line of the comparison.
std::string moved_line(const calibrate::moved_figure& m) {
  char line[320];
  const std::string figure = printable(m.figure, 80);
  if (m.bytes)
    std::snprintf(line, sizeof line, "%s %s: %s -> %s (%+.1f MiB, %+.2f%%)",
                  m.exceeds ? "REGRESSION" : "moved     ", figure.c_str(), gib_text(m.old_value).c_str(),
                  gib_text(m.new_value).c_str(), (m.new_value - m.old_value) / (1 << 20),
                  m.old_value != 0 ? 100 * (m.new_value - m.old_value) / std::fabs(m.old_value) : 0.0);
  else
    std::snprintf(line, sizeof line, "%s %s: %.4f -> %.4f", m.exceeds ? "REGRESSION" : "moved     ",
                  figure.c_str(), m.old_value, m.new_value);
  return std::string(line) + "   [" + printable(m.key) + "]";
}

}  // namespace

int run_compare(const compare_options& o) {
  if (!(o.tolerance_pct >= 0) || o.tolerance_pct > 1000 || !(o.tolerance_mib >= 0) || o.tolerance_mib > 1e9)
    throw bad_input("tolerance", "must be a non-negative percent and MiB");
  const auto a = read_records({o.baseline});
  const auto b = read_records({o.fresh});
  calibrate::tolerance tol;
  tol.fraction = o.tolerance_pct / 100;
  tol.bytes = static_cast<std::int64_t>(o.tolerance_mib * (1 << 20));
  tol.fragmentation = o.tolerance_pct / 100;
  const auto c = calibrate::compare(a, b, tol);
  std::ostringstream out;
  out << "headroom compare: " << a.size() << " baseline records, " << b.size() << " new records; tolerance "
      << o.tolerance_pct << "% or " << o.tolerance_mib << " MiB, whichever is larger\n";
  for (const auto& k : c.only_baseline) out << "  only in the baseline: " << printable(k) << "\n";
  for (const auto& k : c.only_new) out << "  only in the new set: " << printable(k) << "\n";
  if (c.moved.empty()) out << "nothing moved\n";
  for (const auto& m : c.moved) out << moved_line(m) << "\n";
  out << c.regressions << " figure(s) beyond the tolerance\n";
  std::cout << out.str();
  return c.regressions ? exit_validation_failed : exit_fits;
}

}  // namespace headroom::cli
