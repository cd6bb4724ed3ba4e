// problem_json.cpp: problems and layouts to JSON and back (see problem_json.hpp).
#include "problem_json.hpp"

#include <cmath>

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


// Returns the recompute-module set as Megatron's names.
nlohmann::json modules_to_json(std::uint32_t modules) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& m : recompute_module_names)
    if (modules & module_bit(m.value)) a.push_back(m.name);
  return a;
}

// Reads a recompute-module set: a list of Megatron's names. Throws bad_input naming `origin`.
std::uint32_t modules_from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_array() || j.size() > 16) throw bad_input(origin + ".recompute_modules", "expected a list of names");
  std::uint32_t bits = 0;
  for (const auto& x : j) {
    const auto m = x.is_string() ? parse_name<recompute_module>(x.get<std::string>()) : std::nullopt;
    if (!m)
      throw bad_input(origin + ".recompute_modules", "each must be " + names_phrase<recompute_module>());
    bits |= module_bit(*m);
  }
  return bits;
}

// Reads the MoE routing settings. Throws bad_input naming the field.
moe_routing routing_from_json(const nlohmann::json& j, const std::string& origin) {
  using namespace detail;
  if (!j.is_object()) throw bad_input(origin, "expected an object");
  require_known_keys(j, {"imbalance", "capacity_factor", "pad_to_capacity", "dispatcher"}, origin);
  moe_routing r;
  auto number = [&](const char* key, double fallback) {
    const auto it = j.find(key);
    if (it == j.end()) return fallback;
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0 || it->get<double>() > 1024)
      throw bad_input(origin + "." + key, "must be a number between 0 and 1024");
    return it->get<double>();
  };
  r.imbalance = number("imbalance", r.imbalance);
  if (r.imbalance < 1) throw bad_input(origin + ".imbalance", "must be at least 1 (balanced)");
  r.capacity_factor = number("capacity_factor", r.capacity_factor);
  r.pad_to_capacity = opt_bool_field(j, "pad_to_capacity", origin).value_or(false);
  r.dispatcher = named_field(j, "dispatcher", origin, r.dispatcher);
  return r;
}
}  // namespace

nlohmann::json reserve_to_json(const reserve_model& r) {
  nlohmann::json j = {{"fixed_bytes", r.fixed},
                      {"fragmentation", r.fragmentation},
                      {"per_token_bytes", r.per_token},
                      {"source", r.source}};
  if (r.activation_extra != 0) j["activation_extra"] = r.activation_extra;  // written only when fitted
  return j;
}

reserve_model reserve_from_json(const nlohmann::json& j, const std::string& origin) {
  if (j.is_number_integer()) {  // records of 1.1 and before: the fixed reserve alone
    reserve_model r;
    r.fixed = j.get<std::int64_t>();
    return r;
  }
  if (!j.is_object()) throw bad_input(origin, "expected the reserve's terms as an object");
  detail::require_known_keys(j, {"fixed_bytes", "fragmentation", "per_token_bytes", "activation_extra", "source"},
                             origin);
  reserve_model r;
  r.fixed = int_field(j, "fixed_bytes", origin, 0, INT64_MAX / 4);
  r.fragmentation = opt_number_field(j, "fragmentation", origin).value_or(0);
  r.per_token = opt_number_field(j, "per_token_bytes", origin).value_or(0);
  r.activation_extra = opt_number_field(j, "activation_extra", origin).value_or(0);
  r.source = opt_string_field(j, "source", origin).value_or("");
  return r;
}

nlohmann::json problem_to_json(const problem& p) {
  const auto& s = p.training.split;
  nlohmann::json j = {{"model", model_to_json(p.model)},
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
            {"allocator_workspaces_bytes", p.device.allocator_workspaces},
            {"gpus_per_node", p.device.gpus_per_node}}}};
  // Recompute modules and MoE routing only where they are not the default (a dense problem's JSON is unchanged).
  if (p.training.recompute_modules != default_recompute_modules)
    j["training"]["recompute_modules"] = modules_to_json(p.training.recompute_modules);
  const moe_routing& r = p.training.routing;
  if (p.model.moe.enabled() || r.imbalance != 1.0 || r.capacity_factor != 0 || r.pad_to_capacity ||
      r.dispatcher != dispatcher_kind::alltoall)
    j["training"]["moe_routing"] = {{"imbalance", r.imbalance},
                                    {"capacity_factor", r.capacity_factor},
                                    {"pad_to_capacity", r.pad_to_capacity},
                                    {"dispatcher", to_string(r.dispatcher)}};
  return j;
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
  require_known_keys(t,
                     {"seq", "micro_batch", "global_batch", "attention", "loss", "pipeline_split", "recompute_modules",
                      "moe_routing"},
                     to);
  if (auto m = t.find("recompute_modules"); m != t.end()) p.training.recompute_modules = modules_from_json(*m, to);
  if (auto r = t.find("moe_routing"); r != t.end()) p.training.routing = routing_from_json(*r, to + ".moe_routing");
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
  require_known_keys(
      d, {"capacity_bytes", "reserve_bytes", "reserve", "fixed_overheads_bytes", "allocator_workspaces_bytes", "gpus_per_node"},
      dn);
  p.device.capacity = int_field(d, "capacity_bytes", dn, 1, INT64_MAX / 4);
  if (auto r = d.find("reserve"); r != d.end())
    p.device.reserve = reserve_from_json(*r, dn + ".reserve");
  else
    p.device.reserve.fixed = int_field(d, "reserve_bytes", dn, 0, INT64_MAX / 4);
  p.device.fixed_overheads =
      opt_int_field(d, "fixed_overheads_bytes", dn, 0, INT64_MAX / 4).value_or(p.device.fixed_overheads);
  p.device.allocator_workspaces = opt_int_field(d, "allocator_workspaces_bytes", dn, 0, INT64_MAX / 4)
                                      .value_or(p.device.allocator_workspaces);
  p.device.gpus_per_node =
      static_cast<int>(opt_int_field(d, "gpus_per_node", dn, 1, max_degree).value_or(p.device.gpus_per_node));
  validate(p.model);
  validate(p.training, p.device);
  return p;
}

nlohmann::json layout_to_json(const layout& l) {
  nlohmann::json j = {{"gpus", l.gpus},
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
  // The expert, hybrid-sharding and DeepSpeed fields only where they are not the default: a dense layout's
  // JSON is what it was before they existed.
  if (l.ep != 1) j["ep"] = l.ep;
  if (l.offload_params) j["offload_params"] = true;
  if (l.etp > 0 && l.etp != l.tp) j["etp"] = l.etp;
  if (l.dp_replicate != 1) j["dp_replicate"] = l.dp_replicate;
  if (l.reduce_bucket) j["reduce_bucket"] = l.reduce_bucket;
  if (l.prefetch_bucket) j["prefetch_bucket"] = l.prefetch_bucket;
  return j;
}

layout layout_from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw bad_input(origin, "expected the layout as an object");
  require_known_keys(j,
                     {"gpus", "tp", "pp", "cp", "dp", "vpp", "zero", "recompute", "sequence_parallel",
                      "offload_optimizer", "zero3_inflight_units", "zero3_live_params", "reshard_after_forward", "ep",
                      "etp", "dp_replicate", "reduce_bucket", "prefetch_bucket", "offload_params"},
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
  l.ep = static_cast<int>(opt_int_field(j, "ep", origin, 1, max_degree).value_or(l.ep));
  l.offload_params = opt_bool_field(j, "offload_params", origin).value_or(false);
  l.etp = static_cast<int>(opt_int_field(j, "etp", origin, 1, max_degree).value_or(l.etp));
  if (l.etp == l.tp) l.etp = 0;  // written as the degree; 0 is "the same as tp"
  l.dp_replicate = static_cast<int>(opt_int_field(j, "dp_replicate", origin, 1, max_degree).value_or(l.dp_replicate));
  l.reduce_bucket = opt_int_field(j, "reduce_bucket", origin, 0, INT64_MAX / 16).value_or(0);
  l.prefetch_bucket = opt_int_field(j, "prefetch_bucket", origin, 0, INT64_MAX / 16).value_or(0);
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
