// report_command.cpp: `headroom report` (see report_command.hpp). Parsing and printing only: the page is
// written by calibrate/html_report.cpp.
#include "report_command.hpp"

#include <iostream>
#include <optional>

#include "calibrate/calibration.hpp"
#include "calibrate/html_report.hpp"
#include "calibrate/report_plan.hpp"
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
  c->add_option("records", o.records,
                "Record files or directories of them: measurement records, plan --json, probe snapshot "
                "--json, a calibration")
      ->required();
  c->add_option("-o,--out", o.out, "The HTML file to write")->required();
  c->add_option("--calibration", o.calibration, "Show this calibration's fitted reserve");
  c->add_flag("--force", o.force, "Replace the output file if it exists");
  return c;
}

namespace {

// What `headroom report` reads, as every refusal of a file names it.
constexpr const char* report_reads =
    "expected a measurement record (probe, snapshot, observe), `plan --json` of one layout, `probe snapshot "
    "--json` or a calibration";

// The records of a report: the measurement records (read as every command reads them,
// probes/records/measurement_record.hpp) with the command line each states, the `probe snapshot --json`
// records, drawn beside the snapshot record of the same source, the `plan --json` documents, and a
// calibration named among them (as --calibration names one).
struct report_set {
  std::vector<probes::measurement_record> records;
  calibrate::report_extras extras;
  std::optional<std::pair<std::string, nlohmann::json>> calibration;
};

// Returns the document in file `f`, or bad_input naming the file, why it cannot be read and what a report
// reads (a truncated file, a JSON that is not an object, one without a schema).
nlohmann::json read_report_file(const std::string& f, std::optional<records::version>& schema) {
  nlohmann::json j;
  try {
    j = read_json_file(f);
  } catch (const bad_input& e) {
    throw bad_input(e.what(), report_reads);
  }
  schema = j.is_object() && j.contains("schema") && j["schema"].is_string()
               ? records::parse(j["schema"].get<std::string>())
               : std::nullopt;
  if (!schema)
    throw bad_input(f,
                    std::string("not a headroom document (no \"schema\" of the form headroom.KIND/N.M); ") +
                        report_reads);
  return j;
}

// Adds measurement record `j` of file `f` to `s`, with its command line; its snapshot view checked.
void add_record(report_set& s, const nlohmann::json& j, const std::string& f) {
  s.records.push_back(record_from(j, f));
  // A malformed view fails the report here, naming the record and the field, rather than showing as a
  // "Not drawn" paragraph inside a page the user may share unread (calibrate/report_snapshot.hpp checks
  // every field it draws).
  if (const auto v = j.find("snapshot_view"); v != j.end() && !v->is_null() && !v->is_object())
    throw bad_input(f + ": snapshot_view", "must be an object (headroom snapshot --json writes it)");
  if (!s.records.back().snapshot_view.is_null())
    (void)calibrate::report::snapshot_view_html(s.records.back());
  std::string cmd;
  if (const auto env = j.find("environment"); env != j.end() && env->is_object())
    if (const auto c = env->find("command_line"); c != env->end() && c->is_string())
      cmd = c->get<std::string>();
  s.extras.command_lines.push_back(cmd);
}

report_set read_report_set(const std::vector<std::string>& args) {
  report_set s;
  const auto files = record_files(args);
  if (files.size() > calibrate::max_records)
    throw bad_input("records", std::to_string(files.size()) + " records given; a report reads at most " +
                                   std::to_string(calibrate::max_records) + " (split the set)");
  for (const auto& f : files) {
    std::optional<records::version> schema;
    nlohmann::json j = read_report_file(f, schema);
    auto is = [&](records::kind k) { return schema->kind == records::name_of(k); };
    if (is(records::kind::snapshot_replay)) {
      records::require(j, records::kind::snapshot_replay, f);
      s.extras.replays.emplace_back(f, std::move(j));
    } else if (is(records::kind::plan)) {
      (void)calibrate::report::parse_plan(j,
                                          f);  // refused here, naming the field, before anything is written
      s.extras.plans.emplace_back(f, std::move(j));
    } else if (is(records::kind::calibration)) {
      if (s.calibration)
        throw bad_input(f, "a second calibration (the first: " + printable(s.calibration->first) +
                               "); a report shows one");
      s.calibration.emplace(f, std::move(j));
    } else if (is(records::kind::measurement) || is(records::kind::overheads)) {
      add_record(s, j, f);
    } else {
      const bool plan_like =
          is(records::kind::suggest) || is(records::kind::min_gpus) || is(records::kind::plan_max_fit);
      throw bad_input(
          f, "a headroom." + printable(schema->kind, 40) + " document, which a report does not show; " +
                 report_reads +
                 (plan_like ? " (plan the layout it names with `headroom plan ... --json`)" : ""));
    }
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
  const std::size_t shown = records.size() + set.extras.replays.size() + set.extras.plans.size();
  if (shown == 0) throw bad_input("report", "no measurement records or plans found");
  if (set.calibration && !o.calibration.empty())
    throw bad_input("calibration", "given twice (--calibration " + printable(o.calibration) + " and " +
                                       printable(set.calibration->first) + "); a report shows one");
  std::optional<calibrate::calibration> cal;
  if (!o.calibration.empty())
    cal = calibrate::calibration_from_json(read_json_file(o.calibration), o.calibration);
  if (set.calibration)
    cal = calibrate::calibration_from_json(set.calibration->second, set.calibration->first);
  const std::string html = calibrate::html_report(
      records, cal, "headroom report: " + std::to_string(shown) + (shown == 1 ? " record" : " records"),
      set.extras);
  outs.add(o.out, html);
  outs.commit();
  // With "-" the HTML alone is standard output: the summary goes to stderr.
  (outs.to_stdout() ? std::cerr : std::cout)
      << "headroom report: " << shown << (shown == 1 ? " record" : " records") << " -> "
      << (o.out == "-" ? "standard output" : printable(o.out)) << "\n";
  return exit_fits;
}

}  // namespace headroom::cli
