// warm_start.hpp: the allocator's state when a warm trace began, undone from the final segments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "probes/snapshots/snapshot.hpp"

namespace headroom::probes {

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

}  // namespace headroom::probes
