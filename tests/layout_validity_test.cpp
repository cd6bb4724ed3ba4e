// layout_validity_test.cpp: `plan`, `trace`, `probe`, --suggest and --min-gpus agree on which layouts are
// valid. Over many layouts (tp, pp, vpp, micro-batch, global batch, GPUs), a layout is valid for `plan`
// and `probe` (estimate(), validate()) exactly when the trace builds and the search, with every axis fixed
// to it, evaluates it; and every layout the search enumerates on its own is one `plan` and `trace` accept.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "planner/suggest.hpp"
#include "probes/trace/step_trace.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

// Returns whether `f` runs without bad_input.
template <class F>
bool accepted(F&& f) {
  try {
    f();
    return true;
  } catch (const bad_input&) {
    return false;
  }
}

problem small_problem(std::int64_t global_batch) {
  problem p = test::preset_problem("gpt3-125m");  // 12 layers, 12 heads
  p.training.global_batch = global_batch;
  return p;
}

// Returns the search's axes fixed to every value of `l` and `micro_batch`.
search_axes fixed_to(const layout& l, std::int64_t micro_batch) {
  search_axes a;
  a.tp = l.tp;
  a.pp = l.pp;
  a.cp = l.cp;
  a.vpp = l.vpp;
  a.zero = l.zero;
  a.recompute = l.recompute;
  a.sequence_parallel = l.sequence_parallel;
  a.micro_batch = micro_batch;
  return a;
}

TEST(LayoutValidity, PlanTraceAndSearchAgreeOnEveryLayout) {
  int valid = 0, schedule_refused = 0, checked = 0;
  for (std::int64_t g : {6, 24, 40, 1536})
    for (std::int64_t mb : {1, 2, 3})
      for (int gpus : {4, 8, 12, 16, 24})
        for (int tp : {1, 2, 3, 4})
          for (int pp : {1, 2, 3, 4, 6})
            for (int vpp : {1, 2, 3}) {
              problem p = small_problem(g);
              p.training.micro_batch = mb;
              layout l = test::make_layout(gpus, 1, recompute_mode::selective, tp, pp);
              l.vpp = vpp;
              const bool by_rules = !layout_error(p, l) && !schedule_error(p, l);
              const bool plan = accepted([&] { estimate(p, l); });
              const bool probe = accepted([&] { validate(p, l); });
              const bool trace = accepted([&] { probes::build_trace(p, l, 0); });
              bool search = false, min_gpus = false;
              accepted([&] {
                const layout_search s(p, fixed_to(l, mb), {});
                search = s.suggest(gpus).evaluated == 1;
                std::int64_t evaluated = 0;
                s.any_fits(gpus, evaluated);
                min_gpus = evaluated == 1;
              });
              const std::string what = "G=" + std::to_string(g) + " mb=" + std::to_string(mb) +
                                       " N=" + std::to_string(gpus) + " " + axes_string(l);
              EXPECT_EQ(plan, by_rules) << what;
              EXPECT_EQ(probe, plan) << what;
              EXPECT_EQ(trace, plan) << what;
              EXPECT_EQ(search, plan) << what;
              EXPECT_EQ(min_gpus, plan) << what;
              valid += plan;
              schedule_refused += !layout_error(p, l) && schedule_error(p, l);
              ++checked;
            }
  EXPECT_EQ(checked, 3600);
  EXPECT_GT(valid, 500);
  EXPECT_GT(schedule_refused, 50);  // the interleaving rule is exercised, not only the divisibility ones
}

// The search on its own (tp, sp, micro-batch, pp, vpp searched; every layout fits an ample GPU, so every
// layout it evaluates is listed): each one is valid for `plan` and builds a trace, and it evaluates every
// layout `plan` accepts that its searched rules allow (sp only with tp > 1, vpp only with pp > 1, a
// micro-batch b > 1 only where b * dp divides the global batch).
TEST(LayoutValidity, EverySearchedLayoutIsOnePlanAndTraceAccept) {
  for (std::int64_t g : {24, 40})
    for (int gpus : {8, 12, 16}) {
      problem p = small_problem(g);
      p.device.capacity = std::int64_t{1} << 50;
      search_axes axes;
      axes.zero = 1;
      axes.recompute = recompute_mode::selective;
      const suggestion s = layout_search(p, axes, {}).suggest(gpus);
      ASSERT_EQ(static_cast<std::int64_t>(s.fitting.size()), s.evaluated);
      using key = std::tuple<int, int, int, bool, std::int64_t>;  // tp, pp, vpp, sp, micro-batch
      std::set<key> searched;
      for (const auto& c : s.fitting) {
        problem q = p;
        q.training.micro_batch = c.micro_batch;
        const std::string what = "G=" + std::to_string(g) + " mb=" + std::to_string(c.micro_batch) +
                                 " N=" + std::to_string(gpus) + " " + axes_string(c.where);
        EXPECT_TRUE(accepted([&] { estimate(q, c.where); })) << what;
        EXPECT_TRUE(accepted([&] { probes::build_trace(q, c.where, 0); })) << what;
        searched.insert({c.where.tp, c.where.pp, c.where.vpp, c.where.sp(), c.micro_batch});
      }
      std::set<key> expected;
      for (int tp = 1; tp <= 8; ++tp)
        for (bool sp : {true, false})
          for (std::int64_t mb : {1, 2, 4, 8, 16})
            for (int pp = 1; pp <= 14; ++pp)
              for (int vpp = 1; vpp <= 8; ++vpp) {
                if ((tp == 1 && !sp) || (pp == 1 && vpp > 1)) continue;
                problem q = p;
                q.training.micro_batch = mb;
                layout l = test::make_layout(gpus, 1, recompute_mode::selective, tp, pp);
                l.vpp = vpp;
                l.sequence_parallel = sp;
                if (layout_error(q, l) || schedule_error(q, l)) continue;
                // schedule_error's batch rule, restated: mb x dp at most G, and dividing it when mb > 1.
                const std::int64_t round = mb * l.dp();
                if (round > g || (mb > 1 && g % round != 0)) ADD_FAILURE() << "batch rule not applied";
                expected.insert({tp, pp, vpp, l.sp(), mb});
              }
      EXPECT_EQ(searched, expected) << "G=" << g << " N=" << gpus;
      EXPECT_FALSE(expected.empty());
    }
}

}  // namespace
}  // namespace headroom
