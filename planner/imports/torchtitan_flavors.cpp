// torchtitan_flavors.cpp: reads presets/torchtitan/flavors.json (torchtitan_flavors.hpp). Each entry holds a
// model in the preset format (model_spec.hpp, model_from_json), torchtitan's attn_type for it, and, where this
// version cannot plan the flavor, why.
#include "planner/imports/torchtitan_flavors.hpp"

#include <nlohmann/json.hpp>

#include "planner/errors.hpp"
#include "planner/json_fields.hpp"
#include "planner/model_files.hpp"

namespace headroom {

namespace {

// Returns the table at `path`, checked to hold a "flavors" object (a small file, read per import).
nlohmann::json table_at(const std::string& path) {
  nlohmann::json j = read_json_file(path);
  if (!j.is_object() || !j.contains("flavors") || !j["flavors"].is_object())
    throw bad_input(shown_name(path), "expected an object with \"flavors\"");
  return j;
}

torchtitan_flavor flavor_from(const std::string& key, const nlohmann::json& e, const std::string& path) {
  const std::string where = shown_name(path) + ": flavors." + key;
  if (!e.is_object()) throw bad_input(where, "expected an object");
  detail::require_known_keys(e, {"attention", "model", "not_modelled"}, where);
  torchtitan_flavor f;
  f.key = key;
  f.not_modelled = detail::opt_string_field(e, "not_modelled", where).value_or("");
  f.attn_type = detail::opt_string_field(e, "attention", where).value_or("sdpa");
  // SDPA (flash, cuDNN or memory-efficient kernels) and varlen (flash's variable-length kernel) keep no s x s
  // tensor; flex is PyTorch's compiled flex_attention (layout.hpp, attention_kind).
  if (f.attn_type == "sdpa" || f.attn_type == "varlen")
    f.attention = attention_kind::flash;
  else if (f.attn_type == "flex")
    f.attention = attention_kind::flex;
  else
    throw bad_input(where + ".attention", "must be sdpa, flex or varlen");
  if (auto m = e.find("model"); m != e.end()) f.model = model_from_json(*m, where + ".model");
  if (!f.model && f.not_modelled.empty()) throw bad_input(where, "has neither a model nor a reason it has none");
  return f;
}

}  // namespace

std::string torchtitan_flavor_table_path() { return preset_dir() + "/torchtitan/flavors.json"; }

std::vector<std::string> torchtitan_flavor_keys(const std::string& path) {
  std::vector<std::string> keys;
  const nlohmann::json t = table_at(path);
  for (const auto& [k, v] : t["flavors"].items()) keys.push_back(k);
  return keys;
}

std::optional<torchtitan_flavor> find_torchtitan_flavor(const std::string& name, const std::string& flavor,
                                                        const std::string& path) {
  const nlohmann::json t = table_at(path);
  std::string model = name;
  if (auto a = t.find("aliases"); a != t.end() && a->is_object() && a->contains(name) && (*a)[name].is_string())
    model = (*a)[name].get<std::string>();
  const std::string key = model + "/" + flavor;
  const auto& flavors = t["flavors"];
  if (auto it = flavors.find(key); it != flavors.end()) return flavor_from(key, *it, path);
  std::vector<std::string> same_model;
  for (const auto& [k, v] : flavors.items())
    if (k.rfind(model + "/", 0) == 0) same_model.push_back(k.substr(model.size() + 1));
  if (same_model.empty()) return std::nullopt;
  std::string named;
  for (const auto& n : detail::nearest_names(flavor, same_model, 4)) named += (named.empty() ? "" : ", ") + n;
  const std::string near = detail::closest_name(flavor, same_model);
  throw bad_input("model.flavor",
                  "'" + shown_name(flavor) + "' is not a flavor of " + shown_name(name) +
                      (near.empty() ? "" : " (did you mean '" + near + "'?)") + "; " + shown_name(name) +
                      "'s flavors nearest it: " + named + " (torchtitan @ 238fa995, presets/torchtitan/flavors.json)");
}

}  // namespace headroom
