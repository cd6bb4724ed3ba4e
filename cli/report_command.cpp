// report_command.cpp: `headroom report` (see report_command.hpp). Parsing and printing only: the page is
// written by calibrate/html_report.cpp.
#include "report_command.hpp"

#include <iostream>
#include <optional>

#include "calibrate/calibration.hpp"
#include "calibrate/html_report.hpp"
#include "exit_codes.hpp"
#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/model_files.hpp"
#include "probes/io/results_file.hpp"
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

int run_report(const report_options& o) {
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
