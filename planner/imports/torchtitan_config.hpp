// torchtitan_config.hpp: the torchtitan TOML job file importer (--torchtitan-config). torchtitan read TOML
// job files (torchtitan/models/*/train_configs/*.toml) until its config refactor of 2026-02-23 (PR #2386,
// commit 9810191bb); this reads that format as of the last commit before it (238fa995), with the older
// spellings users still hold, and the degrees of files written before [parallelism] (2025-03). [model] name /
// flavor give the model, from torchtitan's flavor table (torchtitan_flavors.hpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "planner/imports/launch.hpp"

namespace headroom {

// Returns the launch a torchtitan TOML job file at `path` describes, after applying `overrides` as
// torchtitan's command line took them ("parallelism.tensor_parallel_degree=4", a leading "--" allowed; the
// value is read as a TOML value, else as a string). `world_size` (GPUs) resolves
// data_parallel_shard_degree = -1 and checks that the degrees multiply to it. Throws bad_input naming the
// file and key on malformed TOML, a wrong type, an unknown override key, or degrees that do not fit.
launch_import load_torchtitan_config(const std::string& path, const std::vector<std::string>& overrides,
                                     std::optional<int> world_size);

// As load_torchtitan_config, from TOML text; `origin` names it in errors and in the result.
launch_import torchtitan_config_from_toml(const std::string& text, const std::string& origin,
                                          const std::vector<std::string>& overrides,
                                          std::optional<int> world_size);

}  // namespace headroom
