// snapshot.hpp: PyTorch memory snapshots (torch.cuda.memory._dump_snapshot()) as measurements. A snapshot
// holds, per device, the allocator's own event trace (alloc / free / segment events with addresses, sizes,
// streams and stack frames), the final segments with their blocks, and the allocator settings. This file
// reads one (pickle or JSON), summarises what it measured (peaks, fragmentation, the largest live blocks
// and who allocated them, out-of-memory events), turns it into a step trace, and replays that trace through
// the caching-allocator emulation to check the emulation against the real allocator event by event and to
// ask "what if" under other settings.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "caching_allocator.hpp"
#include "pickle_reader.hpp"
#include "step_trace.hpp"

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

// Returns the snapshot in `bytes` (a pickle, or the same content as JSON). Throws bad_input naming the
// problem: not a pickle / JSON, an opcode outside the plain-data subset, a missing or mistyped field.
torch_snapshot parse_snapshot(std::string_view bytes, const std::string& origin);
// Reads and parses the file at `path`. Throws bad_input when it cannot be read or parsed.
torch_snapshot load_snapshot(const std::string& path);

// Returns "name (file.py:line)" of the first stack frame in user code (a .py file outside torch itself),
// else the first Python frame, else "" when the event carries no frames.
std::string top_user_frame(const pdoc& doc, std::uint32_t frames);

struct snap_live_block {
  std::uint64_t addr = 0;
  std::int64_t size = 0;
  std::string frame;
};

struct snap_oom {
  std::size_t event = 0;
  std::int64_t size = 0, device_free = -1;
  std::string frame;
};

// What one device's trace measured.
struct snap_device_summary {
  int device = 0;
  std::size_t events = 0;
  std::map<std::string, std::size_t> counts;  // per action
  std::vector<std::int64_t> streams;
  bool cold = false;
  std::string cold_why;  // why it is cold or warm
  // Blocks alive before the window (warm traces): freed in it without being allocated in it, or allocated
  // in the final segments without an alloc event; their requested bytes start the requested curve.
  std::size_t live_before = 0;
  std::int64_t live_before_bytes = 0;
  // Warm: whether the allocator's state at the start was undone from the final segments, and how (or
  // what could not be undone).
  bool start_reconstructed = false;
  std::string start_why;
  std::int64_t peak_requested = 0;
  std::size_t peak_requested_event = 0;
  std::vector<snap_live_block> largest_at_peak;  // at the requested peak, largest first (at most 10)
  bool reserved_from_events = false;             // segment events present: reserved is known over the trace
  std::int64_t peak_reserved = 0;
  std::size_t peak_reserved_event = 0;
  std::int64_t requested_at_reserved_peak = 0;
  // 1 - requested / reserved at the reserved peak (the trace carries requested bytes, not block sizes).
  double fragmentation_at_reserved_peak = 0;
  std::vector<snap_oom> ooms;
  std::size_t empty_cache_calls = 0;  // runs of segment frees not followed by a segment_alloc
};

struct snap_summary {
  std::vector<snap_device_summary> devices;
  std::size_t final_segments = 0;
  std::int64_t final_reserved = 0, final_allocated = 0, final_requested = 0;
};

// Returns what the snapshot measured, device by device.
snap_summary summarise(const torch_snapshot& s);

// The allocator's state when a warm trace began, found by undoing the window's events from the final
// segments: the segments held then (final ones, less those the window allocated, plus those it freed) and
// the blocks alive then (final allocated ones, less those the window allocated, plus those it freed). A
// block freed in the window has its requested bytes in the trace, not its block size: it is taken as the
// request rounded to 512 B, grown over a following gap that PyTorch would not have split off (1 MiB or
// less in the large pool). That guess changes no placement (a large-pool free block of 1 MiB or less can
// serve no large request and merges back when its neighbour is freed), only the allocated bytes.
struct start_block {
  std::uint64_t address = 0;
  std::int64_t size = 0;
  bool allocated = false;
  std::int64_t requested = 0;  // allocated blocks: the bytes requested
  bool size_inferred = false;  // allocated blocks freed in the window: size from the request (see above)
};
struct start_segment {
  std::uint64_t address = 0;
  std::int64_t size = 0, stream = 0;
  bool small = false;
  std::vector<start_block> blocks;  // in address order, covering the segment, free neighbours merged
};
struct start_state {
  bool reconstructed = false;  // false: `why` says what could not be undone
  std::string why;
  std::vector<start_segment> segments;  // in address order
  std::size_t live_blocks = 0, inferred_sizes = 0;
  std::int64_t reserved = 0, requested = 0;
};
// Returns device `device`'s state before its first recorded event. Never throws for an inconsistent
// snapshot: it says so in `why`.
start_state reconstruct_start(const torch_snapshot& s, int device);

// One device's trace as a step trace: an alloc per alloc event (named by its top user frame), a free at
// free_completed (free_requested when the trace has no completions), an empty_cache after each run of
// segment frees or unmaps (empty_cache(), or an out-of-memory retry: the same release either way; not a
// retry's partial release under max_split_size), the stream of each event, and, for a warm trace, the
// blocks alive before the window allocated first (a replay under the recorded settings adopts the
// reconstructed start instead). Also returns, per trace event, the index of the snapshot event it came
// from.
struct snapshot_trace {
  int device = 0;
  step_trace trace;
  std::vector<std::size_t> source_event;  // per trace event; SIZE_MAX for reconstructed warm-up allocs
  bool cold = false;
  // Warm: the state undone from the final segments. When reconstructed, a replay under the recorded
  // settings adopts it instead of running the leading allocs of the blocks alive before the window; then
  // `start_tensor` names, per allocated block of `start` in segment and address order, its trace tensor.
  start_state start;
  std::vector<std::int32_t> start_tensor;
  bool approximate = false;  // warm and not reconstructed: the blocks alive before are allocated first
};
snapshot_trace snapshot_to_trace(const torch_snapshot& s, int device);

// The emulation against the real allocator: the same trace through the caching policy, with the real
// segment addresses handed back in order so best-fit ties break as they did.
struct snapshot_replay {
  std::string settings;  // the policy's describe()
  std::int64_t capacity = 0;
  std::int64_t peak_reserved = 0, peak_allocated = 0, peak_requested = 0;
  std::int64_t segments_created = 0;  // device mappings: segments, or growths of an expandable range
  std::int64_t retries = 0;
  std::optional<std::size_t> oom_event;  // snapshot event index where the emulation ran out of memory
  std::int64_t oom_bytes = 0;
  // Against the real trace (compared only under the recorded settings):
  bool compared = false;
  std::optional<std::size_t> diverged_at;  // the snapshot event where the emulated segments first differ
  std::string divergence;                  // what differed there
  std::int64_t real_peak_reserved = 0, real_segments_created = 0;
  bool from_start_state = false;  // began from the reconstructed warm state (segments_created excludes it)
};

// Replays device `device` of `s` through a caching allocator with `options` on a device of `capacity`
// bytes; compares segment by segment with the real trace when `compare`. A warm trace whose start was
// reconstructed begins from that state when `options` are the recorded ones (another policy would have
// left other segments), and is then compared event by event as a cold one is.
snapshot_replay replay_snapshot(const torch_snapshot& s, const snapshot_trace& t,
                                const caching_options& options, std::int64_t capacity, bool compare);

// The caching options the snapshot was recorded with.
caching_options recorded_options(const torch_snapshot& s);

// One row of the what-if table: a setting, its emulated reserved peak, and the least capacity (2 MiB
// steps) at which the trace runs without running out of memory under it.
struct what_if_row {
  std::string setting;
  snapshot_replay replayed;
  std::int64_t least_capacity = 0;
};
std::vector<what_if_row> what_if(const torch_snapshot& s, const snapshot_trace& t, std::int64_t capacity);

// The record of a snapshot ("headroom.measurement/1.2", backend "pytorch-snapshot", measured: true).
nlohmann::json snapshot_record(const torch_snapshot& s, const snap_summary& sum);

}  // namespace headroom::probes
