// cuda_device_test.cpp: the CUDA backend on a real GPU (label gpu; each test skips with the reason where
// there is no device): cudaMalloc and VMM mappings at real addresses that kernels fill and verify; every
// policy replays a real trace with fill / verify and gives the device back; out-of-memory under a cap is a
// result and the next case runs; a CUDA failure becomes one cuda_error naming the call.
#include "probes/devices/cuda_device.hpp"

#include <gtest/gtest.h>

#include "planner/errors.hpp"
#include "probes/devices/cuda_check.hpp"
#include "probes/cases/gpu_backend.hpp"
#include "probes/cases/probe_case.hpp"
#include "test_support.hpp"

namespace headroom::probes {
namespace {


std::unique_ptr<gpu_backend> open_or_skip(std::optional<std::int64_t> cap = std::nullopt) {
  if (auto why = cuda_unavailable_reason()) return nullptr;
  return open_gpu_backend(cap);
}

#define SKIP_WITHOUT_GPU()                                        \
  if (auto why = cuda_unavailable_reason()) GTEST_SKIP() << *why; \
  static_assert(true)

TEST(GpuDevice, VmmPagesAtRealAddressesHoldWhatIsWritten) {
  SKIP_WITHOUT_GPU();
  auto g = open_or_skip();
  device& d = g->dev();
  const auto base = d.reserve_range(200 * MiB);
  ASSERT_TRUE(base);
  ASSERT_TRUE(d.map_at(*base, 0, 60 * MiB, 20 * MiB));
  ASSERT_TRUE(d.map_at(*base, 60 * MiB, 40 * MiB, 20 * MiB));  // grows contiguously
  auto checker = g->make_checker();
  checker->on_alloc(1, *base, 100 * MiB);  // one block across both mappings
  checker->on_free(1, *base, 100 * MiB);
  const verification v = checker->finish();
  EXPECT_TRUE(v.ok()) << v.mismatched_words;
  d.unmap_at(*base, 80 * MiB, 20 * MiB, 20 * MiB);  // the tail page alone
  d.unmap_at(*base, 0, 80 * MiB, 20 * MiB);
  d.release_range(*base, 200 * MiB);
  EXPECT_EQ(d.used(), 0);
}

TEST(GpuDevice, EveryPolicyReplaysWithFillAndVerifyAndGivesTheDeviceBack) {
  SKIP_WITHOUT_GPU();
  auto g = open_or_skip();
  const problem p = test::preset_problem("gpt3-1.3b");
  const step_trace t = build_trace(p, test::make_layout(8, 1, recompute_mode::selective), 0);
  for (const char* policy : {"raw", "caching", "expandable", "driver-pool"}) {
    caching_options o;
    o.expandable_segments = std::string(policy) == "expandable";
    const std::string name = o.expandable_segments ? "caching" : policy;
    auto checker = g->make_checker();
    case_options co;
    co.checker = checker.get();
    co.sample_device = true;
    co.cleanup_slack = g->cleanup_slack();
    const case_result c = run_case(
        t, g->dev(), [&](device&) { return g->make_allocator(name, o); }, co);
    EXPECT_FALSE(c.replayed.oom_event) << policy;
    ASSERT_TRUE(c.replayed.verified) << policy;
    EXPECT_TRUE(c.replayed.verified->ok()) << policy << ": " << c.replayed.verified->mismatched_words;
    EXPECT_EQ(c.replayed.requested.bytes, trace_peak(t).bytes) << policy;
    EXPECT_GE(c.replayed.reserved.bytes, c.replayed.requested.bytes) << policy;
    ASSERT_TRUE(c.replayed.device_used_at_peak);
    EXPECT_GE(*c.replayed.device_used_at_peak, c.replayed.reserved.bytes) << policy;
    EXPECT_TRUE(c.cleanup.returned()) << policy;
    if (name == "driver-pool") {
      ASSERT_TRUE(c.pool);
      EXPECT_GE(c.pool->reserved_high, c.replayed.reserved.bytes);
    }
  }
}

TEST(GpuDevice, OutOfMemoryUnderACapIsAResultAndTheNextCaseRuns) {
  SKIP_WITHOUT_GPU();
  auto probe = open_or_skip();
  const std::int64_t cap = probe->truth().after_context + 4 * gib;  // room for 4 GiB of tensors
  probe.reset();
  auto g = open_or_skip(cap);
  const problem p = test::preset_problem("gpt3-1.3b");
  const step_trace big =
      build_trace(p, test::make_layout(1, 0, recompute_mode::none), 0);  // ~20 GiB of state
  const step_trace small =
      build_trace(test::preset_problem("gpt3-125m"), test::make_layout(8, 1, recompute_mode::selective), 0);
  const std::int64_t free_before = g->dev().memory().free;
  for (const char* name : {"caching", "raw"}) {
    auto checker = g->make_checker();
    case_options co;
    co.checker = checker.get();
    co.cleanup_slack = g->cleanup_slack();
    const auto make = [&](device&) { return g->make_allocator(name, {}); };
    const case_result oom = run_case(big, g->dev(), make, co);
    ASSERT_TRUE(oom.replayed.oom_event) << name;
    EXPECT_TRUE(oom.replayed.verified->ok());
    auto checker2 = g->make_checker();
    co.checker = checker2.get();
    const case_result ok = run_case(small, g->dev(), make, co);
    EXPECT_FALSE(ok.replayed.oom_event) << name;
    EXPECT_TRUE(ok.replayed.verified->ok());
  }
  EXPECT_GE(g->dev().memory().free, free_before - g->cleanup_slack());
}

TEST(GpuDevice, OneRankNcclGroupIsJoinedAndItsMemoryMeasured) {
  // The multi-rank probe's NCCL path on one GPU: a one-rank data-parallel communicator, its first all-reduce
  // of a 25 MiB bucket, both as device-used deltas; a second group joins beside it.
  SKIP_WITHOUT_GPU();
  auto g = open_or_skip();
  std::string why;
  const auto id = g->nccl_unique_id(why);
  if (!id) GTEST_SKIP() << "NCCL cannot be loaded: " << why;
  EXPECT_EQ(id->size(), 128u);
  nccl_group_spec dp{"dp", 1, 0, *id, 25 * MiB, false};
  const auto id2 = g->nccl_unique_id(why);
  ASSERT_TRUE(id2);
  nccl_group_spec pp{"pp", 1, 0, *id2, 4 * MiB, true};
  const auto m = g->join_nccl_groups({dp, pp});
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].name, "dp");
  EXPECT_EQ(m[1].collective, "send/recv ring");
  ASSERT_TRUE(m[0].init_bytes && m[0].collective_bytes);
  EXPECT_GE(*m[0].init_bytes, 0);
  EXPECT_GT(m[0].total(), 0) << "a communicator and its first collective cost no device memory at all";
  EXPECT_LT(m[0].total(), std::int64_t{4} << 30);
  // A malformed id is a device error, not a crash.
  EXPECT_THROW(g->join_nccl_groups({{"tp", 1, 0, "short", 1, false}}), device_error);
}

TEST(GpuDevice, AFailingCallBecomesOneErrorNamingIt) {
  SKIP_WITHOUT_GPU();
  auto g = open_or_skip();
  try {
    HEADROOM_CUDA_CALL(cudaFree(reinterpret_cast<void*>(0x10)));
    FAIL() << "freeing a pointer that was never allocated must fail";
  } catch (const cuda_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cudaFree"), std::string::npos) << what;
    EXPECT_NE(what.find("cuda_device_test.cpp"), std::string::npos) << what;
  }
  EXPECT_THROW(open_gpu_backend(std::int64_t{1} << 50), bad_input);  // a cap above the card
}

}  // namespace
}  // namespace headroom::probes
