// replay.cpp: trace replay (see replay.hpp).
#include "probes/trace/replay.hpp"

#include <algorithm>

#include "probes/devices/device.hpp"
#include "planner/errors.hpp"

namespace headroom::probes {

replay_result replay(const step_trace& t, allocator& a, const replay_options& o) {
  replay_result r;
  std::vector<std::int64_t> handle(t.tensors.size(), -1);
  std::vector<std::int32_t> live_order;  // allocation order, for release_live
  if (o.record_timeline) r.timeline.reserve(t.events.size());
  const std::int64_t retries_before = a.stats().retries;
  const auto bytes_of = [&](std::int32_t tensor) {
    return t.tensors[static_cast<std::size_t>(tensor)].bytes;
  };
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const auto& e = t.events[i];
    if (e.kind == event_kind::empty_cache) {
      a.empty_cache();
      const auto& s = a.stats();
      if (o.record_timeline) r.timeline.push_back({s.requested, s.allocated, s.reserved});
      r.events_replayed = i + 1;
      continue;
    }
    if (e.tensor < 0 || static_cast<std::size_t>(e.tensor) >= t.tensors.size())
      throw bad_input("trace", "event " + std::to_string(i) + " names tensor " + std::to_string(e.tensor) +
                                   ", which does not exist");
    auto& h = handle[static_cast<std::size_t>(e.tensor)];
    if (e.kind == event_kind::alloc) {
      if (h >= 0)
        throw bad_input("trace", "event " + std::to_string(i) + " allocates tensor '" +
                                     t.tensors[static_cast<std::size_t>(e.tensor)].name + "' twice");
      auto got = a.allocate_on(bytes_of(e.tensor), e.stream);
      if (!got) {
        r.oom_event = i;
        break;
      }
      h = *got;
      if (o.checker) o.checker->on_alloc(e.tensor, a.address_of(h), bytes_of(e.tensor));
      if (o.release_live) live_order.push_back(e.tensor);
    } else {
      if (h < 0)
        throw bad_input("trace", "event " + std::to_string(i) + " frees tensor '" +
                                     t.tensors[static_cast<std::size_t>(e.tensor)].name +
                                     "', which is not allocated");
      if (o.checker) o.checker->on_free(e.tensor, a.address_of(h), bytes_of(e.tensor));
      a.release(h);
      h = -1;
    }
    const auto& s = a.stats();
    if (s.requested > r.requested.bytes) r.requested = {s.requested, i};
    if (s.allocated > r.allocated.bytes) r.allocated = {s.allocated, i};
    if (s.reserved > r.reserved.bytes) {
      r.reserved = {s.reserved, i};
      if (o.truth) {
        const std::int64_t used = o.truth->memory().used();
        r.device_used_at_peak = used;
        r.device_used_max = std::max(r.device_used_max.value_or(used), used);
      }
    }
    if (o.record_timeline) r.timeline.push_back({s.requested, s.allocated, s.reserved});
    r.events_replayed = i + 1;
  }
  r.retries = a.stats().retries - retries_before;
  r.reserved_at_end = a.stats().reserved;
  if (o.release_live) {
    for (auto it = live_order.rbegin(); it != live_order.rend(); ++it) {
      auto& h = handle[static_cast<std::size_t>(*it)];
      if (h < 0) continue;  // freed by the trace itself
      if (o.checker) o.checker->on_free(*it, a.address_of(h), bytes_of(*it));
      a.release(h);
      h = -1;
      ++r.released_at_end;
    }
  }
  if (o.checker) r.verified = o.checker->finish();
  return r;
}

}  // namespace headroom::probes
