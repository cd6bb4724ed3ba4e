// validate_command.cpp: `headroom validate` (see validate_command.hpp). Each row's flags are parsed by the
// same options as `headroom plan`, so a row says exactly what a user would type.
#include "validate_command.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "exit_codes.hpp"
#include "plan_command.hpp"
#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "planner/model_files.hpp"
#include "planner/units.hpp"

namespace headroom::cli {

CLI::App* add_validate_command(CLI::App& app, validate_options& o) {
  auto* c = app.add_subcommand("validate",
                               "Compare the planner with published figures and fit / out-of-memory outcomes");
  c->add_option("--pack", o.pack, "Validation pack (default: presets/validation/published.json)");
  c->add_flag("--json", o.json, "Write the results as JSON (schema headroom.validate/1)");
  return c;
}

namespace {

std::string str_field(const nlohmann::json& row, const char* key, const std::string& id) {
  if (!row.contains(key) || !row[key].is_string())
    throw bad_input("validate", "row '" + id + "': missing string field '" + key + "'");
  return row[key].get<std::string>();
}

// Parses a row's `plan` flags into a problem and a layout, with the row's inline model when it has one.
std::pair<problem, layout> plan_of(const nlohmann::json& row, const std::string& id) {
  std::vector<std::string> args;
  std::istringstream in(str_field(row, "args", id));
  for (std::string a; in >> a;) args.push_back(a);
  if (args.size() > 200) throw bad_input("validate", "row '" + id + "': too many arguments");
  CLI::App app;
  plan_options o;
  CLI::App* plan = add_plan_command(app, o);
  // A row with its own model gives no --preset: the model group then allows none.
  if (row.contains("model")) plan->get_option_group("model")->require_option(-1);
  std::vector<std::string> argv{"plan"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::reverse(argv.begin(), argv.end());  // CLI11 parses a reversed vector
  try {
    app.parse(argv);
  } catch (const CLI::ParseError& e) {
    throw bad_input("validate", "row '" + id + "': " + e.what());
  }
  if (row.contains("model")) {
    if (!o.preset.empty() || !o.model_file.empty())
      throw bad_input("validate", "row '" + id + "': both an inline model and --preset/--model");
    o.inline_model = model_from_json(row["model"], "validation row '" + id + "'");
  }
  problem p = problem_from(o);
  layout l = layout_from(o);
  return {p, l};
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

std::vector<validation_result> validate_pack(const nlohmann::json& pack, const std::string& origin) {
  if (!pack.is_object() || pack.value("schema", "") != "headroom.validation/1" || !pack.contains("rows") ||
      !pack["rows"].is_array())
    throw bad_input(origin, "not a validation pack (schema headroom.validation/1 with rows)");
  std::vector<validation_result> out;
  for (const auto& row : pack["rows"]) {
    if (!row.is_object()) throw bad_input(origin, "a row is not an object");
    validation_result r;
    r.id = str_field(row, "id", "?");
    r.kind = str_field(row, "kind", r.id);
    r.citation = str_field(row, "citation", r.id);
    r.expresses = row.value("expresses", "");
    const nlohmann::json pub = row.value("published", nlohmann::json::object());
    const double tolerance = row.value("tolerance", 0.01);
    auto [p, l] = plan_of(row, r.id);
    const breakdown b = estimate(p, l);
    const auto& w = b.worst_stage();
    const std::string verdict = (w.fits ? "fits, " : "does not fit, ") +
                                fixed(to_gib(w.decisive_total()), 1) + " of " + fixed(to_gib(w.capacity), 1) +
                                " GiB";
    if (r.kind == "layer_activations") {
      if (!pub.contains("bytes") || !pub["bytes"].is_number())
        throw bad_input(origin, "row '" + r.id + "': published.bytes missing");
      const double published = pub["bytes"].get<double>();
      const double predicted = static_cast<double>(b.basis.per_layer.of(l.recompute));
      r.published = fixed(published / 1e6, 2) + " MB (" + pub.value("formula", "") + ")";
      r.predicted = fixed(predicted / 1e6, 2) + " MB";
      r.error = (predicted - published) / published;
      r.has_error = true;
      r.agrees = std::fabs(r.error) <= tolerance;
      if (!r.agrees) r.why = "off by more than " + fixed(100 * tolerance, 1) + "%";
    } else if (r.kind == "trained" || r.kind == "oom") {
      const bool trained = r.kind == "trained";
      r.published = trained ? "trained on " + pub.value("gpu", std::string("?")) : "out of memory";
      r.predicted = verdict;
      r.agrees = trained == w.fits;
      if (!r.agrees)
        r.why = trained ? "a run that trained is predicted not to fit"
                        : "a published out-of-memory is predicted to fit";
      if (trained && pub.contains("params_billion")) {
        const double published = pub["params_billion"].get<double>();
        const double predicted = static_cast<double>(b.basis.params.total) / 1e9;
        r.published += "; " + fixed(published, 1) + "B parameters";
        r.predicted += "; " + fixed(predicted, 1) + "B parameters";
        r.error = (predicted - published) / published;
        r.has_error = true;
        // The source prints billions to one decimal (Narayanan et al. compute them from 12lh^2(1 + 13/12h
        // + (V + s)/12lh) and round): within half a printed unit agrees, whatever the relative error.
        const double half_unit = 0.5 * std::pow(10.0, -pub.value("params_decimals", 1));
        if (std::fabs(r.error) > tolerance && std::fabs(predicted - published) > half_unit) {
          r.agrees = false;
          r.why += (r.why.empty() ? "" : "; ") + std::string("parameters off by more than ") +
                   fixed(100 * tolerance, 1) + "% and more than the printed precision";
        }
      }
    } else {
      throw bad_input(origin, "row '" + r.id + "': kind must be layer_activations, trained or oom");
    }
    out.push_back(std::move(r));
  }
  return out;
}

int run_validate(const validate_options& o) {
  const std::string path = o.pack.empty() ? preset_dir() + "/validation/published.json" : o.pack;
  const auto results = validate_pack(read_json_file(path), path);
  int disagree = 0;
  for (const auto& r : results) disagree += !r.agrees;
  if (o.json) {
    nlohmann::json j;
    j["schema"] = "headroom.validate/1";
    j["pack"] = path;
    j["predicted"] = true;
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : results) {
      nlohmann::json x = {{"id", r.id},
                          {"kind", r.kind},
                          {"citation", r.citation},
                          {"published", r.published},
                          {"predicted", r.predicted},
                          {"agrees", r.agrees}};
      if (r.has_error) x["relative_error"] = r.error;
      if (!r.why.empty()) x["why"] = r.why;
      rows.push_back(x);
    }
    j["rows"] = rows;
    j["disagreements"] = disagree;
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "headroom validate: " << results.size() << " published figures and outcomes (" << path
              << ")\npredicted by the analytic model (not measured) against what each source published\n";
    for (const auto& r : results) {
      std::cout << "\n" << (r.agrees ? "agrees   " : "DISAGREES") << "  " << r.id << "\n";
      std::cout << "  published: " << r.published << "\n  predicted: " << r.predicted;
      if (r.has_error)
        std::cout << "   (error " << (r.error >= 0 ? "+" : "") << fixed(100 * r.error, 2) << "%)";
      std::cout << "\n";
      if (!r.why.empty()) std::cout << "  " << r.why << "\n";
      std::cout << "  source: " << r.citation << "\n";
      if (!r.expresses.empty()) std::cout << "  expressed as: " << r.expresses << "\n";
    }
    std::cout << "\n"
              << results.size() - static_cast<std::size_t>(disagree) << " of " << results.size()
              << " agree\n";
  }
  return disagree ? exit_validation_failed : exit_fits;
}

}  // namespace headroom::cli
