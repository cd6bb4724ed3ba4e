// offload_params_test.cpp: ZeRO-3 parameter offload (DeepSpeed's offload_param): the sharded parameters move
// to host memory, the gathered layers stay the GPU's transient, and the state bound no longer counts them.
#include <gtest/gtest.h>

#include "planner/estimate.hpp"
#include "planner/suggest.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

TEST(OffloadParams, ShardedParametersLeaveTheGpuGatheredLayersStay) {
  auto p = test::preset_problem("llama3-70b");
  p.training.global_batch = 64;
  layout l;
  l.gpus = 64;
  l.zero = 3;
  l.offload_optimizer = true;
  const auto on = estimate(p, l).stages[0];
  l.offload_params = true;
  const auto off = estimate(p, l).stages[0];
  EXPECT_EQ(off.params, 0);
  EXPECT_EQ(off.host_offload, on.host_offload + on.params);  // the 2-byte shards, now in host memory
  EXPECT_EQ(off.transient, on.transient);                    // layers are still gathered on the GPU
  EXPECT_EQ(off.grads, on.grads);
}

TEST(OffloadParams, NeedsZeroThreeAndLowersTheBound) {
  auto p = test::preset_problem("llama3-70b");
  layout l;
  l.gpus = 8;
  l.zero = 2;
  l.offload_params = true;
  EXPECT_TRUE(layout_error(p, l).has_value());
  // bf16-adam: 16 bytes per parameter; with the optimizer and the parameters offloaded, 2 (the gradients).
  EXPECT_EQ(bound_for(p, 1, true, true).shardable_per_param, 2);
  EXPECT_EQ(bound_for(p, 1, true, false).shardable_per_param, 4);
}

}  // namespace
}  // namespace headroom
