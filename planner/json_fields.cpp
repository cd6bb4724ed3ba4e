// json_fields.cpp: typed JSON field readers whose errors name the field (see json_fields.hpp).
#include "json_fields.hpp"

#include <cmath>

#include "errors.hpp"

namespace headroom::detail {

namespace {
// Returns a value for an error message: scalars as written (cut at 60 characters), containers by their
// kind only, so no error path walks or prints an unbounded value.
std::string shown(const nlohmann::json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string where(const std::string& origin, const std::string& key) {
  return origin.empty() ? key : origin + "." + key;
}
}  // namespace

std::optional<std::int64_t> opt_int_field(const nlohmann::json& j, const std::string& key,
                                          const std::string& origin, std::int64_t lo, std::int64_t hi) {
  if (!j.is_object()) throw bad_input(origin.empty() ? "input" : origin, "expected a JSON object");
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  std::int64_t v = 0;
  if (it->is_number_integer()) {
    if (it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      throw bad_input(where(origin, key), "is too large");
    v = it->get<std::int64_t>();
  } else if (it->is_number_float()) {
    double d = it->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e18)
      throw bad_input(where(origin, key), "must be a whole number, got " + shown(*it));
    v = static_cast<std::int64_t>(d);
  } else {
    throw bad_input(where(origin, key), "must be an integer, got " + shown(*it));
  }
  if (v < lo || v > hi)
    throw bad_input(where(origin, key), "must be between " + std::to_string(lo) + " and " +
                                            std::to_string(hi) + ", got " + std::to_string(v));
  return v;
}

std::int64_t int_field(const nlohmann::json& j, const std::string& key, const std::string& origin,
                       std::int64_t lo, std::int64_t hi) {
  auto v = opt_int_field(j, key, origin, lo, hi);
  if (!v) throw bad_input(where(origin, key), "missing");
  return *v;
}

std::optional<double> opt_number_field(const nlohmann::json& j, const std::string& key,
                                       const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) throw bad_input(where(origin, key), "must be a number, got " + shown(*it));
  double d = it->get<double>();
  if (!std::isfinite(d) || d < 0) throw bad_input(where(origin, key), "must be a non-negative number");
  return d;
}

std::optional<bool> opt_bool_field(const nlohmann::json& j, const std::string& key,
                                   const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) throw bad_input(where(origin, key), "must be true or false, got " + shown(*it));
  return it->get<bool>();
}

std::optional<std::string> opt_string_field(const nlohmann::json& j, const std::string& key,
                                            const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) throw bad_input(where(origin, key), "must be a string, got " + shown(*it));
  return it->get<std::string>();
}

}  // namespace headroom::detail
