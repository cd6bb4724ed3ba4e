// json_fields.hpp: reading typed fields out of JSON with errors that name the field.
// Used by every JSON reader (models, recipes, HuggingFace configs) so their messages read alike.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

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

// Returns the Levenshtein distance between `name` (its first 64 characters) and `b`.
std::size_t edit_distance(const std::string& name, const std::string& b);
// Returns the name in `known` closest to `name` by edit distance, or "" when none is within a third of its
// length (at least 2 edits): the "did you mean" of an unknown key.
std::string closest_name(const std::string& name, const std::vector<std::string>& known);
// Returns up to `count` names of `known`, nearest to `name` by edit distance first (ties in `known`'s order):
// what an error names instead of a list cut short.
std::vector<std::string> nearest_names(const std::string& name, const std::vector<std::string>& known,
                                       std::size_t count);
// Throws bad_input "<origin>.<key>: unknown key (did you mean '<closest>'?)" for the first key of object `j`
// not in `known`: a typo is never silently ignored.
void require_known_keys(const nlohmann::json& j, const std::vector<std::string>& known, const std::string& origin);

// The fields of a model that this version does not model, with what they describe: mixture-of-experts
// (experts, routing, shared experts, dense-layer placement) and multi-latent attention (the low-rank
// query / key-value projections). A model or config holding one is refused, never priced as dense.
struct unmodelled_field {
  const char* key;
  const char* what;  // "mixture-of-experts" or "multi-latent attention"
};
const std::vector<unmodelled_field>& unmodelled_fields();
// Throws bad_input naming the first unmodelled field of `j` that is set (not null, not 0, not false).
void refuse_unmodelled(const nlohmann::json& j, const std::string& origin);

}  // namespace headroom::detail
