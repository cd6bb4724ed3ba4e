// validation.cpp: the planner against published figures and outcomes (see validation.hpp).
#include "calibrate/validation.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "planner/json_fields.hpp"
#include "planner/model_files.hpp"
#include "planner/problem_json.hpp"
#include "planner/units.hpp"
#include "probes/records/envelope.hpp"

namespace headroom::calibrate {

namespace {

// Returns bad_input naming row `id` of a pack.
bad_input row_error(const std::string& id, const std::string& what) {
  return bad_input("validate", "row '" + id + "': " + what);
}

std::string str_field(const nlohmann::json& row, const char* key, const std::string& id) {
  if (!row.contains(key) || !row[key].is_string())
    throw row_error(id, std::string("missing string field '") + key + "'");
  return row[key].get<std::string>();
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Returns published.`key` as a finite number in (0, hi], or throws naming the row and the field.
double positive_figure(const validation_row& row, const char* key, double hi) {
  const auto it = row.published.find(key);
  if (it == row.published.end() || !it->is_number())
    throw row_error(row.id, std::string("published.") + key + " missing (a number)");
  const double v = it->get<double>();
  if (!(v > 0 && v <= hi))
    throw row_error(row.id, std::string("published.") + key + " must be positive and at most " + fixed(hi, 0) +
                                ", got " + it->dump());
  return v;
}

// Checks a row's published figures when it is read, so no row is judged against a figure that cannot be a
// measurement: bytes in (0, 1 PB], parameters in (0, 100,000] billion, printed decimals 0-6.
void check_published(const validation_row& r) {
  if (r.kind == "layer_activations") positive_figure(r, "bytes", 1e15);
  if (r.kind != "trained" || !r.published.contains("params_billion")) return;
  positive_figure(r, "params_billion", 1e5);
  if (const auto d = r.published.find("params_decimals"); d != r.published.end())
    if (!d->is_number_integer() || d->get<std::int64_t>() < 0 || d->get<std::int64_t>() > 6)
      throw row_error(r.id, "published.params_decimals must be an integer from 0 to 6");
}

validation_row row_from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw bad_input(origin, "a row is not an object");
  validation_row r;
  r.id = str_field(j, "id", "?");
  static const std::vector<std::string> fields = {"id",        "kind",      "citation", "expresses",
                                                  "published", "tolerance", "problem",  "layout"};
  for (const auto& [key, value] : j.items())
    if (std::find(fields.begin(), fields.end(), key) == fields.end()) {
      const std::string near = detail::closest_name(key, fields);  // planner/json_fields.hpp
      throw row_error(r.id, "unknown field '" + key.substr(0, 60) + "'" +
                                (near.empty() ? "" : " (did you mean '" + near + "'?)"));
    }
  r.kind = str_field(j, "kind", r.id);
  r.citation = str_field(j, "citation", r.id);
  r.expresses = j.value("expresses", "");
  if (r.kind != "layer_activations" && r.kind != "trained" && r.kind != "oom")
    throw bad_input(origin, "row '" + r.id + "': kind must be layer_activations, trained or oom");
  r.published = j.value("published", nlohmann::json::object());
  if (!r.published.is_object()) throw row_error(r.id, "published must be an object");
  if (j.contains("tolerance") && !j["tolerance"].is_number())
    throw row_error(r.id, "tolerance must be a number");
  r.tolerance = j.value("tolerance", 0.01);
  if (!(r.tolerance > 0 && r.tolerance <= 1)) throw row_error(r.id, "tolerance must be in (0, 1]");
  check_published(r);
  for (const char* k : {"problem", "layout"})
    if (!j.contains(k))
      throw row_error(r.id, std::string("missing object field '") + k + "' (problem_json.hpp)");
  try {
    r.p = problem_from_json(j["problem"], "problem");
    r.l = layout_from_json(j["layout"], "layout");
  } catch (const bad_input& e) {
    throw row_error(r.id, e.what());
  }
  return r;
}

// A published activation figure against the planner's per-layer activations (bytes, decimal MB printed).
void judge_layer_activations(const validation_row& row, const breakdown& b, validation_result& r) {
  const double published = positive_figure(row, "bytes", 1e15);
  const double predicted = static_cast<double>(b.basis.per_layer.of(row.l.recompute));
  r.published = fixed(published / 1e6, 2) + " MB (" + row.published.value("formula", "") + ")";
  r.predicted = fixed(predicted / 1e6, 2) + " MB";
  r.error = (predicted - published) / published;
  r.has_error = true;
  r.agrees = std::fabs(r.error) <= row.tolerance;
  if (!r.agrees) r.why = "off by more than " + fixed(100 * row.tolerance, 1) + "%";
}

// A run that trained (or ran out of memory) against the planner's verdict; a published parameter count
// against the planner's.
void judge_outcome(const validation_row& row, const breakdown& b, validation_result& r) {
  const auto& w = b.worst_stage();
  const bool trained = row.kind == "trained";
  const auto& pub = row.published;
  r.published = trained ? "trained on " + pub.value("gpu", std::string("?")) : "out of memory";
  r.predicted = (w.fits ? "fits, " : "does not fit, ") + fixed(to_gib(w.decisive_total()), 1) + " of " +
                fixed(to_gib(w.capacity), 1) + " GiB";
  r.agrees = trained == w.fits;
  if (!r.agrees)
    r.why = trained ? "a run that trained is predicted not to fit"
                    : "a published out-of-memory is predicted to fit";
  if (!trained || !pub.contains("params_billion")) return;
  const double published = positive_figure(row, "params_billion", 1e5);
  const double predicted = static_cast<double>(b.basis.params.total) / 1e9;
  r.published += "; " + fixed(published, 1) + "B parameters";
  r.predicted += "; " + fixed(predicted, 1) + "B parameters";
  r.error = (predicted - published) / published;
  r.has_error = true;
  // The source prints billions to one decimal (Narayanan et al. compute them from 12lh^2(1 + 13/12h
  // + (V + s)/12lh) and round): within half a printed unit agrees, whatever the relative error.
  const double half_unit = 0.5 * std::pow(10.0, -pub.value("params_decimals", 1));
  if (std::fabs(r.error) > row.tolerance && std::fabs(predicted - published) > half_unit) {
    r.agrees = false;
    r.why += (r.why.empty() ? "" : "; ") + std::string("parameters off by more than ") +
             fixed(100 * row.tolerance, 1) + "% and more than the printed precision";
  }
}

}  // namespace

std::string default_validation_pack() {
  return preset_dir() + "/validation/published.json";
}

std::vector<validation_row> validation_rows(const nlohmann::json& pack, const std::string& origin) {
  if (pack.is_object() && pack.value("schema", "") == "headroom.validation/1")
    throw bad_input(origin,
                    "rows given as plan flags (headroom.validation/1) are no longer read: give each row its "
                    "problem and layout (headroom.validation/2, as presets/validation/published.json does)");
  records::require(pack, records::kind::validation_pack, origin);
  if (!pack.contains("rows") || !pack["rows"].is_array())
    throw bad_input(origin, "not a validation pack (no rows)");
  std::vector<validation_row> rows;
  for (const auto& j : pack["rows"]) rows.push_back(row_from_json(j, origin));
  return rows;
}

validation_result evaluate(const validation_row& row) {
  validation_result r;
  r.id = row.id;
  r.kind = row.kind;
  r.citation = row.citation;
  r.expresses = row.expresses;
  breakdown b;
  try {
    b = estimate(row.p, row.l);
  } catch (const bad_input& e) {
    throw row_error(row.id, e.what());
  }
  if (row.kind == "layer_activations")
    judge_layer_activations(row, b, r);
  else
    judge_outcome(row, b, r);
  return r;
}

std::vector<validation_result> validate_pack(const nlohmann::json& pack, const std::string& origin) {
  std::vector<validation_result> out;
  for (const auto& row : validation_rows(pack, origin)) out.push_back(evaluate(row));
  return out;
}

int disagreements(const std::vector<validation_result>& results) {
  int n = 0;
  for (const auto& r : results) n += !r.agrees;
  return n;
}

nlohmann::json validation_to_json(const std::vector<validation_result>& results,
                                  const std::string& pack_path) {
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
  nlohmann::json j = records::envelope(records::kind::validate);
  j["pack"] = pack_path;
  j["predicted"] = true;
  j["rows"] = rows;
  j["disagreements"] = disagreements(results);
  return j;
}

}  // namespace headroom::calibrate
