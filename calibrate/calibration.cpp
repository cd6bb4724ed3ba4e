// calibration.cpp: observations from records, the fit, applying a calibration and its domain (see calibration.hpp;
// the file itself: calibration_file.cpp).
#include "calibration.hpp"

#include <algorithm>
#include <cmath>

#include "fit.hpp"
#include "model_key.hpp"
#include "observations.hpp"
#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "planner/format.hpp"
#include "planner/gpu_types.hpp"
#include "planner/stage_terms.hpp"
#include "probes/records/envelope.hpp"

namespace headroom::calibrate {

const char* term_name(int i) {
  static const char* names[] = {"fixed", "fragmentation", "per_token"};
  return i >= 0 && i < term_count ? names[i] : "?";
}

namespace {

// The default of an unobserved fixed term: the context and NCCL of docs/fixed-overheads.md (the
// planner's documented fixed overheads), not the reference case's 10 GiB, which also covers the other terms.
const std::int64_t fixed_prior = device_spec{}.fixed_overheads;

// Returns " (records: a.json, b.json and 3 more)" for an error line; with `y` (the reserve each needs), the
// records whose figure is below what the model says the run holds instead, with the shortfall.
std::string records_named(const std::vector<observation>& obs, const std::vector<double>* y = nullptr) {
  std::string s;
  std::size_t shown = 0, n = 0;
  for (std::size_t i = 0; i < obs.size(); ++i) {
    if (y && (*y)[i] >= 0) continue;
    if (++n > 4) continue;
    s += (s.empty() ? "" : ", ") + printable(obs[i].origin, 80) +
         (y ? " (" + mib_str(static_cast<std::int64_t>(-(*y)[i]), 0) + " MiB below)" : "");
    ++shown;
  }
  if (n > shown) s += " and " + std::to_string(n - shown) + " more";
  return n == 0 ? "" : y ? "; measured below what the planner predicts the run holds: " + s : " (records: " + s + ")";
}

// Returns whether an observation's y is a reserved peak less the model terms: the records the activation
// factor is fitted on.
bool is_reserved_peak(const observation& o) {
  return o.kind == "snapshot" || (o.kind == "observation" && o.figure == "reserved_peak");
}

void domain_add_distinct(std::vector<std::string>& v, const std::string& s) {
  if (!s.empty() && std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

// The domain of `records` (calibration_domain).
calibration_domain domain_of(const std::vector<probes::measurement_record>& records) {
  calibration_domain d;
  d.stated = true;
  for (const auto& r : records) {
    if (r.measured) {
      domain_add_distinct(d.gpus, r.gpu);
      domain_add_distinct(d.drivers, r.driver);
    }
    domain_add_distinct(d.allocators, r.allocator);
    const std::string kind = r.kind + (r.figure.empty() ? "" : " " + r.figure);
    auto it = std::find_if(d.kinds.begin(), d.kinds.end(), [&](const auto& k) { return k.first == kind; });
    if (it == d.kinds.end())
      d.kinds.emplace_back(kind, 1);
    else
      ++it->second;
    if (!r.inputs || !r.where) continue;
    domain_add_distinct(d.recipes, r.inputs->precision.name);
    domain_add_distinct(d.recompute, to_string(r.where->recompute));
    d.parameters.add(static_cast<double>(count_params(r.inputs->model).total));
    d.tokens.add(static_cast<double>(reserve_tokens(*r.inputs, *r.where)));
    const stage_terms t{r.persistent, r.transient, r.activations, r.working_set, r.output_phase};
    d.predicted_peak.add(static_cast<double>(t.step_peak()));
  }
  return d;
}

// Returns the `why` of term `t`, pinned to its prior because the records cannot tell it from term `with`: what
// carries it instead, and the record that would separate them.
std::string pinned_why(int t, int with, const calibration_domain& d) {
  std::string modes;
  for (const auto& m : d.recompute) modes += (modes.empty() ? "" : ", ") + m;
  const std::string separate =
      with == 0 ? "a run of another size (micro-batch or sequence length)"
      : t == 2  ? "a run under another recompute mode than " + (modes.empty() ? std::string("theirs") : modes) +
                     ", or of a model of another width,"
                : "a run whose case differs in them";
  return std::string("kept at its prior, ") + (t == 0 ? mib_str(fixed_prior, 0) + " MiB" : "0") +
         ": these records cannot tell it from " + term_name(with) + ", which carries both; " + separate +
         " would separate them";
}

}  // namespace

void value_range::add(double v) {
  lo = empty ? v : std::min(lo, v);
  hi = empty ? v : std::max(hi, v);
  empty = false;
}

term_fit fit_activation_extra(const std::vector<observation>& obs, std::string* implementation,
                              int min_sizes) {
  term_fit f;
  // Implementations with enough sizes, in the order first seen.
  std::vector<std::string> keys;
  for (const auto& o : obs) {
    if (!is_reserved_peak(o) || o.activations <= 0) continue;
    std::vector<double> sizes;
    for (const auto& q : obs)
      if (is_reserved_peak(q) && q.implementation == o.implementation &&
          std::find(sizes.begin(), sizes.end(), q.x[2]) == sizes.end())
        sizes.push_back(q.x[2]);
    if (static_cast<int>(sizes.size()) >= min_sizes) domain_add_distinct(keys, o.implementation);
  }
  if (keys.empty()) {
    f.why =
        "not fitted: no two reserved peaks (snapshot or observed) of one model at different tokens per "
        "micro-batch; 0";
    return f;
  }
  // One implementation only: a factor is a property of one model's code, and the planner holds one.
  const std::string key = keys.front();
  double ya = 0, aa = 0;
  int n = 0;
  for (const auto& o : obs)
    if (is_reserved_peak(o) && o.implementation == key && o.activations > 0) {
      ya += o.y * o.activations;
      aa += o.activations * o.activations;
      ++n;
    }
  f.value = ya / aa;
  double rss = 0;
  for (const auto& o : obs)
    if (is_reserved_peak(o) && o.implementation == key && o.activations > 0)
      rss += (o.y - f.value * o.activations) * (o.y - f.value * o.activations);
  f.stderr_ = n > 1 ? std::sqrt(rss / (n - 1) / aa) : 0;
  if (f.value <= -1) {  // the model would hold no activations at all: the records contradict the ledger
    const std::string got = trim(f.value + 1, 3);
    f = term_fit{};
    f.why = "not used: the fit on " + key + " gave a factor of " + got + " (no activations held); 0";
    return f;
  }
  f.fitted = true;
  f.why = "fitted on " + std::to_string(n) + " reserved peak(s) of " + key +
          (n > 1 ? " (least squares through the origin)" : " (exactly: one record, no uncertainty)") +
          (keys.size() > 1 ? "; other models' records not used for it" : "");
  if (implementation) *implementation = key;
  return f;
}

observation observe(const probes::measurement_record& r) {
  observation o;
  o.origin = r.origin;
  o.kind = r.kind;
  o.backend = r.backend;
  o.measured = r.measured;
  if (r.kind == "overheads") {
    o.y = static_cast<double>(*r.fixed_overhead_bytes);
    o.x = {1, 0, 0};
    return o;
  }
  if (!r.inputs || !r.where)
    throw bad_input(r.origin,
                    "says nothing about the reserve: no model and layout attached (headroom snapshot "
                    "FILE --preset/--model ... --gpus ... attaches them)");
  if (r.out_of_memory) throw bad_input(r.origin, "ran out of memory: its peak is not the step's");
  const stage_terms terms{r.persistent, r.transient, r.activations, r.working_set, r.output_phase};
  const double model = static_cast<double>(terms.held());
  const double churn = static_cast<double>(terms.churn());
  const double tokens = static_cast<double>(reserve_tokens(*r.inputs, *r.where));
  o.activations = static_cast<double>(r.activations);
  o.implementation = implementation_key(r.inputs->model);
  o.figure = r.figure;
  if (r.kind == "observation") {
    check_record_floor(r);  // observations.hpp: a figure below the run's state is refused by name
    if (r.figure == "device_used" && r.device_used_at_peak) {
      o.y = static_cast<double>(*r.device_used_at_peak) - model;
      o.x = {1, churn, tokens};
    } else if (r.figure == "reserved_peak") {
      o.y = static_cast<double>(r.peak_reserved) - model;
      o.x = {0, churn, tokens};
    } else if (r.figure == "allocated_peak") {
      // Live tensors only: no context, no cached slack; what the ledger misses per token.
      o.y = static_cast<double>(r.peak_allocated) - model;
      o.x = {0, 0, tokens};
    } else {
      throw bad_input(r.origin, "an observation of unknown figure '" + printable(r.figure, 40) + "'");
    }
    return o;
  }
  if (r.kind == "probe" && r.backend == "cuda") {
    if (!r.device_used_at_peak)
      throw bad_input(r.origin, "a CUDA record without the device-used memory at its reserved peak");
    o.y = static_cast<double>(*r.device_used_at_peak - r.used_before_context.value_or(0)) - model;
    o.x = {1, churn, tokens};
  } else {
    o.y = static_cast<double>(r.peak_reserved) - model;
    o.x = {0, churn, tokens};
  }
  return o;
}

namespace {

// Returns a calibration holding `records`' observations and what they were made on (GPU, driver, CUDA, NCCL,
// allocator, measured fixed overheads, the domain), before any fit.
calibration observed(const std::vector<probes::measurement_record>& records) {
  calibration c;
  c.created = records::utc_now();
  for (const auto& r : records) {
    c.records.push_back(observe(r));
    if (r.measured && (r.backend == "cuda" || r.kind == "observation")) {
      if (c.gpu.empty()) c.gpu = r.gpu;
      if (c.driver.empty()) c.driver = r.driver;
      if (c.cuda_runtime.empty()) c.cuda_runtime = r.cuda_runtime;
      if (c.nccl.empty()) c.nccl = r.nccl;
    }
    if (r.kind == "probe" && c.allocator.empty()) c.allocator = r.allocator;
    if ((r.kind == "snapshot" || r.kind == "observation") && c.allocator.empty()) c.allocator = r.allocator;
    if (r.fixed_overhead_bytes) c.fixed_overheads = *r.fixed_overhead_bytes;
  }
  c.domain = domain_of(records);
  return c;
}

}  // namespace

calibration fit(const std::vector<probes::measurement_record>& records) {
  calibration c = observed(records);
  // Records of one model only: its generic terms and its factor cannot be told apart, and the factor is
  // what extrapolates that model's sizes, so it is fitted first. Records of several models: the generic
  // terms first, over all of them, and the factor on what they leave of the one model's records.
  bool one_model = true;
  for (const auto& o : c.records)
    one_model =
        one_model && (o.implementation.empty() || o.implementation == c.records.front().implementation);
  if (one_model) c.activation = fit_activation_extra(c.records, &c.activation_implementation);
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (const auto& o : c.records) {
    x.push_back(o.x);
    // The planner adds activation_extra x activations to every case: the other terms fit what is left.
    // An allocated peak holds no cached slack, so the factor (fitted on reserved peaks) is not its to lose.
    const bool holds_factor = !(o.kind == "observation" && o.figure == "allocated_peak");
    y.push_back(o.y - (holds_factor ? c.activation.value * o.activations : 0));
  }
  // A term the records cannot tell from an earlier one (a micro-batch sweep grows churn and tokens together)
  // keeps its prior and the earlier term carries both, said in its `why` (pinned_why): its column leaves the fit.
  const auto dependent = dependent_columns(x);
  for (int t = 0; t < term_count; ++t)
    if (const int with = dependent[static_cast<std::size_t>(t)]; with >= 0) {
      for (auto& row : x) row[static_cast<std::size_t>(t)] = 0;
      c.terms[t].pinned = true;
      c.terms[t].why = pinned_why(t, with, c.domain);
    }
  // Which terms the records observe at all.
  bool seen[term_count] = {false, false, false};
  for (const auto& row : x)
    for (int t = 0; t < term_count; ++t) seen[t] = seen[t] || row[static_cast<std::size_t>(t)] != 0;
  if (!seen[0] && !seen[1] && !seen[2])
    throw bad_input("calibrate", "no record observes any term of the reserve" + records_named(c.records));
  // (No more terms are left than records: n records leave at most n columns dependent_columns can tell apart.)
  auto r = nnls(x, y);
  if (!r) {
    // Every term wants to be negative. A record measured below what its own case holds contradicts the
    // ledger: refused, naming it. Otherwise (the activation factor took all the records leave, and a little
    // more) the terms are at their bound, 0, and the residuals say by how much.
    std::vector<double> raw;
    for (const auto& o : c.records) raw.push_back(o.y);
    if (std::any_of(raw.begin(), raw.end(), [](double v) { return v < 0; }))
      throw bad_input("calibrate", "the fit has no non-negative solution" + records_named(c.records) +
                                       records_named(c.records, &raw));
    r = nnls_result{std::vector<double>(term_count, 0.0), std::vector<double>(term_count, 0.0), 0,
                    static_cast<int>(y.size())};
  }
  for (int t = 0; t < term_count; ++t) {
    auto& tf = c.terms[t];
    if (seen[t]) {
      tf.value = r->coef[static_cast<std::size_t>(t)];
      tf.stderr_ = r->stderr_[static_cast<std::size_t>(t)];
      tf.fitted = true;
      tf.why = r->dof > 0 ? "fitted (non-negative least squares)"
                          : "fitted exactly (as many records as terms: no uncertainty)";
    } else if (tf.pinned) {
      tf.value = t == 0 ? static_cast<double>(fixed_prior) : 0;
    } else {
      tf.value = t == 0 ? static_cast<double>(fixed_prior) : 0;
      tf.why = t == 0
                   ? "not observed (no record holds the CUDA context: sim, snapshot, reserved or allocated "
                     "peaks); the documented " +
                         mib_str(fixed_prior, 0) +
                         " MiB of context and NCCL (docs/fixed-overheads.md) is kept"
                   : "not observed by these records: 0";
    }
  }
  if (!one_model) {
    std::vector<observation> left = c.records;
    for (auto& o : left)
      for (int t = 0; t < term_count; ++t) o.y -= o.x[static_cast<std::size_t>(t)] * c.terms[t].value;
    c.activation = fit_activation_extra(left, &c.activation_implementation);
    if (c.activation.fitted)
      c.activation.why += ", on what the other terms leave (records of several models)";
  }
  // Residuals and the margin: the most any record's reserve was under-predicted.
  c.worst_residual = 0;
  for (auto& o : c.records) {
    o.predicted =
        o.kind == "observation" && o.figure == "allocated_peak" ? 0 : c.activation.value * o.activations;
    for (int t = 0; t < term_count; ++t) o.predicted += o.x[static_cast<std::size_t>(t)] * c.terms[t].value;
    o.residual = o.y - o.predicted;
    if (std::fabs(o.residual) > std::fabs(c.worst_residual) || c.worst_origin.empty()) {
      c.worst_residual = o.residual;
      c.worst_origin = o.origin;
    }
    c.margin = std::max(c.margin, o.residual);
  }
  return c;
}

reserve_model reserve_of(const calibration& c, const std::string& file) {
  reserve_model r;
  r.fixed = static_cast<std::int64_t>(std::llround(c.terms[0].value + c.margin));
  r.fragmentation = c.terms[1].value;
  r.per_token = c.terms[2].value;
  r.activation_extra = c.activation.value;
  r.source = "calibration " + file + " (" + std::to_string(c.records.size()) + " records" +
             (c.gpu.empty() ? "" : ", " + c.gpu) + "; fixed includes the margin" +
             (fixed_is_prior(c) ? "; its fixed term is the documented prior: no record held the CUDA context" : "") +
             ")";
  return r;
}

std::vector<std::string> mismatches(const calibration& c, const target& t) {
  std::vector<std::string> out;
  auto check = [&](const char* what, const std::string& have, const std::string& want) {
    if (!want.empty() && !have.empty() && have != want)
      out.push_back(std::string(what) + ": calibrated on '" + have + "', planning for '" + want + "'");
    if (!want.empty() && have.empty())
      out.push_back(std::string(what) + ": the calibration does not say which (planning for '" + want + "')");
  };
  check("GPU", c.gpu, t.gpu);
  // --gpu-type names a type, the calibration a device: another family or size is another GPU (gpu_types.hpp).
  if (const gpu_type* g = known_gpu_type(t.gpu_type); g && !c.gpu.empty() && !device_name_may_be(c.gpu, *g))
    out.push_back("GPU: calibrated on '" + c.gpu + "', planning for --gpu-type " + t.gpu_type);
  check("driver", c.driver, t.driver);
  check("allocator", c.allocator, t.allocator);
  return out;
}

}  // namespace headroom::calibrate

namespace headroom::calibrate {

bool fixed_is_prior(const calibration& c) {
  return !c.terms[0].fitted;
}

namespace {

// Returns the line naming how `v` lies beyond `r` by more than domain_margin, or "". A `unit` of " GiB" takes
// `v` and `r` in bytes and writes them in GiB (a warning reads "84.0 GiB", not "90.2e9 bytes").
std::string domain_beyond_range(const char* what, double v, const value_range& r, const std::string& unit) {
  if (r.empty || (v >= r.lo / domain_margin && v <= r.hi * domain_margin)) return "";
  auto shown = [&](double x) {
    return unit == " GiB" ? gib_str(static_cast<std::int64_t>(x), 1) : eng(x);
  };
  return std::string(what) + ": planning " + shown(v) + unit + ", fitted on " + shown(r.lo) + " to " +
         shown(r.hi) + unit + " (beyond the range by more than a factor " + trim(domain_margin, 2) + ")";
}

// Returns the line naming `want` when it is not among `have` ("" when it is, or when either is unstated).
std::string domain_not_among(const char* what, const std::string& want,
                             const std::vector<std::string>& have) {
  if (want.empty() || have.empty() || std::find(have.begin(), have.end(), want) != have.end()) return "";
  std::string list;
  for (const auto& h : have) list += (list.empty() ? "'" : ", '") + printable(h, 60) + "'";
  return std::string(what) + ": planning for '" + printable(want, 60) + "', fitted on " + list;
}

}  // namespace

std::vector<std::string> outside_domain(const calibration& c, const problem& p, const layout& l,
                                        const target& t) {
  const auto& d = c.domain;
  if (!d.stated)
    return {
        "the calibration states no domain (written before headroom.calibration/1.2): refit it with "
        "headroom calibrate to have the planned case checked against it"};
  std::vector<std::string> out;
  auto add = [&](std::string line) {
    if (!line.empty()) out.push_back(std::move(line));
  };
  // Compared as the records spell them (NVML's names, "NVIDIA H100 80GB HBM3"): the target states it so.
  add(domain_not_among("GPU", t.gpu, d.gpus));
  add(domain_not_among("driver", t.driver, d.drivers));
  add(domain_not_among("allocator", t.allocator, d.allocators));
  add(domain_not_among("recipe", p.precision.name, d.recipes));
  add(domain_not_among("recompute", to_string(l.recompute), d.recompute));
  add(domain_beyond_range("model size", static_cast<double>(count_params(p.model).total), d.parameters,
                          " parameters"));
  add(domain_beyond_range("tokens per micro-batch", static_cast<double>(reserve_tokens(p, l)), d.tokens, ""));
  const breakdown b = estimate(p, l);
  add(domain_beyond_range("predicted step peak", static_cast<double>(b.worst_stage().step_peak),
                          d.predicted_peak, " GiB"));
  if (c.activation.fitted && !same_implementation(c.activation_implementation, p.model))
    out.push_back("activation factor: fitted on the shape " + printable(c.activation_implementation, 80) +
                  ", planning " + printable(p.model.name, 40) + ", " + printable(implementation_key(p.model), 80) +
                  " (a factor belongs to one model)");
  return out;
}

}  // namespace headroom::calibrate
