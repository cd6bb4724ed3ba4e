// calibrate_command.cpp: `headroom calibrate` (see calibrate_command.hpp). Parsing and printing only: the fit
// lives in calibrate/calibration.cpp.
#include "calibrate_command.hpp"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "calibrate/calibration.hpp"
#include "exit_codes.hpp"
#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "probes/io/results_file.hpp"
#include "record_files.hpp"

namespace headroom::cli {

CLI::App* add_calibrate_command(CLI::App& app, calibrate_options& o) {
  auto* c = app.add_subcommand("calibrate", "Fit the reserve's terms from measurement records");
  c->add_option("records", o.records, "Record files or directories of them")->required();
  c->add_option("-o,--out", o.out, "Write the calibration (headroom.calibration/1) to FILE")->required();
  c->add_flag("--force", o.force, "Replace the output file if it exists");
  return c;
}

namespace {

// The calibration's summary: what it holds for, every term, the residual of every record. Every string
// from the records is sanitised.
std::string calibration_summary(const calibrate::calibration& c, std::size_t records,
                                const std::string& out) {
  std::ostringstream s;
  s << "headroom calibrate: " << records << " records -> "
    << (out == "-" ? "standard output" : printable(out)) << "\n";
  s << "holds for: GPU " << (c.gpu.empty() ? "(not stated: no CUDA record)" : printable(c.gpu)) << ", driver "
    << shown(c.driver) << ", CUDA " << shown(c.cuda_runtime) << ", NCCL " << shown(c.nccl) << ", allocator "
    << shown(c.allocator) << "\n\n";
  const char* units[] = {"bytes", "bytes per churning byte", "bytes per token"};
  for (int t = 0; t < calibrate::term_count; ++t) {
    char line[200];
    std::snprintf(line, sizeof line, "  %-14s %16.6g +- %-12.3g %s", calibrate::term_name(t),
                  c.terms[t].value, c.terms[t].stderr_, units[t]);
    s << line << "  (" << printable(c.terms[t].why) << ")\n";
  }
  s << "  margin         " << gib_text(c.margin) << "  (" << printable(c.margin_rule) << ")\n\n";
  s << "residuals (reserve needed - predicted):\n";
  for (const auto& r : c.records) {
    char pct[32];
    std::snprintf(pct, sizeof pct, "%+.1f%%", r.y != 0 ? 100.0 * r.residual / std::fabs(r.y) : 0.0);
    s << "  " << printable(r.origin) << " [" << printable(r.kind) << " " << printable(r.backend)
      << (r.measured ? "" : ", emulated") << "]: needed " << gib_text(r.y) << ", predicted " << gib_text(r.predicted)
      << ", residual " << gib_text(r.residual) << " (" << pct << ")\n";
  }
  s << "worst: " << printable(c.worst_origin) << " (" << gib_text(c.worst_residual) << ")\n";
  return s.str();
}

}  // namespace

int run_calibrate(const calibrate_options& o) {
  probes::output_set outs(o.force, &std::cout);
  outs.expect(o.out);
  const auto records = read_records(o.records);
  if (records.empty()) throw bad_input("calibrate", "no record files found");
  const calibrate::calibration c = calibrate::fit(records);
  outs.add(o.out, calibrate::to_json(c).dump(2) + "\n");
  outs.commit();
  // With "-" the calibration alone is standard output: the summary goes to stderr.
  (outs.to_stdout() ? std::cerr : std::cout) << calibration_summary(c, records.size(), o.out);
  return exit_fits;
}

}  // namespace headroom::cli
