// validate_command.cpp: `headroom validate` (see validate_command.hpp): reads the pack, has the library
// judge every row (calibrate/validation.hpp), and prints the verdicts as text or JSON.
#include "validate_command.hpp"

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
  c->add_option("--pack", o.pack, "Validation pack (default: presets/validation/published.json)");
  c->add_flag("--json", o.json,
              "Write the results as JSON (schema " + records::schema_of(records::kind::validate) + ")");
  return c;
}

namespace {

// Prints the verdicts; every string from the pack is sanitised (printable) before it reaches the terminal.
void print_text(std::ostream& out, const std::vector<calibrate::validation_result>& results,
                const std::string& path, int disagree) {
  out << "headroom validate: " << results.size() << " published figures and outcomes (" << printable(path)
      << ")\npredicted by the analytic model (not measured) against what each source published\n";
  for (const auto& r : results) {
    out << "\n" << (r.agrees ? "agrees   " : "DISAGREES") << "  " << printable(r.id) << "\n";
    out << "  published: " << printable(r.published) << "\n  predicted: " << printable(r.predicted);
    if (r.has_error) out << "   (error " << (r.error >= 0 ? "+" : "") << fixed(100 * r.error, 2) << "%)";
    out << "\n";
    if (!r.why.empty()) out << "  " << printable(r.why, 1000) << "\n";
    out << "  source: " << printable(r.citation, 1000) << "\n";
    if (!r.expresses.empty()) out << "  expressed as: " << printable(r.expresses, 1000) << "\n";
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
