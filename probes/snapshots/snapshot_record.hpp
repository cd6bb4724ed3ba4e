// snapshot_record.hpp: the measurement record of a snapshot (what summary.hpp found, as JSON), with the view
// the report draws (calibrate/report_snapshot.hpp): the memory timeline stacked by top user frame, the
// largest allocations with their stacks and the segments at the peak.
#pragma once

#include <cstddef>
#include <nlohmann/json_fwd.hpp>

#include "probes/snapshots/summary.hpp"

namespace headroom::probes {

// How much of a snapshot the view keeps, so a record stays small whatever the trace's length: a report page
// is about 1,100 pixels wide, so 600 columns are more than the eye can tell apart (each keeps the largest
// value of its events, so no peak is lost).
struct snapshot_view_limits {
  static constexpr std::size_t columns = 600;
  static constexpr std::size_t frames = 11;       // top frames drawn; the rest are summed as "other"
  static constexpr std::size_t largest = 20;      // largest allocations at the peak
  static constexpr std::size_t stack_frames = 8;  // frames kept per allocation's stack
  static constexpr std::size_t segments = 400;    // segments at the peak listed (all are counted)
  static constexpr std::size_t sites = 20;        // call sites at the peak listed (the rest are summed)
};

// Returns the tally of a device's events (snapshot.hpp) as the records write it: {"total", "replayed",
// "allocs", "frees", "releases", "not_replayed", "free_requested", "unmatched_frees", "segment_events",
// "ooms", "others"}.
nlohmann::json tally_json(const snap_event_tally& t);

// Returns the blocks alive at the peak (peak_breakdown.hpp) as the record writes them: {"inferred": true,
// "rules", "bytes", "peak_phase", "peak_phase_how", "frames_recorded", "by_phase": {phase: bytes},
// "by_kind": {kind: bytes}, "by_site": [{"site", "blocks", "bytes", "largest"}] (largest first, at most
// snapshot_view_limits::sites), "other_sites": {"sites", "blocks", "bytes"}}.
nlohmann::json peak_breakdown_json(const snap_peak_breakdown& b);

// Returns the view of the device with the most events (null when the snapshot has no device trace):
// {"version": 1, "device", "events", "columns": [[first, end, requested, reserved], ...] (bytes, each the
// largest over events [first, end)), "frames": [top user frame, ..., "other frames"], "stacks": [[bytes per
// frame] per column, at the column's largest requested], "peak": {"event", "requested", "reserved"},
// "largest_at_peak": [{"address", "bytes", "frame", "stack"}], "segments_at_peak": {"count", "bytes",
// "list": [{"address", "bytes", "live_bytes", "live_blocks"}]}, "reserved_from", "segments_from", "note"}.
nlohmann::json snapshot_view(const torch_snapshot& s);

// Returns the record of a snapshot (records::kind::measurement, backend "pytorch-snapshot", measured: true),
// its "snapshot_view" included.
nlohmann::json snapshot_record(const torch_snapshot& s, const snap_summary& sum);

}  // namespace headroom::probes
