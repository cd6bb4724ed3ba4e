// problem_json.cpp: problems and layouts to JSON and back (see problem_json.hpp).
#include "problem_json.hpp"

#include "errors.hpp"
#include "json_fields.hpp"

namespace headroom {

using detail::int_field;
using detail::opt_bool_field;
using detail::opt_int_field;
using detail::opt_number_field;
using detail::require_known_keys;
using detail::opt_string_field;

namespace {

// The largest degree (tp, pp, cp, vpp) and GPUs per node a file may give, and the largest stage layer
// count: bounds on counts, not byte sizes.
constexpr std::int64_t max_degree = std::int64_t{1} << 20;
constexpr std::int64_t max_stage_layers = std::int64_t{1} << 30;

// Returns the value of E named by `j[key]` (the enum's name table, layout.hpp), `fallback` when the key
// is absent; throws bad_input naming origin.key.
template <class E>
E named_field(const nlohmann::json& j, const char* key, const std::string& origin, E fallback) {
  const auto name = opt_string_field(j, key, origin);
  if (!name) return fallback;
  if (auto v = parse_name<E>(*name)) return *v;
  throw bad_input(origin + "." + key, "must be " + names_phrase<E>());
}

}  // namespace

nlohmann::json reserve_to_json(const reserve_model& r) {
  return {{"fixed_bytes", r.fixed},
          {"fragmentation", r.fragmentation},
          {"per_token_bytes", r.per_token},
          {"source", r.source}};
}

reserve_model reserve_from_json(const nlohmann::json& j, const std::string& origin) {
  if (j.is_number_integer()) {  // records of 1.1 and before: the fixed reserve alone
    reserve_model r;
    r.fixed = j.get<std::int64_t>();
    return r;
  }
  if (!j.is_object()) throw bad_input(origin, "expected the reserve's terms as an object");
  detail::require_known_keys(j, {"fixed_bytes", "fragmentation", "per_token_bytes", "source"}, origin);
  reserve_model r;
  r.fixed = int_field(j, "fixed_bytes", origin, 0, INT64_MAX / 4);
  r.fragmentation = opt_number_field(j, "fragmentation", origin).value_or(0);
  r.per_token = opt_number_field(j, "per_token_bytes", origin).value_or(0);
  r.source = opt_string_field(j, "source", origin).value_or("");
  return r;
}

nlohmann::json problem_to_json(const problem& p) {
  const auto& s = p.training.split;
  return {{"model", model_to_json(p.model)},
          {"recipe", recipe_to_json(p.precision)},
          {"training",
           {{"seq", p.training.seq},
            {"micro_batch", p.training.micro_batch},
            {"global_batch", p.training.global_batch},
            {"attention", to_string(p.training.attention)},
            {"loss", to_string(p.training.loss)},
            {"pipeline_split",
             {{"layers", s.layers},
              {"first_stage", s.first_stage},
              {"last_stage", s.last_stage},
              {"embedding_as_layer", s.embedding_as_layer},
              {"loss_as_layer", s.loss_as_layer}}}}},
          {"device",
           {{"capacity_bytes", p.device.capacity},
            {"reserve_bytes", p.device.reserve.fixed},
            {"reserve", reserve_to_json(p.device.reserve)},
            {"fixed_overheads_bytes", p.device.fixed_overheads},
            {"gpus_per_node", p.device.gpus_per_node}}}};
}

problem problem_from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw bad_input(origin, "expected an object with model, recipe, training, device");
  for (const char* k : {"model", "recipe", "training", "device"})
    if (!j.contains(k) || !j[k].is_object()) throw bad_input(origin + "." + k, "missing or not an object");
  problem p;
  p.model = model_from_json(j["model"], origin + ".model");
  p.precision = recipe_from_json(j["recipe"], origin + ".recipe");
  const auto& t = j["training"];
  const std::string to = origin + ".training";
  require_known_keys(t, {"seq", "micro_batch", "global_batch", "attention", "loss", "pipeline_split"}, to);
  p.training.seq = int_field(t, "seq", to, 1, 100'000'000);
  p.training.micro_batch = int_field(t, "micro_batch", to, 1, 1'000'000);
  p.training.global_batch =
      opt_int_field(t, "global_batch", to, 1, 1'000'000'000).value_or(p.training.global_batch);
  p.training.attention = named_field(t, "attention", to, p.training.attention);
  p.training.loss = named_field(t, "loss", to, p.training.loss);
  if (auto s = t.find("pipeline_split"); s != t.end() && s->is_object()) {
    const std::string so = to + ".pipeline_split";
    require_known_keys(*s, {"layers", "first_stage", "last_stage", "embedding_as_layer", "loss_as_layer"}, so);
    if (auto l = s->find("layers"); l != s->end() && l->is_array())
      for (const auto& x : *l) {
        if (!x.is_number_integer() || x.get<std::int64_t>() < 0)
          throw bad_input(so + ".layers", "must be counts");
        p.training.split.layers.push_back(x.get<std::int64_t>());
      }
    p.training.split.first_stage = opt_int_field(*s, "first_stage", so, 0, max_stage_layers).value_or(0);
    p.training.split.last_stage = opt_int_field(*s, "last_stage", so, 0, max_stage_layers).value_or(0);
    p.training.split.embedding_as_layer = opt_bool_field(*s, "embedding_as_layer", so).value_or(false);
    p.training.split.loss_as_layer = opt_bool_field(*s, "loss_as_layer", so).value_or(false);
  }
  const auto& d = j["device"];
  const std::string dn = origin + ".device";
  require_known_keys(d, {"capacity_bytes", "reserve_bytes", "reserve", "fixed_overheads_bytes", "gpus_per_node"},
                     dn);
  p.device.capacity = int_field(d, "capacity_bytes", dn, 1, INT64_MAX / 4);
  if (auto r = d.find("reserve"); r != d.end())
    p.device.reserve = reserve_from_json(*r, dn + ".reserve");
  else
    p.device.reserve.fixed = int_field(d, "reserve_bytes", dn, 0, INT64_MAX / 4);
  p.device.fixed_overheads =
      opt_int_field(d, "fixed_overheads_bytes", dn, 0, INT64_MAX / 4).value_or(p.device.fixed_overheads);
  p.device.gpus_per_node =
      static_cast<int>(opt_int_field(d, "gpus_per_node", dn, 1, max_degree).value_or(p.device.gpus_per_node));
  validate(p.model);
  validate(p.training, p.device);
  return p;
}

nlohmann::json layout_to_json(const layout& l) {
  return {{"gpus", l.gpus},
          {"tp", l.tp},
          {"pp", l.pp},
          {"cp", l.cp},
          {"dp", l.dp()},
          {"vpp", l.vpp},
          {"zero", l.zero},
          {"recompute", to_string(l.recompute)},
          {"sequence_parallel", l.sp()},
          {"offload_optimizer", l.offload_optimizer},
          {"zero3_inflight_units", l.zero3_inflight_units},
          {"zero3_live_params", l.zero3_live_params},
          {"reshard_after_forward", l.reshard_after_forward}};
}

layout layout_from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw bad_input(origin, "expected the layout as an object");
  require_known_keys(j,
                     {"gpus", "tp", "pp", "cp", "dp", "vpp", "zero", "recompute", "sequence_parallel",
                      "offload_optimizer", "zero3_inflight_units", "zero3_live_params", "reshard_after_forward"},
                     origin);
  layout l;  // every field a file leaves out keeps layout's default
  l.gpus = static_cast<int>(int_field(j, "gpus", origin, 1, max_gpus));
  l.tp = static_cast<int>(opt_int_field(j, "tp", origin, 1, max_degree).value_or(l.tp));
  l.pp = static_cast<int>(opt_int_field(j, "pp", origin, 1, max_degree).value_or(l.pp));
  l.cp = static_cast<int>(opt_int_field(j, "cp", origin, 1, max_degree).value_or(l.cp));
  l.vpp = static_cast<int>(opt_int_field(j, "vpp", origin, 1, max_degree).value_or(l.vpp));
  l.zero = static_cast<int>(opt_int_field(j, "zero", origin, 0, 3).value_or(l.zero));
  l.recompute = named_field(j, "recompute", origin, l.recompute);
  l.sequence_parallel = opt_bool_field(j, "sequence_parallel", origin).value_or(l.sequence_parallel);
  l.offload_optimizer = opt_bool_field(j, "offload_optimizer", origin).value_or(l.offload_optimizer);
  l.zero3_inflight_units = static_cast<int>(
      opt_int_field(j, "zero3_inflight_units", origin, 1, 1000).value_or(l.zero3_inflight_units));
  l.zero3_live_params =
      opt_int_field(j, "zero3_live_params", origin, 0, INT64_MAX / 4).value_or(l.zero3_live_params);
  l.reshard_after_forward =
      opt_bool_field(j, "reshard_after_forward", origin).value_or(l.reshard_after_forward);
  // dp is derived (gpus / (tp pp cp)); written for readers, it must agree when a file states it (where tp pp
  // cp do not divide the GPUs, layout_error names that instead).
  const std::int64_t tpc = static_cast<std::int64_t>(l.tp) * l.pp * l.cp;
  if (const auto dp = opt_int_field(j, "dp", origin, 1, max_gpus);
      dp && l.gpus % tpc == 0 && *dp * tpc != l.gpus)
    throw bad_input(origin + ".dp", "is " + std::to_string(*dp) + ", but gpus / (tp x pp x cp) = " +
                                        std::to_string(l.gpus) + " / " +
                                        std::to_string(static_cast<std::int64_t>(l.tp) * l.pp * l.cp));
  return l;
}

}  // namespace headroom
