// layout_test.cpp: every way a layout can fail to fit a model or a GPU count, and the names of layouts.
#include "planner/layout.hpp"

#include <gtest/gtest.h>

#include "planner/errors.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

using test::make_layout;
using test::preset_problem;

std::string field_of(const problem& p, const layout& l) {
  try {
    validate(p, l);
  } catch (const bad_input& e) {
    return e.field();
  }
  return "";
}

TEST(Layout, RejectsWhatDoesNotDivide) {
  auto p = preset_problem("gpt3-175b");
  EXPECT_EQ(field_of(p, make_layout(8, 0, recompute_mode::none)), "");
  EXPECT_EQ(field_of(p, make_layout(14, 0, recompute_mode::none, 7, 1)), "tp");    // 96 heads
  EXPECT_EQ(field_of(p, make_layout(35, 0, recompute_mode::none, 1, 5)), "");      // balanced 20,19,19,19,19
  EXPECT_EQ(field_of(p, make_layout(97, 0, recompute_mode::none, 1, 97)), "pp");   // a stage with no layer
  EXPECT_EQ(field_of(p, make_layout(12, 0, recompute_mode::none, 8, 1)), "gpus");  // 8 does not divide 12
  EXPECT_EQ(field_of(p, make_layout(16, 0, recompute_mode::none, 16, 1)), "tp");   // crosses a node
  EXPECT_EQ(field_of(p, make_layout(0, 0, recompute_mode::none)), "gpus");
  EXPECT_EQ(field_of(p, make_layout(-8, 0, recompute_mode::none)), "gpus");
  EXPECT_EQ(field_of(p, make_layout(8, 4, recompute_mode::none)), "zero");
  auto l = make_layout(16, 0, recompute_mode::none, 1, 8);
  l.vpp = 5;  // 12 layers per stage
  EXPECT_EQ(field_of(p, l), "vpp");
  l = make_layout(16, 0, recompute_mode::none);
  l.cp = 3;
  EXPECT_EQ(field_of(p, l), "gpus");
  l.gpus = 3;
  EXPECT_EQ(field_of(p, l), "cp");  // 2048 not divisible by 3
  l = make_layout(3, 0, recompute_mode::none, 3, 1);
  EXPECT_EQ(field_of(p, l), "tp");  // sequence parallel: 2048 not divisible by 3
  l.sequence_parallel = false;
  EXPECT_EQ(field_of(p, l), "");
}

TEST(Layout, TrainingAndDeviceLimits) {
  training_spec t;
  device_spec d;
  EXPECT_NO_THROW(validate(t, d));
  t.micro_batch = 0;
  EXPECT_THROW(validate(t, d), bad_input);
  t = {};
  t.seq = -1;
  EXPECT_THROW(validate(t, d), bad_input);
  t = {};
  d.reserve.fixed = d.capacity;
  EXPECT_THROW(validate(t, d), bad_input);
}

TEST(Layout, Names) {
  auto l = make_layout(32, 3, recompute_mode::selective, 2, 1);
  EXPECT_EQ(axes_string(l), "tp=2 pp=1 dp=16 sp");
  EXPECT_EQ(zero_name(l), "ZeRO-3");
  EXPECT_EQ(zero_name(make_layout(8, 0, recompute_mode::none)), "DDP");
  EXPECT_EQ(zero_name(make_layout(8, 0, recompute_mode::none, 8, 1)), "no DP");
}

}  // namespace
}  // namespace headroom
