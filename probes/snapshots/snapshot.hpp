// snapshot.hpp: a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot()) as data. A snapshot holds,
// per device, the allocator's own event trace (alloc / free / segment events with addresses, sizes, streams
// and stack frames), the final segments with their blocks, and the allocator settings. This file reads one
// (pickle or JSON). What is done with it lives beside it, one job a file: summary.hpp (what it measured),
// warm_start.hpp (the allocator's state when recording began), convert.hpp (a step trace), replay.hpp (the
// emulation against the real allocator), what_if.hpp (other settings), snapshot_record.hpp (the record).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "probes/snapshots/pickle_reader.hpp"

namespace headroom::probes {

enum class snap_action : std::uint8_t {
  alloc,
  free_requested,
  free_completed,
  segment_alloc,
  segment_free,
  segment_map,
  segment_unmap,
  oom,
  snapshot,
  other
};
const char* to_string(snap_action a);

struct snap_event {
  snap_action action = snap_action::other;
  std::uint64_t addr = 0;
  std::int64_t size = 0;  // alloc / free: the bytes requested; segment events: the segment's bytes
  std::int64_t stream = 0;
  std::int64_t time_us = 0;
  std::int64_t device_free = -1;      // oom: what the driver said was free
  std::uint32_t frames = UINT32_MAX;  // node of the frames list in the document, when recorded
};

// How the events of one device trace are counted, alike by `headroom snapshot` (summary.hpp) and by
// `probe snapshot` (convert.hpp), so that every event falls in exactly one count. Replayed: an alloc, the
// free that ends a block's life (free_completed when the trace records completions, else free_requested),
// the last segment release of a run (replayed as one empty_cache). Not replayed: a free_requested whose
// block lives on to its free_completed, a free of no block alive in the trace, the other segment events (the
// emulation makes its own segments), out-of-memory events (the emulation finds its own), and the rest.
struct snap_event_tally {
  std::size_t events = 0;
  std::size_t allocs = 0, frees = 0, releases = 0;  // replayed
  std::size_t requests = 0, unmatched_frees = 0, segment_events = 0, ooms = 0, others = 0;  // not replayed
  std::size_t replayed() const { return allocs + frees + releases; }
  std::size_t not_replayed() const { return requests + unmatched_frees + segment_events + ooms + others; }
  bool operator==(const snap_event_tally&) const = default;
};

struct snap_block {
  std::uint64_t address = 0;
  std::int64_t size = 0, requested = 0;
  bool allocated = false;  // state active_allocated (or active_pending_free)
  std::uint32_t frames = UINT32_MAX;
};

struct snap_segment {
  std::int64_t device = 0;
  std::uint64_t address = 0;
  std::int64_t total_size = 0, allocated_size = 0, requested_size = 0;
  std::int64_t stream = 0;
  bool small = false, expandable = false;
  std::vector<snap_block> blocks;
};

struct snap_settings {
  std::string conf;                            // PYTORCH_CUDA_ALLOC_CONF as recorded
  std::optional<std::int64_t> max_split_size;  // bytes; none when PyTorch records -1 / SIZE_MAX
  bool expandable_segments = false;
  double garbage_collection_threshold = 0;
  bool recorded = false;  // the snapshot carried allocator_settings
};

struct torch_snapshot {
  std::string origin;
  pdoc doc;                                      // the parsed file: frames stay here, referenced by node
  std::vector<std::vector<snap_event>> devices;  // device_traces
  std::vector<snap_segment> segments;
  snap_settings settings;
  std::optional<std::int64_t> capacity;  // bytes of the device, when the snapshot records it
};

// What a snapshot may be, so a hostile or careless file is refused in seconds with bounded memory.
struct snapshot_limits {
  // A snapshot file written as a pickle: real ones hold about one value per 23 bytes, so a 256 MiB file is
  // about 12 million values, under pickle_limits' 16 million (each value is 80 bytes in memory).
  std::uintmax_t max_pickle_bytes = std::uintmax_t{256} << 20;
  std::uintmax_t max_json_bytes = std::uintmax_t{64} << 20;  // as JSON (every JSON input's limit)
  // Records (events, segments, blocks) and the dict entries behind them, counted as they are
  // materialised: a list the pickle's memo references twice counts twice, so a 400 KB pickle that repeats
  // one event list thousands of times is refused before it is expanded. A real event costs at least 40
  // bytes of pickle, so no real file under the size limit holds 2^23 records (about 0.5 GB as events).
  std::size_t max_records = std::size_t{1} << 23;
  std::size_t max_fields = std::size_t{1} << 27;
};

// Returns the snapshot in `bytes` (a pickle, or the same content as JSON). Throws bad_input naming the
// problem: not a pickle / JSON, an opcode outside the plain-data subset, a missing or mistyped field, a
// limit passed, or a snapshot that contradicts itself (check_consistent).
torch_snapshot parse_snapshot(std::string_view bytes, const std::string& origin,
                              const snapshot_limits& limits = {});
// Reads (read_regular_file, planner/model_files.hpp) and parses the file at `path`. Throws bad_input when it
// is not a regular file, is over the size limit, or cannot be read or parsed.
torch_snapshot load_snapshot(const std::string& path, const snapshot_limits& limits = {});

// Throws bad_input("<origin>", "inconsistent snapshot: ...") naming the first contradiction: a block
// outside its segment or blocks larger than their segment, overlapping blocks or segments, a
// max_split_size PyTorch refuses (below 20 MiB), a range mapped twice or unmapped twice by the segment
// events, a segment freed with another size than it was allocated with, or segment events whose end state
// is not the final segments (bytes left mapped that no segment holds, or a segment over unmapped bytes).
void check_consistent(const torch_snapshot& s);

// Returns "name (file.py:line)" of the first stack frame in user code (a .py file outside torch itself),
// else the first Python frame, else "" when the event carries no frames.
std::string top_user_frame(const pdoc& doc, std::uint32_t frames);

}  // namespace headroom::probes
