// report_snapshot.hpp: the report's part for measured snapshots (html_report.hpp): from a snapshot
// record's "snapshot_view" (probes/snapshots/snapshot_record.hpp), the memory timeline with the live
// allocations stacked by their top user frame (as PyTorch's memory_viz "Active Memory Timeline" shows
// them), the largest allocations at the peak with their stacks, the segments at the peak; from a
// `probe snapshot --json` record of the same source, the real allocator beside the emulation and the
// what-if table. Everything read is checked first: a hostile record is refused with one line, never drawn
// from unchecked values.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "probes/records/measurement_record.hpp"

namespace headroom::calibrate::report {

// Returns the HTML of snapshot record `r`'s view: the timeline, the largest allocations and the segments at
// the peak. Throws bad_input naming the field when the view is malformed (a wrong type, a negative or
// too large figure, columns out of order, more entries than a record writes).
std::string snapshot_view_html(const probes::measurement_record& r);

// Returns the one-line outcome of a `probe snapshot` replay record (the emulation's out-of-memory first,
// then whether it agrees with the real allocator), "" when the record says nothing readable.
std::string replay_verdict(const nlohmann::json& replay);

// Returns the HTML of a `probe snapshot --json` record (records::kind::snapshot_replay): the real
// allocator beside the emulation, and its what-if table when it has one. Missing or mistyped fields are
// shown as "not recorded", never read unchecked.
std::string replay_html(const nlohmann::json& replay);

}  // namespace headroom::calibrate::report
