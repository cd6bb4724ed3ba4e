// json_fields.hpp: reading typed fields out of JSON with errors that name the field.
// Used by every JSON reader (models, recipes, HuggingFace configs) so their messages read alike.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace headroom::detail {

// Returns j[key] as an integer; throws bad_input "<origin>.<key>: ..." when missing, not a whole number,
// or outside [lo, hi]. A float that holds a whole number (175e9) is accepted.
std::int64_t int_field(const nlohmann::json& j, const std::string& key, const std::string& origin,
                       std::int64_t lo, std::int64_t hi);
// As int_field, but returns nullopt when the key is absent or null.
std::optional<std::int64_t> opt_int_field(const nlohmann::json& j, const std::string& key,
                                          const std::string& origin, std::int64_t lo, std::int64_t hi);
// Returns j[key] as a number (>= 0); nullopt when absent or null.
std::optional<double> opt_number_field(const nlohmann::json& j, const std::string& key,
                                       const std::string& origin);
std::optional<bool> opt_bool_field(const nlohmann::json& j, const std::string& key,
                                   const std::string& origin);
std::optional<std::string> opt_string_field(const nlohmann::json& j, const std::string& key,
                                            const std::string& origin);

}  // namespace headroom::detail
