// calibrate_command.cpp: `headroom calibrate`, `headroom compare`, `headroom report` (see
// calibrate_command.hpp). Parsing and printing only: the fit, the comparison and the HTML live in calibrate/.
#include "calibrate_command.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "calibrate/calibration.hpp"
#include "calibrate/compare.hpp"
#include "calibrate/html_report.hpp"
#include "exit_codes.hpp"
#include "planner/errors.hpp"
#include "planner/model_files.hpp"
#include "probes/io/results_file.hpp"

namespace headroom::cli {

namespace {

// Returns the record files named: files as given, directories searched for *.json (sorted).
std::vector<std::string> record_files(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const auto& a : args) {
    std::error_code ec;
    if (std::filesystem::is_directory(a, ec)) {
      std::vector<std::string> found;
      for (const auto& e : std::filesystem::recursive_directory_iterator(a, ec))
        if (e.is_regular_file() && e.path().extension() == ".json") found.push_back(e.path().string());
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else {
      out.push_back(a);
    }
  }
  return out;
}

// Reads every record; `skipped` collects what is not a measurement record (with why) when given, else the
// first such file is bad input.
std::vector<probes::measurement_record> read_records(const std::vector<std::string>& args,
                                                     std::vector<std::string>* skipped) {
  std::vector<probes::measurement_record> out;
  for (const auto& f : record_files(args)) {
    try {
      out.push_back(probes::measurement_from_json(read_json_file(f), f));
    } catch (const bad_input& e) {
      if (!skipped) throw;
      skipped->push_back(e.what());
    }
  }
  return out;
}

std::string gib(double b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f GiB", b / (1024.0 * 1024 * 1024));
  return buf;
}

}  // namespace

CLI::App* add_calibrate_command(CLI::App& app, calibrate_options& o) {
  auto* c = app.add_subcommand("calibrate", "Fit the reserve's terms from measurement records");
  c->add_option("records", o.records, "Record files or directories of them")->required();
  c->add_option("-o,--out", o.out, "Write the calibration (headroom.calibration/1) to FILE")->required();
  c->add_flag("--force", o.force, "Replace the output file if it exists");
  return c;
}

CLI::App* add_compare_command(CLI::App& app, calibrate_options& o) {
  auto* c = app.add_subcommand("compare", "List what moved between two record sets (regression check)");
  c->add_option("baseline", o.baseline, "Baseline record file or directory")->required();
  c->add_option("new", o.fresh, "New record file or directory")->required();
  c->add_option("--tolerance", o.tolerance_pct, "Percent a byte figure may move")->capture_default_str();
  c->add_option("--tolerance-mib", o.tolerance_mib, "MiB a byte figure may move (the larger bound applies)")
      ->capture_default_str();
  return c;
}

CLI::App* add_report_command(CLI::App& app, calibrate_options& o) {
  auto* c = app.add_subcommand("report", "Write one self-contained HTML report of a set of records");
  c->add_option("records", o.records, "Record files or directories of them")->required();
  c->add_option("-o,--out", o.out, "The HTML file to write")->required();
  c->add_option("--calibration", o.calibration, "Show this calibration's fitted reserve");
  c->add_flag("--force", o.force, "Replace the output file if it exists");
  return c;
}

int run_calibrate(const calibrate_options& o) {
  const auto records = read_records(o.records, nullptr);
  if (records.empty()) throw bad_input("calibrate", "no record files found");
  const calibrate::calibration c = calibrate::fit(records);
  probes::write_new_file(o.out, calibrate::to_json(c).dump(2) + "\n", o.force, &std::cout);
  std::ostringstream out;
  out << "headroom calibrate: " << records.size() << " records -> " << o.out << "\n";
  out << "holds for: GPU " << (c.gpu.empty() ? "(not stated: no CUDA record)" : c.gpu) << ", driver "
      << (c.driver.empty() ? "-" : c.driver) << ", CUDA " << (c.cuda_runtime.empty() ? "-" : c.cuda_runtime)
      << ", NCCL " << (c.nccl.empty() ? "-" : c.nccl) << ", allocator "
      << (c.allocator.empty() ? "-" : c.allocator) << "\n\n";
  const char* units[] = {"bytes", "bytes per churning byte", "bytes per token"};
  for (int t = 0; t < calibrate::term_count; ++t) {
    char line[200];
    std::snprintf(line, sizeof line, "  %-14s %16.6g +- %-12.3g %s", calibrate::term_name(t),
                  c.terms[t].value, c.terms[t].stderr_, units[t]);
    out << line << "  (" << c.terms[t].why << ")\n";
  }
  out << "  margin         " << gib(c.margin) << "  (" << c.margin_rule << ")\n\n";
  out << "residuals (reserve needed - predicted):\n";
  for (const auto& r : c.records) {
    char pct[32];
    std::snprintf(pct, sizeof pct, "%+.1f%%", r.y != 0 ? 100.0 * r.residual / std::fabs(r.y) : 0.0);
    out << "  " << r.origin << " [" << r.kind << " " << r.backend << (r.measured ? "" : ", emulated")
        << "]: needed " << gib(r.y) << ", predicted " << gib(r.predicted) << ", residual " << gib(r.residual)
        << " (" << pct << ")\n";
  }
  out << "worst: " << c.worst_origin << " (" << gib(c.worst_residual) << ")\n";
  std::cout << out.str();
  return exit_fits;
}

int run_compare(const calibrate_options& o) {
  std::vector<std::string> skipped_old, skipped_new;
  const auto a = read_records({o.baseline}, &skipped_old);
  const auto b = read_records({o.fresh}, &skipped_new);
  if (!(o.tolerance_pct >= 0) || o.tolerance_pct > 1000 || !(o.tolerance_mib >= 0) || o.tolerance_mib > 1e9)
    throw bad_input("tolerance", "must be a non-negative percent and MiB");
  calibrate::tolerance tol;
  tol.fraction = o.tolerance_pct / 100;
  tol.bytes = static_cast<std::int64_t>(o.tolerance_mib * (1 << 20));
  tol.fragmentation = o.tolerance_pct / 100;
  const auto c = calibrate::compare(a, b, tol);
  std::ostringstream out;
  out << "headroom compare: " << a.size() << " baseline records, " << b.size() << " new records; tolerance "
      << o.tolerance_pct << "% or " << o.tolerance_mib << " MiB, whichever is larger\n";
  for (const auto& s : skipped_old) out << "  not read (baseline): " << s << "\n";
  for (const auto& s : skipped_new) out << "  not read (new): " << s << "\n";
  for (const auto& k : c.only_baseline) out << "  only in the baseline: " << k << "\n";
  for (const auto& k : c.only_new) out << "  only in the new set: " << k << "\n";
  if (c.moved.empty()) out << "nothing moved\n";
  for (const auto& m : c.moved) {
    char line[256];
    if (m.bytes)
      std::snprintf(line, sizeof line, "%s %s: %s -> %s (%+.1f MiB, %+.2f%%)",
                    m.exceeds ? "REGRESSION" : "moved     ", m.figure.c_str(), gib(m.old_value).c_str(),
                    gib(m.new_value).c_str(), (m.new_value - m.old_value) / (1 << 20),
                    m.old_value != 0 ? 100 * (m.new_value - m.old_value) / std::fabs(m.old_value) : 0.0);
    else
      std::snprintf(line, sizeof line, "%s %s: %.4f -> %.4f", m.exceeds ? "REGRESSION" : "moved     ",
                    m.figure.c_str(), m.old_value, m.new_value);
    out << line << "   [" << m.key << "]\n";
  }
  out << c.regressions << " figure(s) beyond the tolerance\n";
  std::cout << out.str();
  if (!skipped_old.empty() || !skipped_new.empty()) return exit_bad_input;
  return c.regressions ? exit_validation_failed : exit_fits;
}

int run_report(const calibrate_options& o) {
  std::vector<std::string> skipped;
  const auto records = read_records(o.records, &skipped);
  if (records.empty()) throw bad_input("report", "no measurement records found");
  std::optional<calibrate::calibration> cal;
  if (!o.calibration.empty())
    cal = calibrate::calibration_from_json(read_json_file(o.calibration), o.calibration);
  const std::string html =
      calibrate::html_report(records, cal, "headroom report: " + std::to_string(records.size()) + " records");
  probes::write_new_file(o.out, html, o.force, &std::cout);
  std::cout << "headroom report: " << records.size() << " records -> " << o.out << "\n";
  for (const auto& s : skipped) std::cout << "  not read: " << s << "\n";
  return exit_fits;
}

}  // namespace headroom::cli
