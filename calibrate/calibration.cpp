// calibration.cpp: observations from records, the fit, the calibration file (see calibration.hpp).
#include "calibration.hpp"

#include <algorithm>
#include <cmath>

#include "fit.hpp"
#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "planner/format.hpp"
#include "planner/stage_terms.hpp"
#include "probes/records/envelope.hpp"

namespace headroom::calibrate {

const char* term_name(int i) {
  static const char* names[] = {"fixed", "fragmentation", "per_token"};
  return i >= 0 && i < term_count ? names[i] : "?";
}

namespace {

// The default of an unobserved fixed term: context, cuBLAS and NCCL of docs/fixed-overheads.md (the
// planner's documented fixed overheads), not the reference case's 10 GiB, which also covers the other terms.
const std::int64_t fixed_prior = device_spec{}.fixed_overheads;

}  // namespace

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

calibration fit(const std::vector<probes::measurement_record>& records) {
  calibration c;
  c.created = records::utc_now();
  for (const auto& r : records) {
    c.records.push_back(observe(r));
    if (r.measured && r.backend == "cuda") {
      if (c.gpu.empty()) c.gpu = r.gpu;
      if (c.driver.empty()) c.driver = r.driver;
      if (c.cuda_runtime.empty()) c.cuda_runtime = r.cuda_runtime;
      if (c.nccl.empty()) c.nccl = r.nccl;
    }
    if (r.kind == "probe" && c.allocator.empty()) c.allocator = r.allocator;
    if (r.kind == "snapshot" && c.allocator.empty()) c.allocator = r.allocator;
    if (r.fixed_overhead_bytes) c.fixed_overheads = *r.fixed_overhead_bytes;
  }
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (const auto& o : c.records) {
    x.push_back(o.x);
    y.push_back(o.y);
  }
  // Which terms the records observe at all.
  int observed = 0;
  bool seen[term_count] = {false, false, false};
  for (const auto& row : x)
    for (int t = 0; t < term_count; ++t) seen[t] = seen[t] || row[static_cast<std::size_t>(t)] != 0;
  for (bool s : seen) observed += s;
  if (observed == 0) throw bad_input("calibrate", "no record observes any term of the reserve");
  if (static_cast<int>(records.size()) < observed)
    throw bad_input("calibrate", std::to_string(records.size()) + " record(s) for " +
                                     std::to_string(observed) +
                                     " observed terms: at least as many records as terms are needed");
  const auto same = indistinguishable(x);
  if (!same.empty()) {
    std::string names;
    for (auto [a, b] : same)
      names += (names.empty() ? "" : "; ") + std::string(term_name(a)) + " and " + term_name(b);
    throw bad_input("calibrate", "the records cannot tell these terms apart: " + names +
                                     " (add records whose cases differ in them)");
  }
  const auto r = nnls(x, y);
  if (!r) throw bad_input("calibrate", "the fit has no solution for these records");
  for (int t = 0; t < term_count; ++t) {
    auto& tf = c.terms[t];
    if (seen[t]) {
      tf.value = r->coef[static_cast<std::size_t>(t)];
      tf.stderr_ = r->stderr_[static_cast<std::size_t>(t)];
      tf.fitted = true;
      tf.why = r->dof > 0 ? "fitted (non-negative least squares)"
                          : "fitted exactly (as many records as terms: no uncertainty)";
    } else {
      tf.value = t == 0 ? static_cast<double>(fixed_prior) : 0;
      tf.why =
          t == 0 ? "not observed (only sim or snapshot records: no CUDA context in them); the documented " +
                       mib_str(fixed_prior, 0) + " MiB of context, cuBLAS and NCCL (docs/fixed-overheads.md) is kept"
                 : "not observed by these records: 0";
    }
  }
  // Residuals and the margin: the most any record's reserve was under-predicted.
  c.worst_residual = 0;
  for (auto& o : c.records) {
    o.predicted = 0;
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

nlohmann::json to_json(const calibration& c) {
  nlohmann::json recs = nlohmann::json::array();
  for (const auto& o : c.records)
    recs.push_back({{"origin", o.origin},
                    {"kind", o.kind},
                    {"backend", o.backend},
                    {"measured", o.measured},
                    {"reserve_needed_bytes", o.y},
                    {"inputs", {{"fixed", o.x[0]}, {"churn_bytes", o.x[1]}, {"tokens", o.x[2]}}},
                    {"predicted_bytes", o.predicted},
                    {"residual_bytes", o.residual}});
  nlohmann::json terms = nlohmann::json::object();
  for (int t = 0; t < term_count; ++t)
    terms[term_name(t)] = {{"value", c.terms[t].value},
                           {"stderr", c.terms[t].stderr_},
                           {"fitted", c.terms[t].fitted},
                           {"why", c.terms[t].why}};
  auto str = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  // The envelope's `created` is when this file was written; `created_utc` when the fit was made.
  return records::enveloped(
      records::kind::calibration,
      {{"created_utc", c.created},
       {"holds_for",
        {{"gpu", str(c.gpu)},
         {"driver", str(c.driver)},
         {"cuda_runtime", str(c.cuda_runtime)},
         {"nccl", str(c.nccl)},
         {"allocator", str(c.allocator)}}},
       {"units",
        {{"fixed", "bytes"}, {"fragmentation", "bytes per churning byte"}, {"per_token", "bytes per token"}}},
       {"terms", terms},
       {"margin_bytes", c.margin},
       {"margin_rule", c.margin_rule},
       {"fixed_overheads_bytes",
        c.fixed_overheads ? nlohmann::json(*c.fixed_overheads) : nlohmann::json(nullptr)},
       {"worst_residual", {{"bytes", c.worst_residual}, {"record", c.worst_origin}}},
       {"records", recs}});
}

calibration calibration_from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw bad_input(origin, "not a calibration file (expected a JSON object)");
  records::require(j, records::kind::calibration, origin);
  calibration c;
  try {
    c.created = j.value("created_utc", "");
    const auto& h = j.at("holds_for");
    auto s = [&](const char* k) {
      return h.contains(k) && h[k].is_string() ? h[k].get<std::string>() : std::string();
    };
    c.gpu = s("gpu");
    c.driver = s("driver");
    c.cuda_runtime = s("cuda_runtime");
    c.nccl = s("nccl");
    c.allocator = s("allocator");
    for (int t = 0; t < term_count; ++t) {
      const auto& x = j.at("terms").at(term_name(t));
      c.terms[t].value = x.at("value").get<double>();
      c.terms[t].stderr_ = x.value("stderr", 0.0);
      c.terms[t].fitted = x.value("fitted", false);
      c.terms[t].why = x.value("why", "");
      if (!std::isfinite(c.terms[t].value) || c.terms[t].value < 0)
        throw bad_input(origin, std::string("term ") + term_name(t) + " must be finite and non-negative");
    }
    c.margin = j.at("margin_bytes").get<double>();
    if (!std::isfinite(c.margin) || c.margin < 0 || c.margin > 1e15)
      throw bad_input(origin, "margin_bytes must be finite and non-negative");
    if (j.contains("fixed_overheads_bytes") && j["fixed_overheads_bytes"].is_number_integer())
      c.fixed_overheads = j["fixed_overheads_bytes"].get<std::int64_t>();
    for (const auto& r : j.value("records", nlohmann::json::array())) {
      observation o;
      o.origin = r.value("origin", "");
      o.kind = r.value("kind", "");
      o.backend = r.value("backend", "");
      o.measured = r.value("measured", false);
      o.y = r.value("reserve_needed_bytes", 0.0);
      const auto& in = r.at("inputs");
      o.x = {in.value("fixed", 0.0), in.value("churn_bytes", 0.0), in.value("tokens", 0.0)};
      o.predicted = r.value("predicted_bytes", 0.0);
      o.residual = r.value("residual_bytes", 0.0);
      c.records.push_back(o);
    }
    if (j.contains("worst_residual")) {
      c.worst_residual = j["worst_residual"].value("bytes", 0.0);
      c.worst_origin = j["worst_residual"].value("record", "");
    }
  } catch (const nlohmann::json::exception& e) {
    throw bad_input(origin, std::string("malformed calibration file: ") + e.what());
  }
  if (c.terms[0].value > 1e15 || c.terms[1].value > 100 || c.terms[2].value > 1e12)
    throw bad_input(origin, "a reserve term is absurd");
  return c;
}

reserve_model reserve_of(const calibration& c, const std::string& file) {
  reserve_model r;
  r.fixed = static_cast<std::int64_t>(std::llround(c.terms[0].value + c.margin));
  r.fragmentation = c.terms[1].value;
  r.per_token = c.terms[2].value;
  r.source = "calibration " + file + " (" + std::to_string(c.records.size()) + " records" +
             (c.gpu.empty() ? "" : ", " + c.gpu) + "; fixed includes the margin)";
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
  check("driver", c.driver, t.driver);
  check("allocator", c.allocator, t.allocator);
  return out;
}

}  // namespace headroom::calibrate
