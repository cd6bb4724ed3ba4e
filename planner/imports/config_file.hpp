// config_file.hpp: what the config-file launch importers (DeepSpeed JSON, torchtitan TOML) share: the key
// tables that sort every key of a file into read, unused or unmodelled, and TOML read as JSON so one set of
// typed field readers (planner/json_fields.hpp) serves both formats.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "planner/imports/launch.hpp"

namespace headroom::detail {

// How an importer treats a config key: read into the launch, read but without memory effect, or
// changing memory in a way the planner does not model (refused by the CLI unless --allow-unmodelled).
enum class key_use { read, unused, unmodelled };

// Short names for the importers' packed key tables (deepspeed_keys.cpp, torchtitan_keys.cpp): a table opens
// them with `using namespace key_uses;` inside its own function.
namespace key_uses {
inline constexpr auto R = key_use::read;
inline constexpr auto U = key_use::unused;
inline constexpr auto X = key_use::unmodelled;
}  // namespace key_uses

// One row of an importer's key table. `why` says, for an unmodelled key, what it changes.
struct key_rule {
  const char* key;
  key_use use;
  const char* why = "";
};

// Returns whether the unknown `key` is a misspelling of the known name `known`: at most 2 edits apart, and
// at most one edit per 2 characters of the key ("stgae" of "stage", "tensor_paralel_degree"). Such a key is
// refused, not listed as unmodelled: planned on, the typo would silently change the layout (tp 8 -> 1).
bool is_near_miss(const std::string& key, const std::string& known);

// Sorts the keys of object `obj` (at dotted path `prefix`, "" for the top) by `table`: unused keys are
// appended to imp.unused, unmodelled ones to imp.unmodelled as "key: why" unless their value is off (null,
// false, 0, "none", "", an empty list, or an object whose "enabled" is false), and keys not in the table to
// imp.unmodelled as "unknown key, may change memory" with the nearest known name. Keys marked read are
// left to the caller. Throws bad_input("<path>", "unknown key (did you mean '<known>'?) ...") for a key that
// is_near_miss of a known one.
void classify_keys(const nlohmann::json& obj, const std::vector<key_rule>& table, const std::string& prefix,
                   launch_import& imp);

// Returns " (did you mean '<name>'?)" for the name of `known` nearest `got` (json_fields.hpp closest_name),
// "" when none is near: what a refusal of a value outside a fixed set appends.
std::string did_you_mean(const std::string& got, const std::vector<std::string>& known);

// Returns whether a config value turns its feature off (the test classify_keys applies).
bool is_off(const nlohmann::json& v);

// Returns the TOML document `text` as JSON (tables as objects; dates and times as strings). Throws
// bad_input("malformed TOML", "line L, column C: ...") on a syntax error or invalid UTF-8, and
// bad_input("line L", ...) on a key nested more than 32 dotted parts deep.
nlohmann::json toml_to_json(const std::string& text);

// Returns one TOML value written alone ("4", "true", "[\"a\"]", "\"x\"") as JSON, or the text itself as a
// string when it is not a TOML value (a bare word, as torchtitan's command line took it).
nlohmann::json toml_value_to_json(const std::string& value);

}  // namespace headroom::detail
