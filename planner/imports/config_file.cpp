// config_file.cpp: key tables and TOML reading shared by the config-file importers (config_file.hpp).
#include "planner/imports/config_file.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/json_fields.hpp"
#include "planner/model_files.hpp"

namespace headroom::detail {

bool is_off(const nlohmann::json& v) {
  if (v.is_null()) return true;
  if (v.is_boolean()) return !v.get<bool>();
  if (v.is_number()) return v.get<double>() == 0.0;
  if (v.is_string()) return v.get<std::string>().empty() || v.get<std::string>() == "none";
  if (v.is_array()) return v.empty();
  if (v.is_object()) {
    auto it = v.find("enabled");
    return v.empty() || (it != v.end() && it->is_boolean() && !it->get<bool>());
  }
  return false;
}

bool is_near_miss(const std::string& key, const std::string& known) {
  const std::size_t d = edit_distance(key, known);
  return d <= 2 && 2 * d <= key.size();
}

std::string did_you_mean(const std::string& got, const std::vector<std::string>& known) {
  const std::string near = closest_name(got, known);
  return near.empty() ? "" : " (did you mean '" + near + "'?)";
}

void classify_keys(const nlohmann::json& obj, const std::vector<key_rule>& table, const std::string& prefix,
                   launch_import& imp) {
  if (!obj.is_object()) return;
  std::vector<std::string> names;
  for (const auto& r : table) names.emplace_back(r.key);
  for (auto item = obj.begin(); item != obj.end(); ++item) {
    const std::string& key = item.key();
    const nlohmann::json& value = item.value();
    const std::string path = prefix.empty() ? shown_name(key) : prefix + "." + shown_name(key);
    auto rule = std::find_if(table.begin(), table.end(), [&](const key_rule& r) { return key == r.key; });
    if (rule == table.end()) {
      const std::string near = closest_name(key, names);
      if (!near.empty() && is_near_miss(key, near))  // a typo: planning on would silently drop the setting
        throw bad_input(path, "unknown key (did you mean '" + (prefix.empty() ? near : prefix + "." + near) +
                                  "'?): correct its spelling");
      imp.unmodelled.push_back(path + ": unknown key, may change memory" +
                               (near.empty() ? "" : " (did you mean '" + near + "'?)"));
    } else if (rule->use == key_use::unused || (rule->use == key_use::unmodelled && is_off(value))) {
      imp.unused.push_back(path);
    } else if (rule->use == key_use::unmodelled) {
      imp.unmodelled.push_back(path + ": " + rule->why);
    }
  }
}

namespace {

using nlohmann::json;

// Turns a TOML node into JSON (dates and times become strings; nothing here reads them). Refuses nesting
// deeper than 64 (a job file's keys are at most 4 deep): the recursion stays bounded whatever got past
// check_key_depth.
json to_json(const toml::node& n, int depth = 0) {
  if (depth > 64) throw bad_input("toml", "keys or values nested more than 64 levels deep");
  if (auto t = n.as_table()) {
    json o = json::object();
    for (const auto& [k, v] : *t) o[std::string(k.str())] = to_json(v, depth + 1);
    return o;
  }
  if (auto a = n.as_array()) {
    json o = json::array();
    for (const auto& v : *a) o.push_back(to_json(v, depth + 1));
    return o;
  }
  if (auto v = n.as_integer()) return v->get();
  if (auto v = n.as_floating_point()) return v->get();
  if (auto v = n.as_boolean()) return v->get();
  if (auto v = n.as_string()) return v->get();
  return "a date or time";
}

// tomlplusplus caps nested values (arrays, inline tables) at 256 but not dotted keys: "a.a.a...= 1" with
// some tens of thousands of parts overflows its stack (found here: 50,000 parts crash it). Every key path of
// a job file is at most 4 deep ([quantize.linear.float8]), so a key or table header of more than
// max_key_parts dotted parts is refused before parsing. Dots inside quoted keys count too: harmless. Quoted
// keys and inline tables can hide a dotted key from that rule ("=".b.b..., a = {b.b... = 1}): a line with more
// than max_line_dots dots anywhere is refused as well (the importer fuzz target found both forms).
constexpr std::size_t max_key_parts = 32;
constexpr std::size_t max_line_dots = 256;

void check_key_depth(const std::string& text) {
  std::size_t line_no = 1;
  for (std::size_t from = 0; from < text.size(); ++line_no) {
    const std::size_t end = std::min(text.find('\n', from), text.size());
    std::size_t a = text.find_first_not_of(" \t", from);
    if (a < end) {
      // The key part: a header up to its first ']', or the text before the first '='.
      const std::size_t stop =
          text[a] == '[' ? std::min(text.find(']', a), end) : std::min(text.find('=', a), end);
      if (static_cast<std::size_t>(std::count(text.begin() + static_cast<std::ptrdiff_t>(a),
                                              text.begin() + static_cast<std::ptrdiff_t>(stop), '.')) >=
          max_key_parts)
        throw bad_input("line " + std::to_string(line_no),
                        "a key nested more than " + std::to_string(max_key_parts) + " levels deep");
      if (static_cast<std::size_t>(std::count(text.begin() + static_cast<std::ptrdiff_t>(a),
                                              text.begin() + static_cast<std::ptrdiff_t>(end), '.')) >
          max_line_dots)
        throw bad_input("line " + std::to_string(line_no),
                        "more than " + std::to_string(max_line_dots) + " dots on one line (keys nested too deep)");
    }
    from = end + 1;
  }
}

json parse_toml(const std::string& text) {
  check_key_depth(text);
  try {
    return to_json(toml::parse(text));
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw bad_input("malformed TOML", "line " + std::to_string(b.line) + ", column " +
                                          std::to_string(b.column) + ": " +
                                          printable(std::string(e.description()), 120));
  }
}

}  // namespace

json toml_to_json(const std::string& text) {
  return parse_toml(text);
}

json toml_value_to_json(const std::string& value) {
  try {
    return to_json(*toml::parse("v = " + value)["v"].node());
  } catch (const toml::parse_error&) {
    return value;
  }
}

}  // namespace headroom::detail
