// torchtitan_keys.hpp: the key tables of the torchtitan TOML importer (torchtitan_config.cpp): every section of
// a job file and every key in it, sorted into read, unused or unmodelled (config_file.hpp).
#pragma once

#include <string>
#include <vector>

#include "planner/imports/config_file.hpp"

namespace headroom::detail {

// The key table of one section (job_config.py l.17-1024); a nested table ("quantize.linear") is a key of its
// section and has its own row.
struct section_rules {
  const char* name;
  std::vector<key_rule> keys;
};

// Returns every section's table, top-level sections before the ones nested in them.
const std::vector<section_rules>& torchtitan_sections();
// Returns the table of section `name` (dotted for a nested one), or nullptr when torchtitan has none.
const section_rules* find_section(const std::string& name);

}  // namespace headroom::detail
