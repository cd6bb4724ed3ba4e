// emulated_peak_test.cpp: the allocator emulation `headroom validate` prices measured reserved peaks with
// (probes/cases/emulated_peak.hpp). Its requested peak is the planner's step peak (one model); its reserved
// peak holds what the caching allocator's rules force beyond the live bytes, here derived by hand for the
// unfused loss: the 2-byte bf16 logits block, freed before the 4-byte tensors that follow, cannot serve
// them (a cached block serves only requests no larger than it, docs/allocator-rules.md), so it stays
// reserved beside them.
#include <gtest/gtest.h>

#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "probes/cases/emulated_peak.hpp"
#include "test_support.hpp"

namespace headroom::probes {
namespace {

problem loss_bound_problem() {
  problem p = test::preset_problem("llama3-8b");
  p.training.seq = 8192;
  p.training.micro_batch = 2;
  p.training.global_batch = 16;
  p.training.attention = attention_kind::flash;
  p.training.loss = loss_kind::unfused;
  return p;
}

TEST(EmulatedPeak, RequestedIsThePlannersStepPeakAndReservedHoldsTheLogitsBlock) {
  const problem p = loss_bound_problem();
  const layout l = test::make_layout(8, 3, recompute_mode::full);
  const auto b = estimate(p, l);
  const auto e = emulate_stage(p, l, 0);
  EXPECT_EQ(e.requested, b.stages[0].step_peak);
  EXPECT_GE(e.allocated, e.requested);
  // The bf16 logits' block: tokens x vocab x 2 bytes, reserved but unusable at the loss's backward peak.
  const std::int64_t bf16_logits = 8192LL * 2 * 128256 * 2;
  EXPECT_GE(e.reserved - e.allocated, bf16_logits);
  // ... and not much more: each layer's blocks are reused by the next layer's of the same sizes, so the
  // layers leave at most one backward working set of unusable blocks beside it.
  EXPECT_LT(e.reserved - e.allocated, bf16_logits + b.stages[0].working_set);
}

TEST(EmulatedPeak, ExpandableSegmentsReserveLess) {
  const problem p = loss_bound_problem();
  const layout l = test::make_layout(8, 3, recompute_mode::full);
  caching_options expandable;
  expandable.expandable_segments = true;
  EXPECT_LT(emulate_stage(p, l, 0, expandable).reserved, emulate_stage(p, l, 0).reserved);
}

// A step beyond even the simulated 1 PiB has no complete figure: refused, never a figure cut short where
// the replay stopped.
TEST(EmulatedPeak, AStepBeyondTheSimulatedDeviceIsRefused) {
  problem p = test::preset_problem("llama3-405b");
  p.training.seq = 1 << 20;
  p.model.max_positions = 1 << 20;
  p.training.micro_batch = 16;
  p.training.global_batch = 16;
  p.training.attention = attention_kind::eager;  // 2 a s^2 b bytes of scores per layer: far past 1 PiB
  EXPECT_THROW(emulate_stage(p, test::make_layout(1, 0, recompute_mode::none), 0), bad_input);
}

TEST(EmulatedPeak, AStageOutsideThePipelineIsBadInput) {
  const problem p = loss_bound_problem();
  EXPECT_THROW(emulate_stage(p, test::make_layout(8, 3, recompute_mode::full), 1), bad_input);
}

}  // namespace
}  // namespace headroom::probes
