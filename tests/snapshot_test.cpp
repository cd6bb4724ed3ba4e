// snapshot_test.cpp: PyTorch memory snapshots as measurements: the figures of two real cold snapshots
// against sums made independently with Python's pickle (tests/data/snapshots/README.md), the emulation
// against the real allocator to the byte and the address, JSON input, warm traces, streams, empty_cache,
// and the out-of-memory retry.
#include "probes/snapshot.hpp"

#include <gtest/gtest.h>

#include "planner/errors.hpp"
#include "probes/replay.hpp"
#include "probes/sim_device.hpp"
#include "probes/trace_io.hpp"

namespace headroom::probes {
namespace {

const std::string data = HEADROOM_TEST_DATA;
const std::string fwd100 = data + "/snapshots/NiuHuangxiaozi__forward_memory_snapshot_100.pickle";
const std::string fwd200 =
    data + "/snapshots/NiuHuangxiaozi__forward_memory_snapshot_200_mixed_precision.pickle";

TEST(Snapshot, RealColdFiguresMatchAnIndependentSum) {
  const struct {
    std::string path;
    std::size_t events, segments;
    std::int64_t reserved, requested;
  } cases[] = {{fwd100, 2304, 31, 463470592, 412643888}, {fwd200, 2950, 47, 742391808, 693557968}};
  for (const auto& c : cases) {
    const auto s = load_snapshot(c.path);
    const auto sum = summarise(s);
    ASSERT_EQ(sum.devices.size(), 1u);
    const auto& d = sum.devices[0];
    EXPECT_EQ(d.events, c.events);
    EXPECT_EQ(d.counts.at("segment_alloc"), c.segments);
    EXPECT_TRUE(d.cold) << d.cold_why;
    EXPECT_EQ(d.peak_reserved, c.reserved);
    EXPECT_EQ(d.peak_requested, c.requested);
    EXPECT_TRUE(d.reserved_from_events);
    EXPECT_TRUE(d.ooms.empty());
    EXPECT_EQ(d.streams, std::vector<std::int64_t>{0});
    EXPECT_FALSE(d.largest_at_peak.empty());
    EXPECT_GE(d.largest_at_peak.front().size, d.largest_at_peak.back().size);
    EXPECT_TRUE(s.settings.recorded);
    EXPECT_FALSE(s.settings.expandable_segments);
    EXPECT_FALSE(s.settings.max_split_size);
  }
}

// The emulation replays the real alloc / free sequence and makes the same segments, of the same sizes,
// before the same allocations, and places every block at the real allocator's address.
TEST(Snapshot, EmulationAgreesWithTheRealAllocatorToTheByte) {
  for (const auto& path : {fwd100, fwd200}) {
    const auto s = load_snapshot(path);
    const auto t = snapshot_to_trace(s, 0);
    EXPECT_TRUE(t.cold);
    const auto r = replay_snapshot(s, t, recorded_options(s), std::int64_t{1} << 40, true);
    EXPECT_FALSE(r.diverged_at) << path << ": " << r.divergence;
    EXPECT_EQ(r.peak_reserved, r.real_peak_reserved) << path;
    EXPECT_EQ(r.segments_created, r.real_segments_created) << path;
    EXPECT_EQ(r.peak_requested, summarise(s).devices[0].peak_requested);
  }
}

// The replay trace round-trips through headroom.trace/1.1 and replays to the same peaks.
TEST(Snapshot, TraceRoundTripsAndReplaysTheSame) {
  const auto s = load_snapshot(fwd100);
  const auto t = snapshot_to_trace(s, 0);
  const auto j = trace_to_json(t.trace);
  EXPECT_EQ(j["schema"], "headroom.trace/1.1");
  const auto back = trace_from_json(j, "roundtrip");
  sim_device d1(std::int64_t{1} << 40, 2 << 20), d2(std::int64_t{1} << 40, 2 << 20);
  caching_allocator a1(d1, {}), a2(d2, {});
  const auto r1 = replay(t.trace, a1, false), r2 = replay(back, a2, false);
  EXPECT_EQ(r1.reserved.bytes, r2.reserved.bytes);
  EXPECT_EQ(r1.reserved.bytes, 463470592);
}

// A hand-written snapshot in JSON: two streams, an empty_cache, a warm start and an out-of-memory event.
std::string small_json(bool warm) {
  const std::int64_t M = 1 << 20;
  nlohmann::json events = nlohmann::json::array();
  auto ev = [&](const char* a, std::uint64_t addr, std::int64_t size, int stream = 0) {
    events.push_back({{"action", a}, {"addr", addr}, {"size", size}, {"stream", stream}, {"time_us", 0}});
  };
  if (warm) {
    ev("free_requested", 0x1000000, 4 * M);  // a block from before recording
    ev("free_completed", 0x1000000, 4 * M);
  }
  ev("segment_alloc", 0x10000000, 20 * M);
  ev("alloc", 0x10000000, 3 * M);
  ev("segment_alloc", 0x20000000, 20 * M, 1);
  ev("alloc", 0x20000000, 3 * M, 1);  // stream 1 cannot reuse stream 0's free space
  ev("free_requested", 0x10000000, 3 * M);
  ev("free_completed", 0x10000000, 3 * M);
  ev("segment_free", 0x10000000, 20 * M);  // empty_cache(): nothing allocated after it
  ev("free_requested", 0x20000000, 3 * M, 1);
  ev("free_completed", 0x20000000, 3 * M, 1);
  events.push_back(
      {{"action", "oom"}, {"addr", 0}, {"size", 900 * M}, {"device_free", 10 * M}, {"stream", 0}});
  nlohmann::json segs = nlohmann::json::array();
  segs.push_back(
      {{"device", 0},
       {"address", 0x20000000},
       {"total_size", 20 * M},
       {"allocated_size", 0},
       {"requested_size", 0},
       {"stream", 1},
       {"segment_type", "large"},
       {"blocks",
        {{{"address", 0x20000000}, {"size", 20 * M}, {"requested_size", 0}, {"state", "inactive"}}}}});
  nlohmann::json j = {
      {"segments", segs},
      {"device_traces", {events}},
      {"allocator_settings",
       {{"PYTORCH_CUDA_ALLOC_CONF", ""}, {"max_split_size", -1}, {"expandable_segments", false}}}};
  return j.dump();
}

TEST(Snapshot, JsonStreamsEmptyCacheAndOom) {
  const auto s = parse_snapshot(small_json(false), "small.json");
  const auto sum = summarise(s);
  const auto& d = sum.devices[0];
  EXPECT_TRUE(d.cold) << d.cold_why;
  EXPECT_EQ(d.streams.size(), 2u);
  EXPECT_EQ(d.peak_reserved, 40 << 20);
  EXPECT_EQ(d.empty_cache_calls, 1u);
  ASSERT_EQ(d.ooms.size(), 1u);
  EXPECT_EQ(d.ooms[0].size, 900 << 20);
  const auto t = snapshot_to_trace(s, 0);
  int empties = 0;
  for (const auto& e : t.trace.events) empties += e.kind == event_kind::empty_cache;
  EXPECT_EQ(empties, 1);
  const auto r = replay_snapshot(s, t, recorded_options(s), std::int64_t{1} << 40, true);
  // Two segments: the stream-1 block cannot use the stream-0 segment.
  EXPECT_EQ(r.segments_created, 2);
  EXPECT_EQ(r.peak_reserved, 40 << 20);
  EXPECT_FALSE(r.diverged_at) << r.divergence;
}

TEST(Snapshot, WarmTraceIsReconstructedAndSaysSo) {
  const auto s = parse_snapshot(small_json(true), "warm.json");
  const auto d = summarise(s).devices[0];
  EXPECT_FALSE(d.cold);
  EXPECT_EQ(d.live_before, 1u);
  EXPECT_EQ(d.live_before_bytes, 4 << 20);
  const auto t = snapshot_to_trace(s, 0);
  EXPECT_TRUE(t.approximate);
  EXPECT_EQ(t.source_event.front(), SIZE_MAX);  // the block alive before recording, allocated first
  const auto r = replay_snapshot(s, t, recorded_options(s), std::int64_t{1} << 40, true);
  EXPECT_NE(r.divergence.find("warm trace"), std::string::npos);
}

// A capacity below what the trace needs: the emulation's retry frees cached segments first, then runs
// out of memory at a named event; what-if finds the least capacity that runs.
TEST(Snapshot, CapacityRetryAndWhatIf) {
  const auto s = load_snapshot(fwd100);
  const auto t = snapshot_to_trace(s, 0);
  const auto tight = replay_snapshot(s, t, {}, 300 << 20, false);
  ASSERT_TRUE(tight.oom_event);
  const auto rows = what_if(s, t, std::int64_t{1} << 40);
  ASSERT_EQ(rows.size(), 4u);
  for (const auto& row : rows) {
    ASSERT_GT(row.least_capacity, 0) << row.setting;
    EXPECT_GE(row.least_capacity, row.replayed.peak_requested) << row.setting;
    EXPECT_LE(row.least_capacity, row.replayed.peak_reserved + (2 << 20)) << row.setting;
    // At the least capacity it runs; 2 MiB below it does not.
    caching_options o =
        row.setting == "expandable_segments:True" ? caching_options{std::nullopt, true} : caching_options{};
    if (row.setting.rfind("max_split", 0) == 0) continue;
    EXPECT_FALSE(replay_snapshot(s, t, o, row.least_capacity, false).oom_event) << row.setting;
    EXPECT_TRUE(replay_snapshot(s, t, o, row.least_capacity - (2 << 20), false).oom_event) << row.setting;
  }
}

TEST(Snapshot, BadSnapshotsAreOneClearError) {
  const struct {
    std::string text;
    const char* says;
  } cases[] = {
      {"not a snapshot", "neither a pickle"},
      {"[1,2]", "not a dict"},
      {R"({"segments": []})", "device_traces is missing"},
      {R"({"device_traces": [[{"action": "alloc", "addr": 1, "size": -5}]]})", "absurd"},
      {R"({"device_traces": [[{"action": "alloc", "addr": "x", "size": 5}]]})", "addr is not an integer"},
      {R"({"device_traces": [[{"action": "alloc", "addr": 1, "size": 5}, {"action": "alloc", "addr": 1, "size": 5}]]})",
       "twice"},
      {R"({"device_traces": {"a": 1}})", "not a list"},
  };
  for (const auto& c : cases) {
    try {
      const auto s = parse_snapshot(c.text, "bad.json");
      snapshot_to_trace(s, 0);
      ADD_FAILURE() << "accepted: " << c.text;
    } catch (const bad_input& e) {
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(load_snapshot(data + "/snapshots/missing.pickle"), bad_input);
  const auto s = load_snapshot(fwd100);
  EXPECT_THROW(snapshot_to_trace(s, 3), bad_input);
}

}  // namespace
}  // namespace headroom::probes
