// enum_names.hpp: one table of names per enum (enum_name), and what reads it: parse_name, names_of (the
// CLI's check), names_phrase (error messages) and name_of. Each enum's table and its name_table overload
// stand beside the enum (layout.hpp, model_spec.hpp); these templates find the overload by its type.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace headroom {

// The names of an enum's values, one table per enum: to_string, parse_name, names_of (the CLI's check)
// and names_phrase (error messages) all read it. Listed in the order the CLI offers them.
template <class E>
struct enum_name {
  E value;
  const char* name;
};
// Returns the name of `v` in E's table, "?" for a value the table lacks.
template <class E>
const char* name_of(E v) {
  for (const auto& e : name_table(v))
    if (e.value == v) return e.name;
  return "?";
}
// Returns the value of E named `s`, or nullopt when no value has that name.
template <class E>
std::optional<E> parse_name(std::string_view s) {
  for (const auto& e : name_table(E{}))
    if (s == e.name) return e.value;
  return std::nullopt;
}
// Returns every name of E, in the table's order (what the CLI accepts).
template <class E>
std::vector<std::string> names_of() {
  std::vector<std::string> v;
  for (const auto& e : name_table(E{})) v.emplace_back(e.name);
  return v;
}
// Returns the names of E as a phrase for messages: "none, selective or full", "eager or flash".
template <class E>
std::string names_phrase() {
  const auto t = name_table(E{});
  std::string s;
  for (std::size_t i = 0; i < t.size(); ++i)
    s += (i == 0 ? "" : i + 1 == t.size() ? " or " : ", ") + std::string(t[i].name);
  return s;
}

}  // namespace headroom
