// workspaces_test.cpp: the library workspaces in the allocator (planner/workspaces.hpp) against sizes read
// from the libraries' sources and against Megatron-LM's functional tests, whose golden values log the bytes
// still allocated after the optimizer step (mem-allocated-bytes): what the planner's persistent state leaves
// out of it is these workspaces.
#include <gtest/gtest.h>

#include "planner/imports/megatron_args.hpp"
#include "planner/layout.hpp"
#include "planner/stage_terms.hpp"
#include "planner/units.hpp"
#include "planner/workspaces.hpp"

namespace headroom {
namespace {

TEST(Workspaces, TorchAloneOnHopperIsTwoOf32MiB) {
  // PyTorch's CublasHandlePool.cpp default on sm90: 4096 KiB x 8; two (handle, stream) pairs in a step.
  EXPECT_EQ(allocator_workspaces("sm90", {}), 64 * mib);
  EXPECT_EQ(allocator_workspaces("", {}), 64 * mib);  // unknown: the GPUs headroom plans for
  EXPECT_EQ(device_spec{}.allocator_workspaces, allocator_workspaces("", {}));
}

TEST(Workspaces, TorchAloneBeforeSm90IsTheSmallDefault) {
  // ":4096:2:16:8": 4096 KiB twice and 16 KiB eight times, per workspace.
  EXPECT_EQ(allocator_workspaces("sm80", {}), 2 * (8 * mib + 128 * kib));
  // Blackwell: 32 MiB since PyTorch PR #175344 (2026-02-19; v2.6.0 gave it the small default).
  EXPECT_EQ(allocator_workspaces("sm100", {}), 64 * mib);
  EXPECT_EQ(allocator_workspaces("sm120", {}), 64 * mib);
  workspace_use det;
  det.cublas_config_4096_8 = true;  // CUBLAS_WORKSPACE_CONFIG=:4096:8 (Megatron --deterministic-mode)
  EXPECT_EQ(allocator_workspaces("sm80", det), 64 * mib);
  EXPECT_EQ(allocator_workspaces("gfx942", {}), 2 * (8 * mib + 128 * kib));
}

TEST(Workspaces, MegatronWithTransformerEngineMatchesTheFunctionalTests) {
  workspace_use te;
  te.transformer_engine = true;
  te.cublas_config_4096_8 = true;
  // gpt3_mcore_te_tp1_pp1_dist_optimizer_no_mmap_bin_files (H100): mem-allocated-bytes less the planner's
  // persistent state is 96.0 MiB = TE's 32 MiB + 1 KiB + PyTorch's two of 32 MiB.
  EXPECT_EQ(allocator_workspaces("sm90", te), 96 * mib + kib);
  // gpt3_mcore_te_tp4_pp1_dist_optimizer_overlap_grad_reduce (A100): 68.5 MiB measured = 4 + 2 x 32.
  EXPECT_EQ(allocator_workspaces("sm80", te), 68 * mib);
  // With --moe-grouped-gemm TE keeps four more, one per compute stream: 224 MiB + 5 KiB on H100
  // (gpt3_moe_mcore_te_tp4_ep2_etp2_pp2: 230.4 MiB measured, 4 MiB of it Megatron's global buffer).
  te.grouped_gemm = true;
  EXPECT_EQ(allocator_workspaces("sm90", te), 224 * mib + 5 * kib);
}

TEST(Workspaces, TheStepPeakCheckAddsThemBesideTheFixedOverheads) {
  stage_terms t;
  t.persistent = 10 * gib;
  t.workspaces = 96 * mib;  // estimate() copies device_spec::allocator_workspaces here
  device_spec d;
  EXPECT_EQ(t.step_peak(), 10 * gib + 96 * mib);
  EXPECT_EQ(t.peak_total(d), 10 * gib + 96 * mib + d.fixed_overheads);
  // The reference total is the reserve's: the workspaces are inside what the reserve covers.
  EXPECT_EQ(t.total(d, 1), 10 * gib + d.reserve.fixed);
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

// A Megatron-Core launch runs TE: its workspaces come with the launch, grouped GEMM and deterministic mode
// read from its flags (planner/imports/megatron_workspaces.cpp).
TEST(Workspaces, AMegatronLaunchStatesItsLibraries) {
  const std::string base =
      "--num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 --max-position-embeddings 1024 "
      "--micro-batch-size 1 --global-batch-size 8 --vocab-size 32000 --bf16 ";
  auto imp = import_megatron_args(base, "test");
  ASSERT_TRUE(imp.workspaces);
  EXPECT_TRUE(imp.workspaces->transformer_engine);
  EXPECT_FALSE(imp.workspaces->grouped_gemm);
  EXPECT_FALSE(imp.workspaces->cublas_config_4096_8);
  EXPECT_EQ(allocator_workspaces("sm90", *imp.workspaces), 96 * mib + kib);
  imp = import_megatron_args(base + "--moe-grouped-gemm --deterministic-mode", "test");
  ASSERT_TRUE(imp.workspaces);
  EXPECT_TRUE(imp.workspaces->grouped_gemm);
  EXPECT_TRUE(imp.workspaces->cublas_config_4096_8);
  EXPECT_EQ(allocator_workspaces("sm80", *imp.workspaces), 2 * 32 * mib + 5 * 4 * mib);
}

}  // namespace
}  // namespace headroom
