// convert.cpp: one device of a snapshot as a step trace (convert.hpp).
#include "probes/snapshots/convert.hpp"

#include <algorithm>

#include "planner/errors.hpp"
#include "planner/large_buffers.hpp"
#include "probes/snapshots/address_map.hpp"
#include "probes/snapshots/frames.hpp"
#include "probes/snapshots/window.hpp"

namespace headroom::probes {

using namespace snapshot_window;

snapshot_trace snapshot_to_trace(const torch_snapshot& s, int device) {
  if (device < 0 || static_cast<std::size_t>(device) >= s.devices.size())
    throw bad_input("device", "the snapshot has " + std::to_string(s.devices.size()) +
                                  " device trace(s), no device " + std::to_string(device));
  const auto& ev = s.devices[static_cast<std::size_t>(device)];
  snapshot_trace out;
  out.device = device;
  step_trace& t = out.trace;
  t.model = s.origin;
  t.layout_text = "PyTorch memory snapshot, device " + std::to_string(device);
  const window w = window_of(s, device);
  out.cold = w.cold;
  out.held_before = w.held_before;
  if (!out.cold) out.start = reconstruct_start(s, device);
  out.approximate = !out.cold && !out.start.reconstructed;
  address_map<std::int32_t> live;  // address -> tensor
  // One trace event per snapshot event at most, one tensor per alloc.
  reserve_large(t.events, ev.size());
  reserve_large(out.source_event, ev.size());
  reserve_large(t.tensors,
                static_cast<std::size_t>(std::count_if(ev.begin(), ev.end(), [](const snap_event& e) {
                  return e.action == snap_action::alloc;
                })));
  auto add_alloc = [&](std::uint64_t addr, std::int64_t bytes, std::int64_t stream, const std::string& name,
                       std::size_t source) {
    trace_tensor x;
    x.name = name.empty() ? "block@" + std::to_string(addr) : name;
    x.bytes = bytes;
    x.dtype_bytes = 1;  // a block has bytes, no shape
    t.tensors.push_back(std::move(x));
    const auto id = static_cast<std::int32_t>(t.tensors.size() - 1);
    trace_event e;
    e.kind = event_kind::alloc;
    e.tensor = id;
    e.stream = static_cast<std::int32_t>(stream);
    t.events.push_back(e);
    out.source_event.push_back(source);
    live.set(addr, id);
  };
  // Warm: the blocks alive before the window first, in address order (a replay under the recorded
  // settings adopts the reconstructed state instead of running these).
  if (out.start.reconstructed) {
    for (const auto& g : out.start.segments)
      for (const auto& b : g.blocks)
        if (b.allocated) {
          add_alloc(b.address, b.requested, g.stream, "alive before recording @" + std::to_string(b.address),
                    SIZE_MAX);
          out.start_tensor.push_back(static_cast<std::int32_t>(t.tensors.size() - 1));
        }
  } else if (!out.cold) {
    for (const auto& [addr, bytes] : live_before_window(s, device))
      add_alloc(addr, bytes, 0, "alive before recording @" + std::to_string(addr), SIZE_MAX);
  }
  out.leading_allocs = t.events.size();
  const bool completions = has_completions(ev);
  const bool max_split = s.settings.max_split_size.has_value();
  frame_namer names(s.doc);
  constexpr std::size_t ahead = 16;  // events between prefetching a frames list's node and naming it
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const auto& e = ev[i];
    if (i + ahead < ev.size() && ev[i + ahead].action == snap_action::alloc)
      names.prefetch_node(ev[i + ahead].frames);
    if (i + ahead / 2 < ev.size() && ev[i + ahead / 2].action == snap_action::alloc)
      names.prefetch_items(ev[i + ahead / 2].frames);
    replayed_as as = replayed_as::none;
    if (e.action == snap_action::alloc) {
      if (live.contains(e.addr))
        throw bad_input(s.origin, "device_traces[" + std::to_string(device) + "][" + std::to_string(i) +
                                      "] allocates address " + std::to_string(e.addr) + " twice");
      add_alloc(e.addr, e.size, e.stream, names.top(e.frames), i);
      as = replayed_as::alloc;
    } else if (ends_life(e, completions)) {
      // A free of no block alive: of the window before this one, not allocated in the trace.
      if (const std::int32_t* tensor = live.find(e.addr)) {
        trace_event f;
        f.kind = event_kind::free;
        f.tensor = *tensor;
        f.stream = static_cast<std::int32_t>(e.stream);
        t.events.push_back(f);
        out.source_event.push_back(i);
        live.erase(e.addr);
        as = replayed_as::free;
      }
    } else if (ends_release_run(ev, i, max_split)) {
      trace_event c;
      c.kind = event_kind::empty_cache;
      c.tensor = -1;
      t.events.push_back(c);
      out.source_event.push_back(i);
      as = replayed_as::release;
    }
    tally_event(out.tally, e, as, completions);
  }
  if (s.capacity) t.capacity = *s.capacity;
  return out;
}

}  // namespace headroom::probes
