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

TEST(Layout, OneNameTablePerEnum) {
  for (auto r : {recompute_mode::none, recompute_mode::selective, recompute_mode::full})
    EXPECT_EQ(parse_name<recompute_mode>(to_string(r)), r);
  for (auto a : {attention_kind::eager, attention_kind::flash})
    EXPECT_EQ(parse_name<attention_kind>(to_string(a)), a);
  for (auto k : {loss_kind::fused, loss_kind::unfused}) EXPECT_EQ(parse_name<loss_kind>(to_string(k)), k);
  EXPECT_FALSE(parse_name<recompute_mode>("FULL"));
  EXPECT_FALSE(parse_name<attention_kind>(""));
  EXPECT_EQ(names_of<recompute_mode>(),
            (std::vector<std::string>{"none", "selective", "full", "selective-op", "full-every-2", "full-every-3",
                                      "full-every-4", "full-every-5", "full-every-6", "full-every-7",
                                      "full-every-8"}));
  EXPECT_EQ(names_of<attention_kind>(), (std::vector<std::string>{"eager", "flash", "flex"}));
  EXPECT_EQ(names_phrase<recompute_mode>(),
            "none, selective, full, selective-op, full-every-2, full-every-3, full-every-4, full-every-5, "
            "full-every-6, full-every-7 or full-every-8");
  EXPECT_EQ(names_phrase<loss_kind>(), "fused, compiled or unfused");
}

TEST(Layout, DefaultsAreTheLibrarys) {
  const problem p = preset_problem("gpt3-175b");
  EXPECT_EQ(p.training.global_batch, 1536);
  EXPECT_EQ(p.training.micro_batch, 1);
  EXPECT_EQ(p.device.capacity, 192 * gib);
  EXPECT_EQ(p.device.reserve.fixed, 10 * gib);
  EXPECT_EQ(p.device.fixed_overheads, 1024 * mib);     // CUDA context and NCCL
  EXPECT_EQ(p.device.allocator_workspaces, 64 * mib);  // PyTorch's two cuBLAS workspaces
  EXPECT_EQ(p.device.gpus_per_node, 8);
  EXPECT_EQ(p.precision.name, default_recipe);
}

// The schedule's rule, beside the layout's: the interleaved schedule runs rounds of pp micro-batches.
TEST(Layout, ScheduleErrorIsTheInterleavingRule) {
  auto p = preset_problem("gpt3-175b");
  auto l = make_layout(16, 0, recompute_mode::none, 1, 4);
  l.vpp = 2;
  p.training.global_batch = 24;  // dp 4: 6 micro-batches per step, not a multiple of pp = 4
  EXPECT_FALSE(layout_error(p, l));
  const auto e = schedule_error(p, l);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->field(), "vpp");
  EXPECT_EQ(std::string(e->what()),
            "vpp: the interleaved schedule needs micro-batches per step (6) divisible by pp=4");
  EXPECT_EQ(field_of(p, l), "vpp");  // validate() throws it
  p.training.global_batch = 32;
  EXPECT_FALSE(schedule_error(p, l));
  p.training.global_batch = 24;
  l.vpp = 1;  // 1F1B runs any count
  EXPECT_FALSE(schedule_error(p, l));
  EXPECT_EQ(microbatches_per_step(p, l), 6);
  p.training.micro_batch = 5;  // 5 x dp 4 = 20 does not divide 24: Megatron-LM refuses it
  EXPECT_FALSE(batch_splits(p, l));
  EXPECT_EQ(field_of(p, l), "global-batch");
  p.training.micro_batch = 3;  // 3 x 4 = 12 divides 24
  EXPECT_TRUE(batch_splits(p, l));
  EXPECT_FALSE(schedule_error(p, l));
  p.training.micro_batch = 1;
  p.training.global_batch = 3;  // dp 4 > 3: a rank would get no sample
  EXPECT_FALSE(batch_splits(p, l));
  EXPECT_EQ(field_of(p, l), "global-batch");
  p.training.global_batch = 6;  // micro-batch 1: ceil(6 / 4) = 2 micro-batches, the reference convention
  EXPECT_TRUE(batch_splits(p, l));
  EXPECT_EQ(microbatches_per_step(p, l), 2);
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
