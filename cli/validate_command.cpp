// validate_command.cpp: `headroom validate` (see validate_command.hpp): reads the pack, has the library
// judge every row (calibrate/validation.hpp), and prints the verdicts as text or JSON.
#include "validate_command.hpp"

#include <cstdio>
#include <iostream>

#include "calibrate/validation.hpp"
#include "exit_codes.hpp"
#include "planner/model_files.hpp"
#include "probes/records/schema.hpp"

namespace headroom::cli {

CLI::App* add_validate_command(CLI::App& app, validate_options& o) {
  auto* c = app.add_subcommand("validate",
                               "Compare the planner with published figures and fit / out-of-memory outcomes");
  c->add_option("--pack", o.pack, "Validation pack (default: presets/validation/published.json)");
  c->add_flag("--json", o.json, "Write the results as JSON (schema " + records::schema_of(records::kind::validate) + ")");
  return c;
}

namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

void print_text(std::ostream& out, const std::vector<calibrate::validation_result>& results,
                const std::string& path, int disagree) {
  out << "headroom validate: " << results.size() << " published figures and outcomes (" << path
      << ")\npredicted by the analytic model (not measured) against what each source published\n";
  for (const auto& r : results) {
    out << "\n" << (r.agrees ? "agrees   " : "DISAGREES") << "  " << r.id << "\n";
    out << "  published: " << r.published << "\n  predicted: " << r.predicted;
    if (r.has_error) out << "   (error " << (r.error >= 0 ? "+" : "") << fixed(100 * r.error, 2) << "%)";
    out << "\n";
    if (!r.why.empty()) out << "  " << r.why << "\n";
    out << "  source: " << r.citation << "\n";
    if (!r.expresses.empty()) out << "  expressed as: " << r.expresses << "\n";
  }
  out << "\n"
      << results.size() - static_cast<std::size_t>(disagree) << " of " << results.size() << " agree\n";
}

}  // namespace

int run_validate(const validate_options& o) {
  const std::string path = o.pack.empty() ? calibrate::default_validation_pack() : o.pack;
  const auto results = calibrate::validate_pack(read_json_file(path), path);
  const int disagree = calibrate::disagreements(results);
  if (o.json)
    std::cout << calibrate::validation_to_json(results, path).dump(2) << "\n";
  else
    print_text(std::cout, results, path, disagree);
  return disagree ? exit_validation_failed : exit_fits;
}

}  // namespace headroom::cli
