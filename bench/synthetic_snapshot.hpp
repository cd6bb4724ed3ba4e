// synthetic_snapshot.hpp: a generated PyTorch memory snapshot of any length (issue 20, section 4: a
// 1 M-event capture, an 80 MB pickle, read, replayed and compared in under 1 s and 500 MB), written as
// torch.cuda.memory._dump_snapshot() writes one: pickle protocol 4 in 64 KiB frames, every string, dict and
// list memoized, the frame dicts shared through the memo, a new frames list on each event.
#pragma once

#include <cstddef>
#include <string>

namespace headroom::bench {

// Returns the bytes of a snapshot whose one device trace holds about `events` events: a training-like loop
// (parameters allocated once, then steps of activations allocated through the forward pass and freed in
// reverse through the backward, with temporaries in between), every alloc followed later by its
// free_requested and free_completed, and a segment_alloc before each allocation that needed a new
// segment. Addresses are those the caching-allocator emulation (probes/allocators/caching_allocator.hpp)
// hands out, so the trace is cold and a replay agrees with it event by event; the final segments are the
// emulation's state at the end. `frames_per_event` frames (about; allocations carry more than frees) are
// recorded on each event, drawn from a few hundred distinct frames as real captures repeat them.
std::string synthetic_snapshot(std::size_t events, std::size_t frames_per_event = 8);

}  // namespace headroom::bench
