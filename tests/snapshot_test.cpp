// snapshot_test.cpp: PyTorch memory snapshots as measurements: the figures of two real cold snapshots
// against sums made independently with Python's pickle (tests/data/snapshots/README.md), the emulation
// against the real allocator to the byte and the address, JSON input, warm traces, streams, empty_cache,
// and the out-of-memory retry.
#include "test_support.hpp"
#include "probes/snapshots/snapshot.hpp"
#include "probes/records/schema.hpp"
#include "probes/snapshots/snapshot_record.hpp"
#include "probes/snapshots/what_if.hpp"

#include <nlohmann/json.hpp>
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "planner/errors.hpp"
#include "planner/units.hpp"
#include "probes/trace/replay.hpp"
#include "probes/devices/sim_device.hpp"
#include "probes/trace/trace_io.hpp"

namespace headroom::probes {
namespace {

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
  EXPECT_EQ(j["schema"], records::schema_of(records::kind::trace));
  const auto back = trace_from_json(j, "roundtrip");
  sim_device d1(std::int64_t{1} << 40, 2 << 20), d2(std::int64_t{1} << 40, 2 << 20);
  caching_allocator a1(d1, {}), a2(d2, {});
  const auto r1 = replay(t.trace, a1, false), r2 = replay(back, a2, false);
  EXPECT_EQ(r1.reserved.bytes, r2.reserved.bytes);
  EXPECT_EQ(r1.reserved.bytes, 463470592);
}

// A hand-written snapshot in JSON: two streams, an empty_cache, a warm start and an out-of-memory event.
std::string small_json(bool warm) {
  const std::int64_t M = mib;
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
  // The freed block lies in no segment the snapshot held: the start cannot be undone, and it says why.
  EXPECT_FALSE(t.start.reconstructed);
  EXPECT_NE(t.start.why.find("no segment"), std::string::npos) << t.start.why;
  EXPECT_EQ(t.source_event.front(), SIZE_MAX);  // the block alive before recording, allocated first
  const auto r = replay_snapshot(s, t, recorded_options(s), std::int64_t{1} << 40, true);
  EXPECT_NE(r.divergence.find("warm trace"), std::string::npos);
}

// A cold trace recorded with expandable segments, written by hand from PyTorch's rules (map_block maps whole
// pages of 20 MiB (large pool) or 2 MiB (small) at the end of each pool's range; a release unmaps the whole
// free pages at the end): every growth is a segment_map before the allocation that needed it, and the
// emulation must map the same bytes at the same addresses and place every block where PyTorch did.
TEST(Snapshot, ExpandableSegmentsTraceIsComparedMapByMap) {
  const std::int64_t M = mib;
  const std::uint64_t L = 0x200000000000ULL, S = 0x300000000000ULL;
  auto event = [](const char* a, std::uint64_t addr, std::int64_t size) {
    return nlohmann::json{{"action", a}, {"addr", addr}, {"size", size}, {"stream", 0}, {"time_us", 0}};
  };
  nlohmann::json events = nlohmann::json::array();
  auto ev = [&](const char* a, std::uint64_t addr, std::int64_t size) {
    events.push_back(event(a, addr, size));
  };
  auto free_ = [&](std::uint64_t addr, std::int64_t size) {
    ev("free_requested", addr, size);
    ev("free_completed", addr, size);
  };
  // A final segment (a run of mapped pages) from its blocks in order: (block bytes, requested; 0 = free).
  auto segment = [](std::uint64_t at, const char* type,
                    const std::vector<std::pair<std::int64_t, std::int64_t>>& bs) {
    nlohmann::json blocks = nlohmann::json::array();
    std::int64_t total = 0, allocated = 0, requested = 0;
    for (const auto& [size, req] : bs) {
      blocks.push_back({{"address", at + static_cast<std::uint64_t>(total)},
                        {"size", size},
                        {"requested_size", req},
                        {"state", req > 0 ? "active_allocated" : "inactive"}});
      total += size;
      allocated += req > 0 ? size : 0;
      requested += req;
    }
    return nlohmann::json{{"device", 0},
                          {"address", at},
                          {"total_size", total},
                          {"allocated_size", allocated},
                          {"requested_size", requested},
                          {"stream", 0},
                          {"segment_type", type},
                          {"is_expandable", true},
                          {"blocks", blocks}};
  };
  ev("segment_map", L, 20 * M);  // the large range's first page
  ev("alloc", L, 3 * M);
  ev("segment_map", S, 2 * M);  // the small range's first page
  ev("alloc", S, 500000);
  ev("segment_map", L + 20 * M, 20 * M);  // 30 MiB needs 13 more than the 17 MiB free tail: one page
  ev("alloc", L + 3 * M, 30 * M);
  free_(L + 3 * M, 30 * M);
  ev("alloc", L + 3 * M, 8 * M);  // from the free tail, no map
  free_(L, 3 * M);
  ev("segment_unmap", L + 20 * M, 20 * M);  // empty_cache(): the whole free page at the end
  ev("alloc", L + 11 * M, 5 * M);           // best fit: the 9 MiB free block, not the 3 MiB one
  const nlohmann::json settings = {{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"},
                                   {"max_split_size", -1},
                                   {"expandable_segments", true}};
  const nlohmann::json j = {{"segments",
                             {segment(L, "large", {{3 * M, 0}, {8 * M, 8 * M}, {5 * M, 5 * M}, {4 * M, 0}}),
                              segment(S, "small", {{500224, 500000}, {2 * M - 500224, 0}})}},
                            {"device_traces", {events}},
                            {"allocator_settings", settings}};
  const auto s = parse_snapshot(j.dump(), "expandable.json");
  const auto d = summarise(s).devices[0];
  EXPECT_TRUE(d.cold) << d.cold_why;
  EXPECT_EQ(d.peak_reserved, 42 * M);
  EXPECT_EQ(d.empty_cache_calls, 1u);
  const auto t = snapshot_to_trace(s, 0);
  const auto r = replay_snapshot(s, t, recorded_options(s), std::int64_t{1} << 40, true);
  EXPECT_FALSE(r.diverged_at) << r.divergence;
  EXPECT_EQ(r.peak_reserved, 42 * M);
  EXPECT_EQ(r.segments_created, 3);
  EXPECT_EQ(r.real_segments_created, 3);
  // The same trace with the 30 MiB block recorded 2 MiB further on: named at that allocation.
  auto broken = j;
  for (int k : {5, 6, 7}) broken["device_traces"][0][k]["addr"] = L + 5 * M;
  const auto sb = parse_snapshot(broken.dump(), "expandable-broken.json");
  const auto rb =
      replay_snapshot(sb, snapshot_to_trace(sb, 0), recorded_options(sb), std::int64_t{1} << 40, true);
  ASSERT_TRUE(rb.diverged_at);
  EXPECT_EQ(*rb.diverged_at, 5u);
  EXPECT_NE(rb.divergence.find("placed at"), std::string::npos) << rb.divergence;
  // Everything freed and the cache emptied: both ranges are unmapped and given back; the next growth
  // reserves a new range, which the driver may place at the same addresses (it is compared there too).
  free_(L + 3 * M, 8 * M);
  free_(L + 11 * M, 5 * M);
  free_(S, 500000);
  ev("segment_unmap", L, 20 * M);
  ev("segment_unmap", S, 2 * M);
  ev("segment_map", L, 20 * M);
  ev("alloc", L, 4 * M);
  const nlohmann::json again = {{"segments", {segment(L, "large", {{4 * M, 4 * M}, {16 * M, 0}})}},
                                {"device_traces", {events}},
                                {"allocator_settings", settings}};
  const auto sa = parse_snapshot(again.dump(), "expandable-again.json");
  EXPECT_TRUE(summarise(sa).devices[0].cold) << summarise(sa).devices[0].cold_why;
  const auto ra =
      replay_snapshot(sa, snapshot_to_trace(sa, 0), recorded_options(sa), std::int64_t{1} << 40, true);
  EXPECT_FALSE(ra.diverged_at) << ra.divergence;
  EXPECT_EQ(ra.segments_created, 4);
  EXPECT_EQ(ra.real_segments_created, 4);
}

// A warm trace written by hand (also a fuzz seed): a block alive before recording is freed and its segment
// released by empty_cache(), then a block lands in the other segment held before. Undone: both segments,
// the freed block put back at its rounded request, the window's block taken away.
TEST(Snapshot, HandWrittenWarmTraceIsUndoneAndAgrees) {
  const std::int64_t M = mib;
  const auto s = load_snapshot(data + "/../../fuzz/corpus/snapshot/warm-two-segments.json");
  const auto st = reconstruct_start(s, 0);
  ASSERT_TRUE(st.reconstructed) << st.why;
  ASSERT_EQ(st.segments.size(), 2u);
  EXPECT_EQ(st.reserved, 40 * M);
  EXPECT_EQ(st.live_blocks, 2u);
  EXPECT_EQ(st.inferred_sizes, 1u);
  const auto& a = st.segments[0];  // the final segment: its 3 MiB block alive throughout
  ASSERT_EQ(a.blocks.size(), 2u);
  EXPECT_TRUE(a.blocks[0].allocated && a.blocks[0].size == 3 * M && !a.blocks[0].size_inferred);
  EXPECT_TRUE(!a.blocks[1].allocated && a.blocks[1].size == 17 * M);
  const auto& b = st.segments[1];  // put back from its segment_free; the freed block from its request
  ASSERT_EQ(b.blocks.size(), 2u);
  EXPECT_TRUE(b.blocks[0].allocated && b.blocks[0].size == 2 * M && b.blocks[0].size_inferred);
  EXPECT_TRUE(!b.blocks[1].allocated && b.blocks[1].size == 18 * M);
  const auto t = snapshot_to_trace(s, 0);
  const auto r = replay_snapshot(s, t, recorded_options(s), std::int64_t{1} << 40, true);
  EXPECT_TRUE(r.from_start_state);
  EXPECT_FALSE(r.diverged_at) << r.divergence;
  EXPECT_EQ(r.peak_reserved, 40 * M);
  EXPECT_EQ(r.real_peak_reserved, 40 * M);
  // Capacity below the state the window starts from: out of memory before the first event.
  const auto tight = replay_snapshot(s, t, recorded_options(s), 30 * M, false);
  ASSERT_TRUE(tight.oom_event);
  EXPECT_EQ(*tight.oom_event, 0u);
}

// A cold real trace cut at event k is a warm trace whose true starting state is known independently: the
// forward walk of events [0, k). The state undone backwards from the final segments must be that state,
// and the replay from it must agree with the real allocator event by event, as a cold one does.
torch_snapshot cut_at(const std::string& path, std::size_t k) {
  torch_snapshot s = load_snapshot(path);
  auto& ev = s.devices[0];
  ev.erase(ev.begin(), ev.begin() + static_cast<std::ptrdiff_t>(k));
  return s;
}

TEST(Snapshot, WarmStartUndoneFromACutColdTraceIsTheRealState) {
  for (const auto& path : {fwd100, fwd200}) {
    const auto full = load_snapshot(path);
    const auto& ev = full.devices[0];
    for (const std::size_t k : {ev.size() / 5, ev.size() / 2, ev.size() * 4 / 5, ev.size() - 3}) {
      SCOPED_TRACE(path + " cut at " + std::to_string(k));
      // Forward: what the real allocator held just before event k.
      std::map<std::uint64_t, std::int64_t> segs, live;
      for (std::size_t i = 0; i < k; ++i) {
        const auto& e = ev[i];
        if (e.action == snap_action::segment_alloc) segs[e.addr] = e.size;
        if (e.action == snap_action::segment_free) segs.erase(e.addr);
        if (e.action == snap_action::alloc) live[e.addr] = e.size;
        if (e.action == snap_action::free_completed) live.erase(e.addr);
      }
      const auto cut = cut_at(path, k);
      // Backward: undone from the final segments.
      const auto st = reconstruct_start(cut, 0);
      ASSERT_TRUE(st.reconstructed) << st.why;
      std::map<std::uint64_t, std::int64_t> got_segs, got_live;
      for (const auto& g : st.segments) {
        got_segs[g.address] = g.size;
        std::uint64_t at = g.address;
        for (std::size_t b = 0; b < g.blocks.size(); ++b) {
          const auto& x = g.blocks[b];
          EXPECT_EQ(x.address, at);  // the blocks tile the segment
          at += static_cast<std::uint64_t>(x.size);
          if (b > 0) {
            EXPECT_FALSE(!x.allocated && !g.blocks[b - 1].allocated);  // free ones merged
          }
          if (x.allocated) {
            got_live[x.address] = x.requested;
            EXPECT_GE(x.size, caching_allocator::round_size(x.requested));
          }
        }
        EXPECT_EQ(at, g.address + static_cast<std::uint64_t>(g.size));
      }
      EXPECT_EQ(got_segs, segs);
      EXPECT_EQ(got_live, live);
      // The window allocates into segments held before it: the replay depends on the starting state.
      std::size_t into_old = 0;
      for (const auto& e : cut.devices[0]) {
        if (e.action != snap_action::alloc) continue;
        auto it = segs.upper_bound(e.addr);
        into_old += it != segs.begin() &&
                    e.addr < std::prev(it)->first + static_cast<std::uint64_t>(std::prev(it)->second);
      }
      if (k < ev.size() - 3) {
        EXPECT_GT(into_old, 0u);
      }
      const auto t = snapshot_to_trace(cut, 0);
      EXPECT_FALSE(t.cold);
      EXPECT_FALSE(t.approximate);
      const auto r = replay_snapshot(cut, t, recorded_options(cut), std::int64_t{1} << 40, true);
      EXPECT_TRUE(r.from_start_state);
      EXPECT_FALSE(r.diverged_at) << r.divergence;
      EXPECT_EQ(r.peak_reserved, r.real_peak_reserved);
      EXPECT_EQ(r.segments_created, r.real_segments_created);
    }
  }
}

// The event-by-event comparison of a warm replay can fail: a starting state with a live block and the
// free block after it swapped (same bytes, same blocks, wrong layout) makes the emulation place the first
// allocation that used that free block elsewhere, and the comparison names it.
TEST(Snapshot, AWrongStartingStateIsCaughtWhereItMatters) {
  const auto full = load_snapshot(fwd100);
  const auto cut = cut_at(fwd100, full.devices[0].size() / 2);
  auto t = snapshot_to_trace(cut, 0);
  ASSERT_TRUE(t.start.reconstructed) << t.start.why;
  std::map<std::uint64_t, std::size_t> first_alloc_at;  // address -> first window alloc there
  for (std::size_t i = 0; i < cut.devices[0].size(); ++i)
    if (cut.devices[0][i].action == snap_action::alloc) first_alloc_at.emplace(cut.devices[0][i].addr, i);
  std::optional<std::size_t> used;
  for (auto& g : t.start.segments) {
    for (std::size_t j = 0; j + 1 < g.blocks.size() && !used; ++j) {
      auto& live = g.blocks[j];
      auto& hole = g.blocks[j + 1];
      if (!live.allocated || hole.allocated || (j > 0 && !g.blocks[j - 1].allocated)) continue;
      auto it = first_alloc_at.find(hole.address);
      if (it == first_alloc_at.end()) continue;
      used = it->second;
      hole.address = live.address;
      live.address = hole.address + static_cast<std::uint64_t>(hole.size);
      std::swap(live, hole);
    }
    if (used) break;
  }
  ASSERT_TRUE(used) << "no live block followed by a free block that the window allocates into";
  const auto r = replay_snapshot(cut, t, recorded_options(cut), std::int64_t{1} << 40, true);
  ASSERT_TRUE(r.diverged_at);
  EXPECT_LE(*r.diverged_at, *used);
}

// The two real warm snapshots of docs/snapshots.md (not copied here: 3 and 4 MB): undone and
// replayed, the emulation agrees with the real allocator at every segment and every block address.
TEST(Snapshot, RealWarmSnapshotsAgreeFromTheReconstructedStart) {
  const std::string dir = data + "/../../../shared/data/snapshots/";
  const struct {
    const char* file;
    std::int64_t real_peak_reserved;
  } cases[] = {{"sidsoc12__mem_snapshot_ctx128_fp32_train.pickle", std::int64_t{63964} << 20},
               {"Wedsonlin__medium_128_training_memory_snapshot.pickle", std::int64_t{6900} << 20}};
  for (const auto& c : cases) {
    const std::string path = dir + c.file;
    if (!std::ifstream(path)) GTEST_SKIP() << path << " is not on this machine (the shared data folder)";
    const auto s = load_snapshot(path);
    const auto t = snapshot_to_trace(s, 0);
    EXPECT_FALSE(t.cold);
    ASSERT_TRUE(t.start.reconstructed) << t.start.why;
    const auto r = replay_snapshot(s, t, recorded_options(s), std::int64_t{1} << 40, true);
    EXPECT_TRUE(r.from_start_state);
    EXPECT_FALSE(r.diverged_at) << c.file << ": " << r.divergence;
    EXPECT_EQ(r.real_peak_reserved, c.real_peak_reserved);
    EXPECT_EQ(r.peak_reserved, r.real_peak_reserved);
  }
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

// What the parser materialises is counted against snapshot_limits: every record and its fields, each
// reference to a shared list counted again (the CLI tests refuse real pickles that expand).
TEST(Snapshot, MaterialisedRecordsAndFieldsAreCapped) {
  nlohmann::json events = nlohmann::json::array();
  for (int i = 0; i < 6; ++i)
    events.push_back({{"action", "alloc"}, {"addr", 4096 + 512 * i}, {"size", 512}, {"stream", 0}});
  const std::string text =
      nlohmann::json{{"segments", nlohmann::json::array()}, {"device_traces", {events}}}.dump();
  snapshot_limits l;
  l.max_records = 6;
  EXPECT_EQ(parse_snapshot(text, "six.json", l).devices[0].size(), 6u);
  l.max_records = 5;
  try {
    parse_snapshot(text, "six.json", l);
    ADD_FAILURE() << "accepted 6 records under a cap of 5";
  } catch (const bad_input& e) {
    EXPECT_NE(std::string(e.what()).find("more than 5 records"), std::string::npos) << e.what();
  }
  l = {};
  l.max_fields = 23;  // 6 events x 4 fields
  EXPECT_THROW(parse_snapshot(text, "six.json", l), bad_input);
  l.max_fields = 24;
  EXPECT_NO_THROW(parse_snapshot(text, "six.json", l));
  l = {};
  l.max_json_bytes = text.size() - 1;
  EXPECT_THROW(parse_snapshot(text, "six.json", l), bad_input);
}

// A snapshot that contradicts itself names the first contradiction; the real ones are all consistent.
TEST(Snapshot, InconsistentSnapshotsNameTheContradiction) {
  const std::int64_t M = mib;
  // Arrays spelt out: a braced list of one JSON value is that value under some compilers, a list under others.
  auto arr = [](std::initializer_list<nlohmann::json> items) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& x : items) a.push_back(x);
    return a;
  };
  const std::uint64_t A = 0x100000000ULL;
  auto ev = [](const char* a, std::uint64_t addr, std::int64_t size) {
    return nlohmann::json{{"action", a}, {"addr", addr}, {"size", size}};
  };
  auto seg = [](std::uint64_t at, std::int64_t total, nlohmann::json blocks) {
    return nlohmann::json{{"device", 0}, {"address", at}, {"total_size", total}, {"blocks", blocks}};
  };
  auto blk = [](std::uint64_t at, std::int64_t size) {
    return nlohmann::json{{"address", at}, {"size", size}, {"state", "inactive"}};
  };
  const struct {
    nlohmann::json segments, events;
    const char* says;
  } cases[] = {
      {arr({seg(A, 2 * M, arr({blk(A, 3 * M)}))}), arr({ev("segment_alloc", A, 2 * M)}), "larger than their segment"},
      {arr({seg(A, 2 * M, arr({blk(A, M), blk(A + M, M), blk(A + 2 * M, 512)}))}),
       arr({ev("segment_alloc", A, 2 * M)}),
       "larger than their segment"},
      {arr({seg(A, 2 * M, arr({blk(A + 3 * M, 512)}))}), arr({ev("segment_alloc", A, 2 * M)}),
       "lies outside its segment"},
      {arr({seg(A, 2 * M, arr({blk(A, M), blk(A + 512, 512)}))}),
       arr({ev("segment_alloc", A, 2 * M)}),
       "overlaps the block"},
      {arr({seg(A, 2 * M, arr({})), seg(A + M, 2 * M, arr({}))}), arr({}), "two final segments"},
      {arr({seg(A, 2 * M, arr({}))}),
       arr({ev("segment_alloc", A, 2 * M), ev("segment_alloc", A, 2 * M)}),
       "maps bytes event 0"},
      {arr({}),
       arr({ev("segment_alloc", A, 4 * M), ev("segment_free", A, 2 * M)}),
       "allocated with 4 MiB"},
      {arr({}), arr({ev("segment_map", A, 4 * M), ev("segment_unmap", A, 2 * M)}), "leaves 2 MiB"},
      {arr({seg(A, 2 * M, arr({}))}),
       arr({ev("segment_map", A, 2 * M), ev("segment_unmap", A, 2 * M)}),
       "but a final segment holds them"},
      {arr({}),
       arr({nlohmann::json{{"action", "segment_map"}, {"addr", std::int64_t{-512}}, {"size", 4 * M}}}),  // 2^64 - 512
       "past the end of the address space"},
  };
  for (const auto& c : cases) {
    nlohmann::json j = nlohmann::json::object();
    j["segments"] = c.segments;
    j["device_traces"] = arr({c.events});
    try {
      parse_snapshot(j.dump(), "bad.json");
      ADD_FAILURE() << "accepted: " << j.dump();
    } catch (const bad_input& e) {
      EXPECT_NE(std::string(e.what()).find("inconsistent snapshot"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
    }
  }
  // The snapshot's own max_split_size below PyTorch's 20 MiB is named as the snapshot's setting.
  const nlohmann::json ms = {{"device_traces", {nlohmann::json::array()}},
                             {"allocator_settings", {{"max_split_size", 1}}}};
  try {
    parse_snapshot(ms.dump(), "ms.json");
    ADD_FAILURE() << "accepted max_split_size 1";
  } catch (const bad_input& e) {
    EXPECT_NE(std::string(e.what()).find("the snapshot's allocator_settings.max_split_size is 1 bytes"),
              std::string::npos)
        << e.what();
  }
  // Unmaps of expandable pages in another grouping than their maps are PyTorch's own: accepted.
  const nlohmann::json regroup = {
      {"segments", {seg(A + 4 * M, 2 * M, arr({blk(A + 4 * M, 2 * M)}))}},
      {"device_traces",
       {{ev("segment_map", A, 2 * M), ev("segment_map", A + 2 * M, 4 * M), ev("segment_unmap", A, 4 * M)}}}};
  EXPECT_NO_THROW(parse_snapshot(regroup.dump(), "regroup.json"));
  // An empty unmap changes nothing.
  const nlohmann::json empty = {
      {"segments", {seg(A, 2 * M, arr({blk(A, 2 * M)}))}},
      {"device_traces", {{ev("segment_map", A, 2 * M), ev("segment_unmap", A, 0)}}}};
  EXPECT_NO_THROW(parse_snapshot(empty.dump(), "empty.json"));
  for (const std::string f :
       {"NiuHuangxiaozi__forward_and_backward_memory_snapshot_100.pickle",
        "NiuHuangxiaozi__forward_and_backward_memory_snapshot_200_mixed_precision.pickle",
        "Wedsonlin__medium_128_training_memory_snapshot.pickle",
        "sidsoc12__mem_snapshot_ctx128_fp32_train.pickle"}) {
    const std::string path = data + "/../../../shared/data/snapshots/" + f;
    if (!std::ifstream(path)) continue;  // the shared data folder is not on every machine
    EXPECT_NO_THROW(load_snapshot(path)) << f;
  }
}

}  // namespace
}  // namespace headroom::probes
