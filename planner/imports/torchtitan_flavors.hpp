// torchtitan_flavors.hpp: torchtitan's model flavors ([model] name / flavor of a job file) as a table of ours,
// presets/torchtitan/flavors.json, read from torchtitan's source at the commit the file names (the flavor
// dictionaries of torchtitan/models/*/__init__.py and their args' defaults), so a job file alone plans.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "planner/layout.hpp"
#include "planner/model_spec.hpp"

namespace headroom {

struct torchtitan_flavor {
  std::string key;                        // "llama3/8B", the table's own spelling
  std::optional<model_spec> model;        // absent for a flavor that is not a language model (flux)
  attention_kind attention = attention_kind::flash;  // the args' attn_type: sdpa and varlen fused, or flex
  std::string attn_type;                  // as torchtitan names it: "sdpa", "flex", "varlen"
  std::string not_modelled;               // why this version cannot plan it ("" when it can)
};

// Returns the path of the flavor table: presets/torchtitan/flavors.json under preset_dir() (model_files.hpp).
std::string torchtitan_flavor_table_path();

// Returns the flavor `name`/`flavor` of the table at `path` (torchtitan's aliases applied: llama3_ft reads
// llama3's), nullopt when the table has no model `name` at all (a model registered by user code). Throws
// bad_input naming [model] and the nearest flavors when `name` is known and `flavor` is not, and naming the
// table's file and entry when the table itself is malformed.
std::optional<torchtitan_flavor> find_torchtitan_flavor(const std::string& name, const std::string& flavor,
                                                        const std::string& path);

// Returns every "name/flavor" key of the table at `path`, sorted.
std::vector<std::string> torchtitan_flavor_keys(const std::string& path);

}  // namespace headroom
