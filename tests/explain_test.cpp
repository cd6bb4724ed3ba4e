// explain_test.cpp: the derivations carry the intermediate figures of docs/reference-case.md.
#include "planner/explain.hpp"

#include <gtest/gtest.h>

#include "planner/estimate.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

using test::make_layout;
using test::preset_problem;

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST(Explain, PlanCarriesTheSeedsDerivation) {
  auto p = preset_problem("gpt3-175b");
  auto t = explain_plan(p, estimate(p, make_layout(8, 3, recompute_mode::none)));
  EXPECT_TRUE(has(t, "state = 175e9 * 16 = 2.8e12 bytes")) << t;
  EXPECT_TRUE(has(t, "2607.7 / 192 = 13.6 GPUs of pure state"));
  EXPECT_TRUE(has(t, "5*a*s/h = 5 * 96 * 2048 / 12288 = 983040 / 12288 = 80"));
  EXPECT_TRUE(has(t, "= 2.869e9 bytes = 2.672 GiB"));
  EXPECT_TRUE(has(t, "96 * 2.672 = 256.5 GiB"));
  EXPECT_TRUE(has(t, "= 599.3 GiB"));
}

TEST(Explain, TensorParallelSaysWhatSequenceParallelChanges) {
  auto p = preset_problem("gpt3-175b");
  auto l = make_layout(16, 3, recompute_mode::full, 2, 1);
  l.sequence_parallel = false;
  auto t = explain_plan(p, estimate(p, l));
  EXPECT_TRUE(has(t, "with sequence parallel on instead: activations 2.3 GiB, total 178.6 GiB")) << t;
}

TEST(Explain, NothingFitsProof) {
  auto p = preset_problem("gpt3-175b");
  auto s = layout_search(p, {}, {}).suggest(8);
  auto t = explain_nothing_fits(p, s);
  EXPECT_TRUE(has(t, "16 * 175e9 / 8 = 350e9 bytes = 325.96 GiB")) << t;
  EXPECT_TRUE(has(t, "325.96 > 182.0  ->  no configuration exists"));
}

TEST(Explain, NoValidLayoutIsSaidPlainly) {
  auto p = preset_problem("gpt3-175b");
  search_axes axes;
  axes.pp = 96;
  auto s = layout_search(p, axes, {}).suggest(4096);  // 96 does not divide 4096
  EXPECT_EQ(s.evaluated, 0);
  EXPECT_TRUE(has(explain_nothing_fits(p, s), "no layout is valid on 4096 GPUs"));
}

TEST(Explain, MinGpus) {
  auto p = preset_problem("gpt3-175b");
  auto r = min_gpus(layout_search(p, {}, {}), 64);
  auto t = explain_min_gpus(p, r);
  EXPECT_TRUE(has(t, "N >= 2607.7 / 177.5 = 14.7   ->  N >= 15  ->  N >= 16 in whole nodes of 8 (--gpus-per-node)")) << t;
}

}  // namespace
}  // namespace headroom
