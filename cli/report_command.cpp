// report_command.cpp: `headroom report` (see report_command.hpp). Parsing and printing only: the page is
// written by calibrate/html_report.cpp.
#include "report_command.hpp"

#include <iostream>
#include <optional>

#include "calibrate/calibration.hpp"
#include "calibrate/html_report.hpp"
#include "calibrate/report_snapshot.hpp"
#include "exit_codes.hpp"
#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/model_files.hpp"
#include "probes/io/results_file.hpp"
#include "probes/records/schema.hpp"
#include "record_files.hpp"

namespace headroom::cli {

CLI::App* add_report_command(CLI::App& app, report_options& o) {
  auto* c = app.add_subcommand("report", "Write one self-contained HTML report of a set of records");
  c->add_option("records", o.records, "Record files or directories of them")->required();
  c->add_option("-o,--out", o.out, "The HTML file to write")->required();
  c->add_option("--calibration", o.calibration, "Show this calibration's fitted reserve");
  c->add_flag("--force", o.force, "Replace the output file if it exists");
  return c;
}

namespace {

// The records of a report: the measurement records (read as every command reads them,
// probes/records/measurement_record.hpp) with the command line each states, and the `probe snapshot
// --json` records, drawn beside the snapshot record of the same source.
struct report_set {
  std::vector<probes::measurement_record> records;
  calibrate::report_extras extras;
};

report_set read_report_set(const std::vector<std::string>& args) {
  report_set s;
  const auto files = record_files(args);
  if (files.size() > calibrate::max_records)
    throw bad_input("records", std::to_string(files.size()) + " records given; a report reads at most " +
                                   std::to_string(calibrate::max_records) + " (split the set)");
  for (const auto& f : files) {
    nlohmann::json j = read_json_file(f);
    const auto schema = j.is_object() && j.contains("schema") && j["schema"].is_string()
                            ? records::parse(j["schema"].get<std::string>())
                            : std::nullopt;
    if (schema && schema->kind == records::name_of(records::kind::snapshot_replay)) {
      records::require(j, records::kind::snapshot_replay, f);
      s.extras.replays.emplace_back(f, std::move(j));
      continue;
    }
    s.records.push_back(record_from(j, f));
    // A malformed view fails the report here, naming the record and the field, rather than showing as a
    // "Not drawn" paragraph inside a page the user may share unread (calibrate/report_snapshot.hpp checks
    // every field it draws).
    if (const auto v = j.find("snapshot_view"); v != j.end() && !v->is_null() && !v->is_object())
      throw bad_input(f + ": snapshot_view", "must be an object (headroom snapshot --json writes it)");
    if (!s.records.back().snapshot_view.is_null()) (void)calibrate::report::snapshot_view_html(s.records.back());
    std::string cmd;
    if (const auto env = j.find("environment"); env != j.end() && env->is_object())
      if (const auto c = env->find("command_line"); c != env->end() && c->is_string())
        cmd = c->get<std::string>();
    s.extras.command_lines.push_back(cmd);
  }
  return s;
}

}  // namespace

int run_report(const report_options& o) {
  probes::output_set outs(o.force, &std::cout);
  for (const auto& f : record_files(o.records)) outs.input(f);
  outs.input(o.calibration);
  outs.expect(o.out);
  const report_set set = read_report_set(o.records);
  const auto& records = set.records;
  if (records.empty() && set.extras.replays.empty())
    throw bad_input("report", "no measurement records found");
  std::optional<calibrate::calibration> cal;
  if (!o.calibration.empty())
    cal = calibrate::calibration_from_json(read_json_file(o.calibration), o.calibration);
  const std::string html = calibrate::html_report(
      records, cal,
      "headroom report: " + std::to_string(records.size() + set.extras.replays.size()) + " records",
      set.extras);
  outs.add(o.out, html);
  outs.commit();
  // With "-" the HTML alone is standard output: the summary goes to stderr.
  (outs.to_stdout() ? std::cerr : std::cout)
      << "headroom report: " << records.size() + set.extras.replays.size() << " records -> "
      << (o.out == "-" ? "standard output" : printable(o.out)) << "\n";
  return exit_fits;
}

}  // namespace headroom::cli
