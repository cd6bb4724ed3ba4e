// replay.cpp: trace replay (see replay.hpp).
#include "replay.hpp"

#include "planner/errors.hpp"

namespace headroom::probes {

replay_result replay(const step_trace& t, allocator& a, bool record_timeline) {
  replay_result r;
  std::vector<std::int64_t> handle(t.tensors.size(), -1);
  if (record_timeline) r.timeline.reserve(t.events.size());
  const std::int64_t retries_before = a.stats().retries;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const auto& e = t.events[i];
    if (e.tensor < 0 || static_cast<std::size_t>(e.tensor) >= t.tensors.size())
      throw bad_input("trace", "event " + std::to_string(i) + " names tensor " + std::to_string(e.tensor) +
                                   ", which does not exist");
    auto& h = handle[static_cast<std::size_t>(e.tensor)];
    if (e.kind == event_kind::alloc) {
      if (h >= 0)
        throw bad_input("trace", "event " + std::to_string(i) + " allocates tensor '" +
                                     t.tensors[static_cast<std::size_t>(e.tensor)].name + "' twice");
      auto got = a.allocate(t.tensors[static_cast<std::size_t>(e.tensor)].bytes);
      if (!got) {
        r.oom_event = i;
        break;
      }
      h = *got;
    } else {
      if (h < 0)
        throw bad_input("trace", "event " + std::to_string(i) + " frees tensor '" +
                                     t.tensors[static_cast<std::size_t>(e.tensor)].name +
                                     "', which is not allocated");
      a.release(h);
      h = -1;
    }
    const auto& s = a.stats();
    if (s.requested > r.requested.bytes) r.requested = {s.requested, i};
    if (s.allocated > r.allocated.bytes) r.allocated = {s.allocated, i};
    if (s.reserved > r.reserved.bytes) r.reserved = {s.reserved, i};
    if (record_timeline) r.timeline.push_back({s.requested, s.allocated, s.reserved});
    r.events_replayed = i + 1;
  }
  r.retries = a.stats().retries - retries_before;
  return r;
}

}  // namespace headroom::probes
