// calibration_file.cpp: the calibration file, headroom.calibration/1.x, written and read (see
// calibration.hpp to_json / calibration_from_json; results/README.md gives each version's fields).
#include <cmath>

#include "calibration.hpp"
#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "probes/records/envelope.hpp"

namespace headroom::calibrate {

namespace {

nlohmann::json domain_range_json(const value_range& r) {
  if (r.empty) return nullptr;
  return {{"min", r.lo}, {"max", r.hi}};
}

value_range domain_range_from(const nlohmann::json& d, const char* key) {
  value_range r;
  if (const auto it = d.find(key); it != d.end() && it->is_object()) {
    r.add(it->at("min").get<double>());
    r.add(it->at("max").get<double>());
  }
  return r;
}

nlohmann::json domain_json(const calibration_domain& d) {
  nlohmann::json kinds = nlohmann::json::object();
  for (const auto& [k, n] : d.kinds) kinds[k] = n;
  return {{"gpus", d.gpus},
          {"drivers", d.drivers},
          {"allocators", d.allocators},
          {"recipes", d.recipes},
          {"recompute", d.recompute},
          {"parameters", domain_range_json(d.parameters)},
          {"tokens_per_micro_batch", domain_range_json(d.tokens)},
          {"predicted_step_peak_bytes", domain_range_json(d.predicted_peak)},
          {"records_by_kind", kinds},
          {"range_margin", domain_margin}};
}

calibration_domain domain_from(const nlohmann::json& d) {
  calibration_domain out;
  out.stated = true;
  auto list = [&](const char* k) {
    std::vector<std::string> v;
    for (const auto& x : d.at(k)) v.push_back(x.get<std::string>());
    return v;
  };
  out.gpus = list("gpus");
  out.drivers = list("drivers");
  out.allocators = list("allocators");
  out.recipes = list("recipes");
  if (d.contains("recompute")) out.recompute = list("recompute");  // since 1.3
  out.parameters = domain_range_from(d, "parameters");
  out.tokens = domain_range_from(d, "tokens_per_micro_batch");
  out.predicted_peak = domain_range_from(d, "predicted_step_peak_bytes");
  for (const auto& [k, n] : d.at("records_by_kind").items()) out.kinds.emplace_back(k, n.get<int>());
  return out;
}

}  // namespace

nlohmann::json to_json(const calibration& c) {
  nlohmann::json recs = nlohmann::json::array();
  for (const auto& o : c.records)
    recs.push_back({{"origin", o.origin},
                    {"kind", o.kind},
                    {"backend", o.backend},
                    {"measured", o.measured},
                    {"reserve_needed_bytes", o.y},
                    {"inputs", {{"fixed", o.x[0]}, {"churn_bytes", o.x[1]}, {"tokens", o.x[2]}}},
                    {"figure", o.figure.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.figure)},
                    {"activation_bytes", o.activations},
                    {"implementation", o.implementation},
                    {"predicted_bytes", o.predicted},
                    {"residual_bytes", o.residual}});
  nlohmann::json terms = nlohmann::json::object();
  for (int t = 0; t < term_count; ++t)
    terms[term_name(t)] = {{"value", c.terms[t].value},
                           {"stderr", c.terms[t].stderr_},
                           {"fitted", c.terms[t].fitted},
                           {"pinned", c.terms[t].pinned},
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
       {"activation_extra",
        {{"value", c.activation.value},
         {"stderr", c.activation.stderr_},
         {"fitted", c.activation.fitted},
         {"why", c.activation.why},
         {"implementation", str(c.activation_implementation)},
         {"unit", "bytes per byte of the ledger's activations (the factor less one)"}}},
       {"domain", domain_json(c.domain)},
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
      c.terms[t].pinned = x.value("pinned", false);  // since headroom.calibration/1.4; absent: not pinned
      c.terms[t].why = x.value("why", "");
      if (!std::isfinite(c.terms[t].stderr_) || c.terms[t].stderr_ < 0 || c.terms[t].stderr_ > 1e15)
        throw bad_input(origin,
                        std::string("term ") + term_name(t) + ": stderr must be finite and non-negative");
      if (!std::isfinite(c.terms[t].value) || c.terms[t].value < 0)
        throw bad_input(origin, std::string("term ") + term_name(t) + " must be finite and non-negative");
    }
    c.margin = j.at("margin_bytes").get<double>();
    if (!std::isfinite(c.margin) || c.margin < 0 || c.margin > 1e15)
      throw bad_input(origin, "margin_bytes must be finite and non-negative");
    if (j.contains("fixed_overheads_bytes") && j["fixed_overheads_bytes"].is_number_integer())
      c.fixed_overheads = j["fixed_overheads_bytes"].get<std::int64_t>();
    if (c.fixed_overheads && (*c.fixed_overheads < 0 || *c.fixed_overheads > (std::int64_t{1} << 44)))
      throw bad_input(origin, "fixed_overheads_bytes must be between 0 and 16 TiB");
    for (const auto& r : j.value("records", nlohmann::json::array())) {
      observation o;
      o.origin = r.value("origin", "");
      o.kind = r.value("kind", "");
      o.backend = r.value("backend", "");
      o.measured = r.value("measured", false);
      if (r.contains("figure") && r["figure"].is_string()) o.figure = r["figure"].get<std::string>();
      o.activations = r.value("activation_bytes", 0.0);
      o.implementation = r.value("implementation", "");
      o.y = r.value("reserve_needed_bytes", 0.0);
      const auto& in = r.at("inputs");
      o.x = {in.value("fixed", 0.0), in.value("churn_bytes", 0.0), in.value("tokens", 0.0)};
      o.predicted = r.value("predicted_bytes", 0.0);
      o.residual = r.value("residual_bytes", 0.0);
      c.records.push_back(o);
    }
    // From headroom.calibration/1.2: the activation factor and the domain (older files: 0 and not stated).
    // A file that says 1.2 or later holds both as objects; anything else is refused, not read as absent.
    const auto version = records::parse(j.value("schema", std::string()));
    const bool from_1_2 = version && (version->major > 1 || version->minor >= 2);
    for (const char* key : {"activation_extra", "domain"}) {
      const auto it = j.find(key);
      if ((it != j.end() && !it->is_object()) || (it == j.end() && from_1_2))
        throw bad_input(origin, std::string(key) + " must be an object (headroom.calibration/1.2 writes it)");
    }
    if (const auto a = j.find("activation_extra"); a != j.end() && a->is_object()) {
      c.activation.value = a->at("value").get<double>();
      c.activation.stderr_ = a->value("stderr", 0.0);
      c.activation.fitted = a->value("fitted", false);
      c.activation.why = a->value("why", "");
      if (a->contains("implementation") && (*a)["implementation"].is_string())
        c.activation_implementation = (*a)["implementation"].get<std::string>();
      if (!std::isfinite(c.activation.value) || c.activation.value < -0.9 || c.activation.value > 100 ||
          !std::isfinite(c.activation.stderr_) || c.activation.stderr_ < 0 || c.activation.stderr_ > 100)
        throw bad_input(origin, "activation_extra must be a finite factor between -0.9 and 100");
    }
    if (const auto d = j.find("domain"); d != j.end() && d->is_object()) c.domain = domain_from(*d);
    if (j.contains("worst_residual")) {
      c.worst_residual = j["worst_residual"].value("bytes", 0.0);
      c.worst_origin = j["worst_residual"].value("record", "");
    }
  } catch (const nlohmann::json::exception& e) {
    // A field of the wrong type or missing: nlohmann's text less its tag.
    throw bad_input(origin, "malformed calibration file: " + printable(without_json_tag(e.what()), 200));
  }
  if (c.terms[0].value > 1e15 || c.terms[1].value > 100 || c.terms[2].value > 1e12)
    throw bad_input(origin, "a reserve term is absurd");
  return c;
}

}  // namespace headroom::calibrate
