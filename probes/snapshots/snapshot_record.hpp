// snapshot_record.hpp: the measurement record of a snapshot (what summary.hpp found, as JSON).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "probes/snapshots/summary.hpp"

namespace headroom::probes {

// Returns the record of a snapshot (records::kind::measurement, backend "pytorch-snapshot", measured: true).
nlohmann::json snapshot_record(const torch_snapshot& s, const snap_summary& sum);

}  // namespace headroom::probes
