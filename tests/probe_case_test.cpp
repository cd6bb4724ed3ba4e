// probe_case_test.cpp: one case on a fault-injecting fake device: out-of-memory is a result that names the
// event and leaves the device where it started, so a second case runs; a device that fails mid-case gets
// everything back before the error reaches the caller; a device that does not come back is caught; fill /
// verify sees every block, and a corrupted block is named. Expected numbers come from the trace itself.
#include "probes/cases/probe_case.hpp"

#include <gtest/gtest.h>

#include "fake_device.hpp"
#include "planner/errors.hpp"
#include "probes/allocators/caching_allocator.hpp"
#include "test_support.hpp"

namespace headroom::probes {
namespace {


step_trace small_trace() {
  const problem p = test::preset_problem("gpt3-125m");
  return build_trace(p, test::make_layout(8, 1, recompute_mode::selective), 0);
}

allocator_factory caching(caching_options o = {}) {
  return [o](device& d) -> std::unique_ptr<allocator> { return std::make_unique<caching_allocator>(d, o); };
}
allocator_factory raw() {
  return [](device& d) { return make_raw_allocator(d); };
}

// Returns how many allocations the trace makes and how many tensors are never freed by it.
std::pair<std::int64_t, std::int64_t> alloc_and_live_counts(const step_trace& t) {
  std::int64_t allocs = 0, live = 0;
  for (const auto& e : t.events) {
    allocs += e.kind == event_kind::alloc;
    live += e.kind == event_kind::alloc ? 1 : -1;
  }
  return {allocs, live};
}

TEST(ProbeCase, OutOfMemoryIsAResultAndTheNextCaseStartsClean) {
  const step_trace t = small_trace();
  test::fake_device dev(192 * gib, 2 * MiB);
  dev.oom_at_map = 3;  // the third device mapping is refused
  const auto free_before = dev.memory().free;
  test::fake_checker checker;
  case_options o;
  o.checker = &checker;
  const case_result c = run_case(t, dev, raw(), o);  // raw: one mapping per tensor, so event 2 is the third
  ASSERT_TRUE(c.replayed.oom_event);
  EXPECT_EQ(*c.replayed.oom_event, 2u);
  EXPECT_EQ(c.replayed.events_replayed, 2u);
  EXPECT_TRUE(c.cleanup.returned());
  EXPECT_EQ(dev.memory().free, free_before);
  EXPECT_EQ(dev.live_mappings(), 0u);
  // The two tensors that were allocated were filled, then verified and freed by the cleanup.
  ASSERT_TRUE(c.replayed.verified);
  EXPECT_EQ(c.replayed.verified->blocks_filled, 2);
  EXPECT_EQ(c.replayed.verified->blocks_verified, 2);
  EXPECT_EQ(c.replayed.released_at_end, 2u);
  EXPECT_TRUE(c.replayed.verified->ok());

  // The same device, the next case: the whole step replays.
  test::fake_checker second;
  o.checker = &second;
  const case_result d = run_case(t, dev, caching(), o);
  EXPECT_FALSE(d.replayed.oom_event);
  EXPECT_EQ(d.replayed.events_replayed, t.events.size());
  const auto [allocs, live] = alloc_and_live_counts(t);
  EXPECT_EQ(d.replayed.verified->blocks_filled, allocs);
  EXPECT_EQ(d.replayed.verified->blocks_verified, allocs);  // the state freed at the end is verified too
  EXPECT_EQ(static_cast<std::int64_t>(d.replayed.released_at_end), live);
  EXPECT_EQ(second.live(), 0u);
  EXPECT_FALSE(second.overlap_seen());
  EXPECT_EQ(dev.live_mappings(), 0u);
  EXPECT_EQ(dev.memory().free, free_before);
}

TEST(ProbeCase, ADeviceFailureMidCaseGivesEverythingBackThenPropagates) {
  const step_trace t = small_trace();
  for (const bool expandable : {false, true}) {
    test::fake_device dev(192 * gib, 2 * MiB);
    dev.fail_at_map = 5;
    caching_options o;
    o.expandable_segments = expandable;
    EXPECT_THROW(run_case(t, dev, caching(o), {}), device_error);
    EXPECT_EQ(dev.used(), 0) << "expandable " << expandable;
    EXPECT_EQ(dev.live_mappings(), 0u);
    EXPECT_EQ(dev.ranges(), 0u);
  }
}

TEST(ProbeCase, ADeviceThatDoesNotComeBackIsCaught) {
  const step_trace t = small_trace();
  test::fake_device dev(192 * gib, 2 * MiB);
  dev.leak_per_unmap = 4096;  // the driver keeps a little at every free
  try {
    run_case(t, dev, raw(), {});
    FAIL() << "a device short of its starting free memory must fail the case";
  } catch (const device_error& e) {
    EXPECT_NE(std::string(e.what()).find("MiB missing"), std::string::npos) << e.what();
  }
  // Within the slack it passes: the check is of the free memory, with a documented tolerance.
  test::fake_device dev2(192 * gib, 2 * MiB);
  dev2.leak_per_unmap = 1;
  case_options o;
  o.cleanup_slack = 2 * MiB;
  EXPECT_NO_THROW(run_case(t, dev2, raw(), o));
}

TEST(ProbeCase, ACorruptedBlockIsNamed) {
  const step_trace t = small_trace();
  test::fake_device dev(192 * gib, 2 * MiB);
  test::fake_checker checker;
  checker.corrupt = 7;
  case_options o;
  o.checker = &checker;
  const case_result c = run_case(t, dev, caching(), o);
  ASSERT_TRUE(c.replayed.verified);
  EXPECT_FALSE(c.replayed.verified->ok());
  EXPECT_EQ(c.replayed.verified->first_mismatch, 7);
  EXPECT_EQ(c.replayed.verified->mismatched_words, t.tensors[7].bytes / 8);
}

TEST(ProbeCase, ReservedPeakSamplesTheDevice) {
  const step_trace t = small_trace();
  test::fake_device dev(192 * gib, 2 * MiB);
  case_options o;
  o.sample_device = true;
  const case_result c = run_case(t, dev, caching(), o);
  // The fake's used memory is exactly what the allocator mapped: nothing outside the allocator.
  ASSERT_TRUE(c.replayed.device_used_at_peak);
  EXPECT_EQ(*c.replayed.device_used_at_peak, c.replayed.reserved.bytes);
  EXPECT_EQ(*c.replayed.device_used_max, c.replayed.reserved.bytes);
}

// Every policy hands back addresses whose live blocks never overlap (what fill / verify relies on), and
// expandable blocks lie inside the ranges the device reserved.
TEST(ProbeCase, LiveBlocksNeverOverlapUnderEveryPolicy) {
  const problem p = test::preset_problem("gpt3-1.3b");
  const step_trace t = build_trace(p, test::make_layout(8, 3, recompute_mode::none), 0);
  for (int policy = 0; policy < 4; ++policy) {
    test::fake_device dev(192 * gib, 2 * MiB);
    caching_options o;
    o.expandable_segments = policy == 2;
    if (policy == 3) o.max_split_size = 128 * MiB;
    test::fake_checker checker;
    case_options co;
    co.checker = &checker;
    const case_result c = run_case(t, dev, policy == 0 ? raw() : caching(o), co);
    EXPECT_FALSE(checker.overlap_seen()) << "policy " << policy;
    EXPECT_TRUE(c.replayed.verified->ok()) << "policy " << policy;
    EXPECT_EQ(dev.live_mappings(), 0u);
  }
}

}  // namespace
}  // namespace headroom::probes
