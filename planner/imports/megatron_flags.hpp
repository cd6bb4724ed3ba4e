// megatron_flags.hpp: what headroom does with each pretrain_gpt.py flag, as data: read into the launch (the
// importer's readers look these up), unused (read, does not change memory), or unmodelled (changes memory,
// not modelled, with why). A flag in none of the tables is unknown and reported as unmodelled. Used by
// megatron_args.cpp only.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace headroom::detail {

enum class flag_arity { none, one, list, any };  // none: store_true; any: unused flags, values not read
enum class flag_role { read, unused, unmodelled };

struct megatron_flag {
  const char* name;  // with the leading "--"
  flag_arity arity;
  flag_role role;
  const char* why;  // unmodelled: what memory it changes and how it is priced instead
};

// Returns the rule of `name`, or nullptr when the flag is unknown.
const megatron_flag* find_megatron_flag(std::string_view name);

// Returns every flag name of the tables (read, unmodelled and unused): what an unknown flag is matched against
// for a "did you mean".
const std::vector<std::string>& megatron_flag_names();

}  // namespace headroom::detail
