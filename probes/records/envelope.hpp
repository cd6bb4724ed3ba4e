// envelope.hpp: the fields every JSON document headroom writes begins with, written one way by every
// command: schema (schema.hpp), tool, tool_version, git_revision, created (ISO 8601 UTC).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "probes/records/schema.hpp"

namespace headroom::records {

// Returns the tool's version ("0.1.0", from CMake's project()).
std::string tool_version();
// Returns the git revision the library was built from ("0123456789ab", "-dirty" when the tree had
// uncommitted changes, "unknown" outside a checkout).
std::string git_revision();
// Returns the current time as ISO 8601 UTC ("2026-11-30T17:00:00Z").
std::string utc_now();
// Returns a document holding only the envelope of kind `k`; the writer adds its own fields after it.
nlohmann::json envelope(kind k);
// Returns `doc` with the envelope of kind `k` in front (its own fields kept, in order, after it).
nlohmann::json enveloped(kind k, const nlohmann::json& doc);

}  // namespace headroom::records
