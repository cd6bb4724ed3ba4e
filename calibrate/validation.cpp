// validation.cpp: the planner against published figures and outcomes (see validation.hpp).
#include "calibrate/validation.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "calibrate/calibration.hpp"
#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "planner/json_fields.hpp"
#include "planner/model_files.hpp"
#include "planner/problem_json.hpp"
#include "planner/units.hpp"
#include "probes/cases/emulated_peak.hpp"
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
    throw row_error(row.id, std::string("published.") + key + " must be positive and at most " +
                                fixed(hi, 0) + ", got " + it->dump());
  return v;
}

// The kinds of measured figure a measured_peak row may publish, and what each holds: the allocator's reserved
// peak (torch.cuda.max_memory_reserved; no CUDA context, no NCCL outside the allocator) or the device memory
// used (nvidia-smi; everything).
bool measured_priced_figure(const std::string& f) {
  return f == "reserved_peak" || f == "device_used" || f == "allocated_peak";
}

// Checks a row's published figures when it is read, so no row is judged against a figure that cannot be a
// measurement: bytes in (0, 1 PB], GiB in (0, 1,000,000], parameters in (0, 100,000] billion, printed
// decimals 0-6, a measured figure's kind named.
void check_published(const validation_row& r) {
  if (r.kind == "layer_activations") positive_figure(r, "bytes", 1e15);
  if (r.kind == "measured_peak") {
    positive_figure(r, "gib", 1e6);
    const std::string f = r.published.value("figure", std::string());
    if (const auto st = r.published.find("stage"); st != r.published.end() &&
        !((st->is_string() && *st == "last") || (st->is_number_integer() && st->get<std::int64_t>() >= 0)))
      throw row_error(r.id, "published.stage must be \"last\" or a stage index (the rank the figure was read on)");
    if (!measured_priced_figure(f))
      throw row_error(r.id, "published.figure must be reserved_peak, device_used or allocated_peak");
  }
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
  static const std::vector<std::string> fields = {"id",        "kind",       "citation", "expresses",
                                                  "published", "tolerance",  "problem",  "layout",
                                                  "skipped",   "calibration"};
  for (const auto& [key, value] : j.items())
    if (std::find(fields.begin(), fields.end(), key) == fields.end()) {
      const std::string near = detail::closest_name(key, fields);  // planner/json_fields.hpp
      throw row_error(r.id, "unknown field '" + key.substr(0, 60) + "'" +
                                (near.empty() ? "" : " (did you mean '" + near + "'?)"));
    }
  r.kind = str_field(j, "kind", r.id);
  r.citation = str_field(j, "citation", r.id);
  r.expresses = j.value("expresses", "");
  if (r.kind != "layer_activations" && r.kind != "trained" && r.kind != "oom" && r.kind != "measured_peak")
    throw bad_input(origin,
                    "row '" + r.id + "': kind must be layer_activations, trained, oom or measured_peak");
  if (j.contains("skipped") || j.contains("calibration")) {
    if (r.kind != "measured_peak")
      throw row_error(r.id, "skipped and calibration belong to measured_peak rows");
    if (j.contains("skipped") && (!j["skipped"].is_string() || j["skipped"].get<std::string>().empty()))
      throw row_error(r.id, "skipped must say why (a non-empty string)");
    if (j.contains("calibration") && j["calibration"] != "fit" && j["calibration"] != "held_out")
      throw row_error(r.id, "calibration must be \"fit\" or \"held_out\"");
    r.skipped = j.value("skipped", "");
    r.fit_on = j.value("calibration", "") == "fit";
    r.held_out = j.value("calibration", "") == "held_out";
    if (r.fit_on && !r.skipped.empty()) throw row_error(r.id, "a skipped row cannot be fitted on");
  }
  r.published = j.value("published", nlohmann::json::object());
  if (!r.published.is_object()) throw row_error(r.id, "published must be an object");
  if (const auto f = r.published.find("figure"); f != r.published.end() && !f->is_string())
    throw row_error(r.id, "published.figure must be a string (reserved_peak, device_used or allocated_peak)");
  if (r.published.contains("stage") && r.kind != "measured_peak")
    throw row_error(r.id, "published.stage belongs to measured_peak rows");
  if (r.fit_on && r.published.value("figure", std::string()) == "allocated_peak")
    throw row_error(r.id, "an allocated peak holds no reserve: it cannot be fitted on (drop \"calibration\")");
  if (j.contains("tolerance") && !j["tolerance"].is_number())
    throw row_error(r.id, "tolerance must be a number");
  r.tolerance = j.value("tolerance", 0.01);
  if (!(r.tolerance > 0 && r.tolerance <= 1)) throw row_error(r.id, "tolerance must be in (0, 1]");
  check_published(r);
  if (!r.skipped.empty()) {
    if (j.contains("problem") || j.contains("layout"))
      throw row_error(r.id, "a skipped row carries no case (problem, layout): it is not priced");
    return r;
  }
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

// A measured row's case priced: the stage whose prediction is largest (torchtitan's figure is the maximum
// over ranks), its terms and tokens, and the device.
struct measured_priced_case {
  int stage = 0;
  stage_terms terms;
  std::int64_t tokens = 0;
  device_spec device;
  double uncalibrated = 0;  // bytes: the prediction of the published figure
  double planner = 0;       // bytes: the planner's own figure of that kind (decisive total, less fixed overheads)
  std::string emulation_refused;  // why the allocator emulation could not run (the planner's figure is used)
};

// Returns what the uncalibrated planner predicts for a figure of kind `figure` on stage terms `t`, bytes. The
// device used is the decisive total (the reserve covers context, workspaces, NCCL and slack, docs/model.md);
// the allocator's reserved peak is that total less the fixed overheads the planner places outside the
// allocator (device_spec::fixed_overheads, docs/fixed-overheads.md).
double measured_uncalibrated_prediction(const std::string& figure, const stage_terms& t, const device_spec& d,
                                        std::int64_t tokens) {
  if (figure == "allocated_peak") return static_cast<double>(t.step_peak());  // live tensors, no allocator
  const double decisive = static_cast<double>(t.decisive_total(d, tokens));
  return figure == "device_used" ? decisive : decisive - static_cast<double>(d.fixed_overheads);
}

// Returns the prediction of a measured figure from the allocator emulation of stage `stage`: a reserved
// peak is the caching allocator's reserved peak over the stage's step trace (probes/cases/emulated_peak.hpp),
// a device-used figure that plus what lies outside the allocator (device_spec::fixed_overheads), bytes.
double emulated_prediction(const validation_row& row, int stage, const std::string& figure) {
  const probes::emulated_peak e = probes::emulate_stage(row.p, row.l, stage);
  if (figure == "allocated_peak") return static_cast<double>(e.allocated);
  const double reserved = static_cast<double>(e.reserved);
  return figure == "device_used" ? reserved + static_cast<double>(row.p.device.fixed_overheads) : reserved;
}

// Returns the pipeline stage a measured figure was read on: published.stage, "last" (Megatron logs its memory
// from rank world_size - 1 alone, the last stage: megatron/training/global_vars.py's tensorboard writer) or an
// index; -1 when not stated (the figure is the maximum over ranks: every stage is priced, the largest kept).
// check_published has refused any other form; here an index past the pipeline is refused.
int measured_stage(const validation_row& row, const breakdown& b) {
  const auto it = row.published.find("stage");
  if (it == row.published.end()) return -1;
  const auto stages = static_cast<std::int64_t>(b.stages.size());
  const std::int64_t k = it->is_string() ? stages - 1 : it->get<std::int64_t>();
  if (k >= stages)
    throw row_error(row.id, "published.stage must be \"last\" or a stage index from 0 to " + std::to_string(stages - 1));
  return static_cast<int>(k);
}

measured_priced_case measured_price(const validation_row& row, const breakdown& b) {
  measured_priced_case c;
  c.device = row.p.device;
  c.tokens = reserve_tokens(row.p, row.l);
  const std::string figure = row.published.value("figure", std::string());
  const int only = measured_stage(row, b);
  // Prices stage i; `emulate` false: by the planner alone.
  auto price = [&](std::size_t i, bool emulate) {
    const stage_terms t = b.stages[i].terms();
    const double planned = measured_uncalibrated_prediction(figure, t, c.device, c.tokens);
    const double v = emulate ? emulated_prediction(row, static_cast<int>(i), figure) : planned;
    if (only >= 0 || i == 0 || v > c.uncalibrated) {
      c.uncalibrated = v;
      c.planner = planned;
      c.stage = static_cast<int>(i);
      c.terms = t;
    }
  };
  const std::size_t from = only >= 0 ? static_cast<std::size_t>(only) : 0;
  const std::size_t to = only >= 0 ? from + 1 : b.stages.size();
  try {
    for (std::size_t i = from; i < to; ++i) price(i, true);
  } catch (const bad_input& e) {
    // A case the trace cannot be built for: every stage by the planner alone, and why.
    c.emulation_refused = e.what();
    for (std::size_t i = from; i < to; ++i) price(i, false);
  }
  return c;
}

// A published measured peak against the uncalibrated prediction (not judged: the errors are summarised).
void measured_judge(const validation_row& row, const breakdown& b, validation_result& r) {
  r.judged = false;
  r.agrees = true;
  const std::string figure = row.published.value("figure", std::string());
  r.measured = positive_figure(row, "gib", 1e6) * static_cast<double>(gib);
  const measured_priced_case c = measured_price(row, b);
  r.predicted_bytes = c.uncalibrated;
  r.planner_bytes = c.planner;
  r.emulated = c.emulation_refused.empty();
  r.priced_stage = c.stage;
  r.priced_terms = c.terms;
  r.priced_tokens = c.tokens;
  r.published = fixed(r.measured / static_cast<double>(gib), 2) + " GiB " + figure + " (measured)";
  r.predicted = fixed(c.uncalibrated / static_cast<double>(gib), 2) + " GiB" +
                (b.stages.size() > 1 ? " (stage " + std::to_string(c.stage) + ")" : "") + " uncalibrated, " +
                (r.emulated ? "the planner's tensors through the caching allocator (planner alone " +
                                  fixed(c.planner / static_cast<double>(gib), 2) + " GiB)"
                            : "the planner alone (no allocator emulation: " + c.emulation_refused + ")");
  r.error = (c.uncalibrated - r.measured) / r.measured;
  r.has_error = true;
}

// Returns the observation record a measured row makes for calibrate::fit: its case, the stage priced, the
// predicted terms and the published figure, as `headroom observe` writes them (measurement_record.hpp).
probes::measurement_record measured_observation_of(const validation_row& row, const validation_result& r) {
  const stage_terms& t = r.priced_terms;
  probes::measurement_record m;
  m.origin = row.id;
  m.kind = "observation";
  m.backend = "observation";
  m.measured = true;
  m.figure = row.published.value("figure", std::string());
  m.gpu = row.published.value("gpu", std::string());
  m.inputs = row.p;
  m.where = row.l;
  m.stage = r.priced_stage;
  m.persistent = t.persistent;
  m.transient = t.transient;
  m.activations = t.activations;
  m.working_set = t.working_set;
  m.output_phase = t.output_phase;
  const auto bytes = static_cast<std::int64_t>(std::llround(r.measured));
  if (m.figure == "device_used")
    m.device_used_at_peak = bytes;
  else
    m.peak_reserved = bytes;
  return m;
}

// Returns the fitted terms as one line, with units and how each was obtained.
std::string measured_terms_text(const calibration& c) {
  const double g = static_cast<double>(gib);
  return "fixed " + fixed(c.terms[0].value / g, 2) + " GiB (" + c.terms[0].why + "; not in a reserved peak)" +
         "; fragmentation " + fixed(c.terms[1].value, 4) + " B per churning B (" + c.terms[1].why + ")" +
         "; per token " + fixed(c.terms[2].value / 1024, 1) + " KiB (" + c.terms[2].why + ")";
}

// Adds relative error `e` of row `id` to `s` (mean_abs is a running sum until measured_finish()).
void measured_add_error(error_stats& s, double e, const std::string& id) {
  ++s.n;
  s.mean_abs += std::fabs(e);
  if (s.n == 1 || std::fabs(e) > std::fabs(s.worst)) {
    s.worst = e;
    s.worst_id = id;
  }
}

void measured_finish(error_stats& s) {
  if (s.n) s.mean_abs /= s.n;
}

nlohmann::json measured_stats_json(const error_stats& s) {
  return {{"rows", s.n}, {"mean_abs_error", s.mean_abs}, {"worst_error", s.worst}, {"worst_row", s.worst_id}};
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
  r.fit_on = row.fit_on;
  if (!row.skipped.empty()) {
    r.judged = false;
    r.skipped = true;
    r.agrees = true;
    r.measured = positive_figure(row, "gib", 1e6) * static_cast<double>(gib);
    r.published = fixed(r.measured / static_cast<double>(gib), 2) + " GiB " +
                  row.published.value("figure", std::string()) + " (measured)";
    r.predicted = "not priced";
    r.why = row.skipped;
    return r;
  }
  breakdown b;
  try {
    b = estimate(row.p, row.l);
  } catch (const bad_input& e) {
    throw row_error(row.id, e.what());
  }
  if (row.kind == "layer_activations")
    judge_layer_activations(row, b, r);
  else if (row.kind == "measured_peak")
    measured_judge(row, b, r);
  else
    judge_outcome(row, b, r);
  return r;
}

std::vector<validation_result> validate_pack(const nlohmann::json& pack, const std::string& origin) {
  std::vector<validation_result> out;
  for (const auto& row : validation_rows(pack, origin)) out.push_back(evaluate(row));
  return out;
}

std::string default_measured_pack() {
  return preset_dir() + "/validation/measured.json";
}

std::vector<bool> calibration_rows(const std::vector<validation_row>& rows, std::string& rule) {
  // An allocated peak holds no reserve (neither the allocator's slack nor what lies outside it): never fitted.
  const auto observes_reserve = [](const validation_row& r) {
    return r.kind == "measured_peak" && r.skipped.empty() &&
           r.published.value("figure", std::string()) != "allocated_peak";
  };
  std::vector<bool> fit(rows.size(), false);
  bool marked = false;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (observes_reserve(rows[i]) && rows[i].fit_on) fit[i] = marked = true;
  if (marked) {
    rule = "the rows the pack marks \"calibration\": \"fit\"";
    return fit;
  }
  rule = "every fifth priced reserved or device-used row in pack order (the 5th, 10th, ...) not marked "
         "held_out: a fifth of them, none chosen by hand";
  int priced = 0;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (observes_reserve(rows[i]) && !rows[i].held_out && ++priced % 5 == 0) fit[i] = true;
  return fit;
}

measured_summary summarise_measured(const std::vector<validation_row>& rows,
                                    std::vector<validation_result>& results) {
  measured_summary s;
  const std::vector<bool> fit_on = calibration_rows(rows, s.fit_rule);
  std::vector<probes::measurement_record> fit_records;
  for (std::size_t i = 0; i < rows.size() && i < results.size(); ++i) {
    const auto& row = rows[i];
    if (row.kind != "measured_peak") continue;
    if (!row.skipped.empty()) {
      ++s.skipped;
      continue;
    }
    ++s.priced;
    results[i].fit_on = fit_on[i];
    measured_add_error(s.uncalibrated, results[i].error, row.id);
    measured_add_error(s.uncalibrated_by_figure[row.published.value("figure", std::string())], results[i].error,
                       row.id);
    if (row.p.model.moe.enabled()) measured_add_error(s.uncalibrated_moe, results[i].error, row.id);
    if (fit_on[i]) {
      s.fitted_on.push_back(row.id);
      fit_records.push_back(measured_observation_of(row, results[i]));
    } else {
      measured_add_error(s.uncalibrated_held_out, results[i].error, row.id);
    }
  }
  std::optional<calibration> cal;
  if (fit_records.empty()) {
    s.calibration = "no row to fit on (" + s.fit_rule + ")";
  } else {
    try {
      cal = fit(fit_records);
    } catch (const bad_input& e) {
      s.calibration = std::string("the fit was refused: ") + e.what();
    }
  }
  if (cal) {
    s.calibrated = true;
    s.calibration = measured_terms_text(*cal);
    s.no_spread = no_spread_reason(*cal);
    s.weak = weakness(*cal);
    for (std::size_t i = 0; i < rows.size() && i < results.size(); ++i) {
      const auto& row = rows[i];
      if (row.kind != "measured_peak" || !row.skipped.empty()) continue;
      if (row.published.value("figure", std::string()) == "allocated_peak") continue;  // no reserve in it
      auto& r = results[i];
      const stage_terms& t = r.priced_terms;
      // The fit's central prediction: the held terms plus the fitted reserve, without the margin
      // (reserve_of adds it to the fixed term); the fixed term (the CUDA context and NCCL) only for a figure
      // that holds it.
      reserve_model rm = reserve_of(*cal, "validate");
      rm.fixed = row.published.value("figure", "") == "device_used"
                     ? static_cast<std::int64_t>(std::llround(cal->terms[0].value))
                     : 0;
      const double predicted = static_cast<double>(t.held() + rm.bytes(t.churn(), r.priced_tokens, t.activations));
      r.calibrated_bytes = predicted;
      r.calibrated_error = (predicted - r.measured) / r.measured;
      // The band `headroom plan --calibration` prints beside the headroom (reserve_uncertainty).
      r.calibrated_band = reserve_uncertainty(*cal, t.churn(), r.priced_tokens, t.activations);
      if (!fit_on[i]) {
        r.outside_domain = outside_domain(*cal, row.p, row.l, target{});
        ++s.coverage_rows;
        if (std::fabs(predicted - r.measured) <= *r.calibrated_band) ++s.covered;
      }
      measured_add_error(fit_on[i]                  ? s.calibrated_in_fit
                         : r.outside_domain.empty() ? s.calibrated_held_out
                                                    : s.calibrated_outside_domain,
                         *r.calibrated_error, row.id);
    }
  }
  for (auto* e : {&s.uncalibrated, &s.uncalibrated_held_out, &s.uncalibrated_moe, &s.calibrated_held_out,
                  &s.calibrated_outside_domain, &s.calibrated_in_fit})
    measured_finish(*e);
  for (auto& [figure, e] : s.uncalibrated_by_figure) measured_finish(e);
  return s;
}

int disagreements(const std::vector<validation_result>& results) {
  int n = 0;
  for (const auto& r : results) n += r.judged && !r.agrees;
  return n;
}

nlohmann::json validation_to_json(const std::vector<validation_result>& results, const std::string& pack_path,
                                  const measured_summary* measured) {
  nlohmann::json rows = nlohmann::json::array(), measured_rows = nlohmann::json::array();
  for (const auto& r : results) {
    if (!r.judged) {
      nlohmann::json x = {{"id", r.id},
                          {"citation", r.citation},
                          {"published", r.published},
                          {"measured_bytes", r.measured},
                          {"skipped", r.skipped}};
      if (r.skipped) x["why"] = r.why;
      if (!r.skipped) {
        x["predicted_bytes"] = r.predicted_bytes;
        x["predicted_by"] = r.emulated ? "allocator_emulation" : "planner";
        x["planner_bytes"] = r.planner_bytes;
        x["relative_error"] = r.error;
        x["calibration"] = r.fit_on ? "fit" : "held_out";
      }
      if (r.calibrated_bytes) {
        x["calibrated_bytes"] = *r.calibrated_bytes;
        x["calibrated_relative_error"] = *r.calibrated_error;
        if (r.calibrated_band) x["calibrated_band_bytes"] = *r.calibrated_band;
        x["outside_calibration_domain"] = r.outside_domain;
      }
      measured_rows.push_back(x);
      continue;
    }
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
  if (measured) {
    j["measured"] = {{"rows", measured_rows},
                     {"priced", measured->priced},
                     {"skipped", measured->skipped},
                     {"fitted_on", measured->fitted_on},
                     {"calibration", measured->calibration},
                     {"uncalibrated", measured_stats_json(measured->uncalibrated)},
                     {"uncalibrated_held_out", measured_stats_json(measured->uncalibrated_held_out)},
                     {"calibrated_held_out", measured_stats_json(measured->calibrated_held_out)},
                     {"calibrated_outside_domain", measured_stats_json(measured->calibrated_outside_domain)},
                     {"calibrated_in_fit", measured_stats_json(measured->calibrated_in_fit)},
                     {"uncalibrated_moe", measured_stats_json(measured->uncalibrated_moe)},
                     {"fit_rule", measured->fit_rule},
                     {"calibration_too_weak", measured->weak.empty() ? nlohmann::json(nullptr)
                                                                     : nlohmann::json(measured->weak)},
                     {"coverage", {{"held_out_rows", measured->coverage_rows}, {"inside_band", measured->covered},
                                   {"why_no_band", measured->no_spread}}}};
    nlohmann::json by = nlohmann::json::object();
    for (const auto& [figure, e] : measured->uncalibrated_by_figure) by[figure] = measured_stats_json(e);
    j["measured"]["uncalibrated_by_figure"] = by;
  }
  return j;
}

}  // namespace headroom::calibrate
