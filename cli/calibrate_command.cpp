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
#include "planner/format.hpp"
#include "planner/model_files.hpp"
#include "probes/io/results_file.hpp"

namespace headroom::cli {

namespace {

namespace fs = std::filesystem;

// Returns `path` quoted and sanitised for a message.
std::string in_quotes(const std::string& path) {
  return "'" + printable(path, 120) + "'";
}

// Returns the *.json files under the directory `dir`, sorted. A walk that cannot go on (an unreadable
// subdirectory, a symbolic link loop, an entry whose type cannot be read) is bad input naming the path: a
// record set read in part would answer a question not asked.
std::vector<std::string> records_under(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec);
  std::string at = dir;
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    at = it->path().string();
    const bool json = it->path().extension() == ".json";
    std::error_code sec;
    const auto st = it->status(sec);
    // A dangling link that is not a record is no record; anything else unreadable stops the walk.
    if (sec && (json || sec != std::errc::no_such_file_or_directory))
      throw bad_input("records", in_quotes(at) + " cannot be read (" + sec.message() + ")");
    if (json && fs::is_regular_file(st)) found.push_back(at);
  }
  if (ec)
    throw bad_input("records",
                    "walking " + in_quotes(dir) + " failed at " + in_quotes(at) + " (" + ec.message() + ")");
  std::sort(found.begin(), found.end());
  return found;
}

// Returns the record files named: files as given, directories searched for *.json (sorted). A name that
// is neither a regular file nor a directory is bad input.
std::vector<std::string> record_files(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const auto& a : args) {
    std::error_code ec;
    const auto st = fs::status(a, ec);
    if (ec && st.type() == fs::file_type::not_found)
      throw bad_input("records", in_quotes(a) + ": no such file or directory");
    if (ec) throw bad_input("records", in_quotes(a) + " cannot be read (" + ec.message() + ")");
    if (fs::is_directory(st)) {
      const auto found = records_under(a);
      out.insert(out.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(st)) {
      out.push_back(a);
    } else {
      throw bad_input("records", in_quotes(a) + " is not a record file or a directory of them");
    }
  }
  return out;
}

// Reads every record: a file that is not a measurement record is bad input (one line, nothing else
// printed), for every command that reads record sets alike.
std::vector<probes::measurement_record> read_records(const std::vector<std::string>& args) {
  std::vector<probes::measurement_record> out;
  const auto files = record_files(args);
  // Bounded cost: at most max_records records, each held as its typed fields and its timeline.
  if (files.size() > calibrate::max_records)
    throw bad_input("records", std::to_string(files.size()) + " records given; a command reads at most " +
                                   std::to_string(calibrate::max_records) + " (split the set)");
  for (const auto& f : files) out.push_back(probes::measurement_from_json(read_json_file(f), f));
  return out;
}

// Returns `s` sanitised for the summary, "-" when empty.
std::string shown(const std::string& s) {
  return s.empty() ? "-" : printable(s);
}

std::string gib_text(double b) {
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

int run_compare(const calibrate_options& o) {
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

int run_report(const calibrate_options& o) {
  probes::output_set outs(o.force, &std::cout);
  outs.expect(o.out);
  const auto records = read_records(o.records);
  if (records.empty()) throw bad_input("report", "no measurement records found");
  std::optional<calibrate::calibration> cal;
  if (!o.calibration.empty())
    cal = calibrate::calibration_from_json(read_json_file(o.calibration), o.calibration);
  const std::string html =
      calibrate::html_report(records, cal, "headroom report: " + std::to_string(records.size()) + " records");
  outs.add(o.out, html);
  outs.commit();
  // With "-" the HTML alone is standard output: the summary goes to stderr.
  (outs.to_stdout() ? std::cerr : std::cout) << "headroom report: " << records.size() << " records -> "
                                             << (o.out == "-" ? "standard output" : printable(o.out)) << "\n";
  return exit_fits;
}

}  // namespace headroom::cli
