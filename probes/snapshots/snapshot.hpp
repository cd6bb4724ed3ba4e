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

}  // namespace headroom::probes
