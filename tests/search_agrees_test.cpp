// search_agrees_test.cpp: the search's inner loop (suggest.cpp: stage pieces combined without a breakdown, on
// the stages that can be the worst) and `plan`'s full evaluation (estimate(): every stage's breakdown) agree
// on random mixture-of-experts layouts, to the byte: ep, expert tp, expert data parallelism, the dispatcher,
// HSDP replicas, recompute modes, ZeRO stages, pipeline splits and calibrated reserves drawn at random.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <tuple>

#include "planner/estimate.hpp"
#include "planner/suggest.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

template <class T, std::size_t N>
T pick(std::mt19937& g, const T (&values)[N]) {
  return values[std::uniform_int_distribution<std::size_t>(0, N - 1)(g)];
}

// One drawn case: the problem `plan` is given and the layout, with the axes that fix the search to it.
struct drawn {
  problem p;
  layout l;
  search_axes axes;
};

// Returns a random layout for preset `name` (it may be invalid: the caller asks layout_error).
drawn draw(const std::string& name, std::mt19937& g) {
  drawn d{test::preset_problem(name), {}, {}};
  problem& p = d.p;
  p.training.seq = pick(g, {2048, 4096});
  p.training.global_batch = pick(g, {256, 1024});
  p.training.attention = pick(g, {attention_kind::flash, attention_kind::eager});
  p.training.routing.dispatcher = pick(g, {dispatcher_kind::alltoall, dispatcher_kind::allgather});
  p.training.micro_batch = pick(g, {1, 1, 2, 4});
  switch (std::uniform_int_distribution<int>(0, 5)(g)) {  // the pipeline split
    case 0:
      p.training.split.first_stage = pick(g, {1, 2, 3});
      break;
    case 1:
      p.training.split.embedding_as_layer = true;
      p.training.split.loss_as_layer = pick(g, {false, true});
      break;
    default:
      break;  // balanced
  }
  switch (std::uniform_int_distribution<int>(0, 3)(g)) {  // the reserve: fixed, or calibrated terms
    case 0:
      p.device.reserve.fragmentation = 0.07;
      p.device.reserve.per_token = 12000;
      p.device.reserve.activation_extra = pick(g, {-0.3, 0.0, 0.2});
      break;
    case 1:
      p.device.reserve.activation_extra = -0.5;  // the total can fall as activations grow: every stage tried
      break;
    default:
      break;
  }
  layout& l = d.l;
  l.tp = pick(g, {1, 2, 4, 8});
  l.pp = pick(g, {1, 2, 3, 4, 6, 8});
  l.vpp = l.pp > 1 ? pick(g, {1, 1, 2, 3, 4}) : 1;
  l.cp = pick(g, {1, 1, 2});
  l.ep = pick(g, {1, 2, 4, 8, 16});
  l.etp = pick(g, {0, 0, 1, 2});
  l.dp_replicate = pick(g, {1, 1, 2});
  l.zero = pick(g, {0, 1, 2, 3});
  l.recompute = pick(g, {recompute_mode::none, recompute_mode::selective, recompute_mode::full,
                         recompute_mode::full_every_2, recompute_mode::full_every_4});
  l.offload_optimizer = l.zero > 0 && pick(g, {false, false, true});
  l.gpus = l.tp * l.pp * l.cp * pick(g, {1, 2, 4, 8, 16});
  search_axes& a = d.axes;
  a.tp = l.tp;
  a.pp = l.pp;
  a.vpp = l.vpp;
  a.cp = l.cp;
  a.ep = l.ep;
  a.etp = l.etp;
  a.zero = l.zero;
  a.dp_replicate = l.dp_replicate;
  a.micro_batch = p.training.micro_batch;
  a.recompute = l.recompute;
  a.sequence_parallel = l.sequence_parallel;
  a.offload_optimizer = l.offload_optimizer;
  return d;
}

// Checks that a stage the search reports is `plan`'s, figure by figure.
void expect_same_stage(const stage_breakdown& got, const stage_breakdown& want, const std::string& what) {
  EXPECT_EQ(got.stage, want.stage) << what;
  EXPECT_EQ(got.layers, want.layers) << what;
  EXPECT_EQ(got.moe_layers, want.moe_layers) << what;
  EXPECT_EQ(got.params_on_rank, want.params_on_rank) << what;
  EXPECT_EQ(got.expert_params_on_rank, want.expert_params_on_rank) << what;
  EXPECT_EQ(got.buffer_bytes, want.buffer_bytes) << what;
  EXPECT_EQ(got.params, want.params) << what;
  EXPECT_EQ(got.grads, want.grads) << what;
  EXPECT_EQ(got.master, want.master) << what;
  EXPECT_EQ(got.optimizer, want.optimizer) << what;
  EXPECT_EQ(got.host_offload, want.host_offload) << what;
  EXPECT_EQ(got.persistent, want.persistent) << what;
  EXPECT_EQ(got.transient, want.transient) << what;
  EXPECT_EQ(got.state, want.state) << what;
  EXPECT_EQ(got.layer_activations, want.layer_activations) << what;
  EXPECT_EQ(got.moe_layer_activations, want.moe_layer_activations) << what;
  EXPECT_EQ(got.embedding_activations, want.embedding_activations) << what;
  EXPECT_EQ(got.mtp_activations, want.mtp_activations) << what;
  EXPECT_EQ(got.activations, want.activations) << what;
  EXPECT_EQ(got.logits, want.logits) << what;
  EXPECT_EQ(got.working_set, want.working_set) << what;
  EXPECT_EQ(got.output_phase, want.output_phase) << what;
  EXPECT_EQ(got.allocator_workspaces, want.allocator_workspaces) << what;
  EXPECT_EQ(got.step_peak, want.step_peak) << what;
  EXPECT_EQ(got.fixed_overheads, want.fixed_overheads) << what;
  EXPECT_EQ(got.peak_total, want.peak_total) << what;
  EXPECT_EQ(got.reserve, want.reserve) << what;
  EXPECT_EQ(got.total, want.total) << what;
  EXPECT_EQ(got.capacity, want.capacity) << what;
  EXPECT_EQ(got.headroom, want.headroom) << what;
  EXPECT_EQ(got.fits, want.fits) << what;
}

// Checks that the search fixed to d's layout finds it fitting exactly at the capacity estimate() needs and
// not a byte below, and that the breakdown it reports is estimate()'s worst stage.
void expect_agrees(const drawn& d, const std::string& what) {
  const breakdown b = estimate(d.p, d.l);
  const std::int64_t needed = b.worst_stage().decisive_total();
  for (const std::int64_t capacity : {needed, needed - 1}) {
    problem q = d.p;
    q.device.capacity = capacity;
    const layout_search search(q, d.axes, {});
    const suggestion s = search.suggest(d.l.gpus);
    ASSERT_EQ(s.evaluated, 1) << what;
    ASSERT_TRUE(s.smallest) << what;
    EXPECT_EQ(s.smallest->worst.decisive_total(), needed) << what;
    EXPECT_EQ(s.smallest->worst.stage, b.worst) << what;
    EXPECT_EQ(s.smallest->worst.total, b.worst_stage().total) << what;
    EXPECT_EQ(s.fitting.size(), capacity == needed ? 1u : 0u) << what << " at capacity " << capacity;
    // The full breakdowns, built after the ranking from the stage the search found the worst: plan's.
    problem at = d.p;
    at.device.capacity = capacity;
    const stage_breakdown want = estimate(at, d.l).worst_stage();
    expect_same_stage(s.smallest->worst, want, what);
    if (!s.fitting.empty()) expect_same_stage(s.fitting.front().worst, want, what);
    // evaluate_worst (one layout's breakdown from the stages that can be the worst, their pieces found once):
    // plan's too.
    const ledger_shape shape = shape_of(at, d.l);
    expect_same_stage(evaluate_worst(at, count_params(at.model),
                                     sum_ledger(layer_ledger(at.model, shape), at.training.recompute_modules),
                                     sum_peaks(at.model, shape), d.l),
                      want, what + " evaluate_worst");
    std::int64_t evaluated = 0;
    EXPECT_EQ(search.any_fits(d.l.gpus, evaluated), capacity == needed) << what;
  }
}

TEST(SearchAgrees, RandomMoeLayoutsFitAsPlanSays) {
  std::mt19937 g(20261201);
  for (const std::string name : {"mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3"}) {
    int valid = 0, interleaved = 0, hsdp = 0;
    for (int tries = 0; tries < 8000 && valid < 150; ++tries) {
      const drawn d = draw(name, g);
      problem q = d.p;
      q.device.capacity = 1LL << 50;  // the capacity is set by expect_agrees; here only validity
      if (layout_error(q, d.l) || schedule_error(q, d.l)) continue;
      ++valid;
      interleaved += d.l.vpp > 1;
      hsdp += d.l.dp_replicate > 1;
      expect_agrees(d, name + " " + axes_string(d.l) + " ep=" + std::to_string(d.l.ep) +
                           " etp=" + std::to_string(d.l.etp) + " zero=" + std::to_string(d.l.zero) + " " +
                           to_string(d.l.recompute) + " replicas=" + std::to_string(d.l.dp_replicate));
    }
    EXPECT_GE(valid, 100) << name;
    EXPECT_GT(interleaved + hsdp, 0) << name;
  }
}

// A search with every axis free (ep, expert tp, micro-batch, pp, vpp, ZeRO, recompute) against estimate() on
// each fitting layout and the smallest: the same figures.
TEST(SearchAgrees, FreeMoeSearchReportsPlansFigures) {
  problem p = test::preset_problem("mixtral-8x7b");
  p.device.capacity = 80 * gib;
  p.training.seq = 4096;
  p.training.global_batch = 256;
  p.device.reserve.fragmentation = 0.05;
  const layout_search search(p, {}, {});
  const suggestion s = search.suggest(32);
  ASSERT_GT(s.evaluated, 1000);
  ASSERT_FALSE(s.fitting.empty());
  // Each fitting layout's breakdown is plan's worst stage, and the ranking, made before any breakdown was
  // built, is the order of plan's figures: not tight first, then cost, dp bytes, headroom, micro-batch.
  auto key = [&](const candidate& c, const stage_breakdown& b) {
    return std::make_tuple(b.tight(), c.cost.total, c.cost.dp_bytes, -b.headroom, c.micro_batch);
  };
  for (std::size_t i = 0; i < s.fitting.size(); ++i) {
    const candidate& c = s.fitting[i];
    problem q = p;
    q.training.micro_batch = c.micro_batch;
    const breakdown b = estimate(q, c.where);
    const std::string what = axes_string(c.where) + " ep=" + std::to_string(c.where.ep);
    expect_same_stage(c.worst, b.worst_stage(), what);
    EXPECT_EQ(c.tight, b.worst_stage().tight()) << what;
    if (i > 0) {
      const candidate& prev = s.fitting[i - 1];
      problem r = p;
      r.training.micro_batch = prev.micro_batch;
      EXPECT_LE(key(prev, estimate(r, prev.where).worst_stage()), key(c, b.worst_stage())) << what;
    }
  }
  ASSERT_TRUE(s.smallest);
  problem q = p;
  q.training.micro_batch = s.smallest->micro_batch;
  expect_same_stage(s.smallest->worst, estimate(q, s.smallest->where).worst_stage(), "smallest");
}

// The --suggest text table's path: suggest_across ranks every fitting layout (each recipe, with and without
// offload) and builds the breakdowns of the rows a selection names alone. Its ranking is the one every
// breakdown is built for, row for row, and each row it built is plan's worst stage.
TEST(SearchAgrees, SelectedRowsOfEveryRecipeAreRankedAndBuiltAsPlanSays) {
  problem p = test::preset_problem("mixtral-8x7b");
  p.device.capacity = 80 * gib;
  p.training.seq = 4096;
  p.training.global_batch = 256;
  search_axes axes;
  axes.zero = 1;
  const std::vector<recipe> recipes{load_recipe("bf16-adam8bit")};
  const suggestion all = suggest_across(p, axes, {}, 32, recipes, true);
  ASSERT_GT(all.fitting.size(), 100u);
  ASSERT_TRUE(all.ranked.empty());
  // Every 37th row, and the last: rows deep in the merged ranking.
  auto every_37th = [](const suggestion& s) {
    std::vector<std::size_t> rows;
    for (std::size_t i = 5; i < s.ranked.size(); i += 37) rows.push_back(i);
    rows.push_back(s.ranked.size() - 1);
    return rows;
  };
  const suggestion sel = suggest_across(p, axes, {}, 32, recipes, true, every_37th);
  EXPECT_EQ(sel.fit, all.fit);
  EXPECT_EQ(sel.evaluated, all.evaluated);
  ASSERT_EQ(sel.ranked.size(), all.fitting.size());
  std::size_t built = 0;
  for (std::size_t i = 0; i < sel.ranked.size(); ++i) {
    const ranked_fit& r = sel.ranked[i];
    const candidate& c = all.fitting[i];
    const std::string what = "row " + std::to_string(i) + " " + axes_string(c.where);
    EXPECT_EQ(axes_string(r.where) + " zero " + std::to_string(r.where.zero) + " " + to_string(r.where.recompute) +
                  (r.where.offload_optimizer ? " offload" : ""),
              axes_string(c.where) + " zero " + std::to_string(c.where.zero) + " " + to_string(c.where.recompute) +
                  (c.where.offload_optimizer ? " offload" : ""))
        << what;
    EXPECT_EQ(r.micro_batch, c.micro_batch) << what;
    EXPECT_EQ(r.recipe, c.recipe) << what;
    EXPECT_EQ(r.cost.total, c.cost.total) << what;
    EXPECT_EQ(r.cost.dp_bytes, c.cost.dp_bytes) << what;
    EXPECT_EQ(r.headroom, c.worst.headroom) << what;
    EXPECT_EQ(r.tight, c.tight) << what;
    const bool wanted = i == 0 || i == sel.ranked.size() - 1 || (i >= 5 && (i - 5) % 37 == 0);
    ASSERT_EQ(r.built >= 0, wanted) << what;
    if (!wanted) continue;
    ASSERT_EQ(r.built, static_cast<std::int64_t>(built)) << what;  // built in the ranking's order
    const candidate& b = sel.fitting[built++];
    EXPECT_EQ(b.recipe, c.recipe) << what;
    problem q = p;
    q.precision = c.recipe == 0 ? p.precision : recipes[0];
    q.training.micro_batch = b.micro_batch;
    expect_same_stage(b.worst, estimate(q, b.where).worst_stage(), what);
    expect_same_stage(b.worst, c.worst, what);
  }
  EXPECT_EQ(built, sel.fitting.size());
  EXPECT_GT(std::count_if(sel.fitting.begin(), sel.fitting.end(), [](const candidate& c) { return c.recipe == 1; }),
            0);
}

}  // namespace
}  // namespace headroom
