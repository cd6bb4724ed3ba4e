// replay_test.cpp: replay records the three peaks, stops at out-of-memory, and rejects impossible events.
#include "test_support.hpp"
#include "probes/trace/replay.hpp"

#include <gtest/gtest.h>

#include "planner/errors.hpp"
#include "planner/units.hpp"
#include "probes/allocators/caching_allocator.hpp"
#include "probes/devices/sim_device.hpp"

namespace headroom::probes {
namespace {


step_trace tiny() {
  step_trace t;
  t.tensors = {{"a", {3 * MiB}, 1, 3 * MiB}, {"b", {30 * MiB}, 1, 30 * MiB}, {"c", {1}, 1, 1}};
  t.events = {{event_kind::alloc, phase::state, 0},
              {event_kind::alloc, phase::forward, 1},
              {event_kind::alloc, phase::forward, 2},
              {event_kind::free, phase::backward, 1},
              {event_kind::free, phase::backward, 2}};
  return t;
}

TEST(Replay, PeaksAndTheirEvents) {
  sim_device dev(1024 * MiB, 2 * MiB);
  caching_allocator a(dev, {});
  auto r = replay(tiny(), a, true);
  EXPECT_EQ(r.requested.bytes, 33 * MiB + 1);
  EXPECT_EQ(r.requested.event, 2u);
  EXPECT_EQ(r.allocated.bytes, 33 * MiB + 512);
  EXPECT_EQ(r.reserved.bytes, 20 * MiB + 30 * MiB + 2 * MiB);
  EXPECT_EQ(r.timeline.size(), 5u);
  EXPECT_EQ(r.timeline.back().requested, 3 * MiB);
  EXPECT_FALSE(r.oom_event);
  EXPECT_NEAR(r.fragmentation(), 1.0 - (33.0 * MiB + 512) / (52.0 * MiB), 1e-12);
}

TEST(Replay, StopsAtOutOfMemory) {
  sim_device dev(32 * MiB, 2 * MiB);
  caching_allocator a(dev, {});
  auto r = replay(tiny(), a, false);
  ASSERT_TRUE(r.oom_event);
  EXPECT_EQ(*r.oom_event, 1u);  // b: 30 MiB on top of a's 20 MiB segment
  EXPECT_EQ(r.events_replayed, 1u);
}

TEST(Replay, RejectsAFreeOfATensorNeverAllocated) {
  auto t = tiny();
  t.events.insert(t.events.begin(), {event_kind::free, phase::state, 2});
  sim_device dev(1024 * MiB, 2 * MiB);
  caching_allocator a(dev, {});
  EXPECT_THROW(replay(t, a, false), bad_input);
}

}  // namespace
}  // namespace headroom::probes
