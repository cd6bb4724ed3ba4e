// seed_figures_test.cpp: every figure of docs/reference-case.md, to the decimal it
// prints, from the planner library (the CLI's copy of these is cli_test.cpp).
#include <gtest/gtest.h>

#include "planner/estimate.hpp"
#include "planner/suggest.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

using test::make_layout;
using test::preset_problem;
using test::rounded_gib;
constexpr auto none = recompute_mode::none;
constexpr auto selective = recompute_mode::selective;
constexpr auto full = recompute_mode::full;

const stage_breakdown worst(const problem& p, const layout& l) {
  return estimate(p, l).worst_stage();
}

TEST(SeedFigures, A_StateMemory) {
  auto p = preset_problem("gpt3-175b");
  EXPECT_EQ(p.precision.bytes_per_param(), 16);
  auto w = worst(p, make_layout(1, 0, none));
  EXPECT_EQ(w.persistent, 175'000'000'000LL * 16);  // 2.80e12 bytes
  EXPECT_DOUBLE_EQ(rounded_gib(w.persistent), 2607.7);
  EXPECT_NEAR(to_gib(w.persistent) / 192.0, 13.6, 0.05);
}

TEST(SeedFigures, B_ActivationMemory) {
  auto p = preset_problem("gpt3-175b");
  auto b = estimate(p, make_layout(8, 3, none));
  // s*b*h*(34 + 80), the reference case's, plus the two LayerNorms' fp32 mean and rstd (16 bytes per token).
  EXPECT_EQ(b.basis.per_layer.none, 2048LL * 12288 * 114 + 16 * 2048);
  EXPECT_DOUBLE_EQ(rounded_gib(b.basis.per_layer.none, 3), 2.672);
  EXPECT_DOUBLE_EQ(rounded_gib(b.worst_stage().activations), 256.5);
}

TEST(SeedFigures, C_CheapOptionsOnEightGpus) {
  auto p = preset_problem("gpt3-175b");
  struct row {
    int zero;
    double state, total;
  };
  for (auto r : {row{0, 2607.7, 2874.2}, row{1, 896.4, 1162.9}, row{2, 611.2, 877.7}, row{3, 332.8, 599.3}}) {
    auto w = worst(p, make_layout(8, r.zero, none));
    EXPECT_DOUBLE_EQ(rounded_gib(w.state), r.state) << "ZeRO-" << r.zero;
    EXPECT_DOUBLE_EQ(rounded_gib(w.activations), 256.5);
    EXPECT_DOUBLE_EQ(rounded_gib(w.total), r.total) << "ZeRO-" << r.zero;
    EXPECT_FALSE(w.fits);
  }
  auto z1 = worst(p, make_layout(8, 1, none));
  EXPECT_DOUBLE_EQ(rounded_gib(z1.params), 326.0);
  EXPECT_DOUBLE_EQ(rounded_gib(z1.grads), 326.0);
  EXPECT_DOUBLE_EQ(rounded_gib(z1.master + z1.optimizer), 244.5);
  EXPECT_DOUBLE_EQ(rounded_gib(worst(p, make_layout(8, 2, none)).grads), 40.7);
  EXPECT_NEAR(to_gib(worst(p, make_layout(8, 3, none)).transient), 6.8, 0.05);
}

TEST(SeedFigures, D_NothingFitsOnEight) {
  auto p = preset_problem("gpt3-175b");
  layout_search search(p, {}, {});
  auto s = search.suggest(8);
  EXPECT_TRUE(s.fitting.empty());
  EXPECT_TRUE(s.bound.impossible);
  EXPECT_EQ(s.bound.per_gpu, 350'000'000'000LL);
  EXPECT_DOUBLE_EQ(rounded_gib(s.bound.per_gpu, 2), 325.96);
  EXPECT_DOUBLE_EQ(rounded_gib(s.bound.usable), 182.0);
}

TEST(SeedFigures, E_MinimumGpuCount) {
  auto p = preset_problem("gpt3-175b");
  layout_search search(p, {}, {});
  auto r = min_gpus(search, 1024);
  EXPECT_NEAR(r.activation_room_bound, 14.7, 0.05);
  EXPECT_DOUBLE_EQ(rounded_gib(r.full_recompute_activations), 4.5);
  ASSERT_TRUE(r.n_min);
  EXPECT_EQ(*r.n_min, 15);
  ASSERT_TRUE(r.n_nodes);
  EXPECT_EQ(*r.n_nodes, 16);  // the seed's power of two, and two whole nodes of 8

  auto w = worst(p, make_layout(16, 3, full));
  EXPECT_DOUBLE_EQ(rounded_gib(w.persistent), 163.0);
  EXPECT_DOUBLE_EQ(rounded_gib(w.state), 169.8);
  EXPECT_DOUBLE_EQ(rounded_gib(w.activations), 4.5);
  EXPECT_DOUBLE_EQ(rounded_gib(w.total), 184.3);
  EXPECT_DOUBLE_EQ(rounded_gib(w.headroom), 7.7);
  EXPECT_NEAR(100.0 * static_cast<double>(w.headroom) / static_cast<double>(w.capacity), 4.0, 0.05);

  auto sel = worst(p, make_layout(16, 3, selective));
  EXPECT_DOUBLE_EQ(rounded_gib(sel.activations), 76.5);
  EXPECT_DOUBLE_EQ(rounded_gib(sel.total), 256.3);
  EXPECT_FALSE(sel.fits);

  // The reference 180.9: pp=2 (or tp=2 without sequence parallelism) halves the transient, not activations.
  auto pp2 = worst(p, make_layout(16, 3, full, 1, 2));
  EXPECT_DOUBLE_EQ(rounded_gib(pp2.state), 166.4);
  EXPECT_DOUBLE_EQ(rounded_gib(pp2.total), 180.9);
  auto tp2 = make_layout(16, 3, full, 2, 1);
  tp2.sequence_parallel = false;
  EXPECT_DOUBLE_EQ(rounded_gib(worst(p, tp2).total), 180.9);
  tp2.sequence_parallel = true;  // with sp the full-recompute input is split too: 2.25 GiB
  EXPECT_DOUBLE_EQ(rounded_gib(worst(p, tp2).total), 178.6);
}

TEST(SeedFigures, F_ThirtyTwoGpus) {
  auto p = preset_problem("gpt3-175b");
  auto w = worst(p, make_layout(32, 3, selective));
  EXPECT_DOUBLE_EQ(rounded_gib(w.state), 88.3);
  EXPECT_DOUBLE_EQ(rounded_gib(w.activations), 76.5);
  EXPECT_DOUBLE_EQ(rounded_gib(w.total), 174.8);
  EXPECT_DOUBLE_EQ(rounded_gib(w.headroom), 17.2);
  EXPECT_NEAR(100.0 * static_cast<double>(w.headroom) / static_cast<double>(w.capacity), 9.0, 0.05);
  EXPECT_DOUBLE_EQ(rounded_gib(worst(p, make_layout(32, 3, full)).total), 102.8);
  EXPECT_DOUBLE_EQ(rounded_gib(worst(p, make_layout(32, 3, selective, 2, 1)).total), 133.1);
  EXPECT_DOUBLE_EQ(rounded_gib(worst(p, make_layout(32, 3, selective, 1, 2)).total), 171.4);
}

}  // namespace
}  // namespace headroom
