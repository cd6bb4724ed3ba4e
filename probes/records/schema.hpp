// schema.hpp: the one registry of the JSON documents headroom writes and reads. Each kind has one current
// version (written) and the major version its readers accept; a document's `schema` is
// "headroom.KIND/MAJOR.MINOR" ("headroom.KIND/MAJOR" for minor 0). A minor adds fields and never changes
// one; readers refuse another major. results/README.md documents each kind once.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace headroom::records {

enum class kind {
  plan,             // headroom plan --json
  suggest,          // headroom plan --suggest --json
  min_gpus,         // headroom plan --min-gpus --json
  plan_max_fit,     // headroom plan --max-fit AXIS --json
  trace,            // headroom trace --json, headroom snapshot --trace
  measurement,      // probe records (sim, cuda, one rank of a multi-rank probe) and snapshot records
  overheads,        // headroom probe overheads --json
  max_fit,          // headroom probe max-fit --json
  multi_rank,       // rank 0's summary of a multi-rank probe
  snapshot_replay,  // headroom probe snapshot --json
  calibration,      // headroom calibrate -o
  validation_pack,  // presets/validation/*.json (read only)
  validate,         // headroom validate --json
  torch_replay,     // probes/trace/torch_replay.py --out (written by Python)
};

// A schema as named in a document.
struct version {
  std::string kind;  // "measurement"
  int major = 0, minor = 0;
};

// Returns the kind's name as spelt in schemas ("min_gpus").
std::string_view name_of(kind k);
// Returns the version this build writes for `k`.
version current(kind k);
// Returns the schema string this build writes for `k` ("headroom.measurement/1.5").
std::string schema_of(kind k);
// Returns the schema string of `v`.
std::string to_string(const version& v);
// Returns the version named by `schema` ("headroom.KIND/MAJOR[.MINOR]"), or nullopt when it is not one.
std::optional<version> parse(std::string_view schema);
// Returns the version of document `doc` when its schema is `k` at the major this build reads. Throws
// bad_input(origin, ...) naming what was found and what is accepted ("headroom.calibration/1.x").
version require(const nlohmann::json& doc, kind k, const std::string& origin);

}  // namespace headroom::records
