// suggest.hpp: searching layouts. --suggest enumerates every valid layout for N GPUs and ranks those that
// fit; --min-gpus finds the smallest N (and whole-node count) with a fitting layout; the state bound proves
// when no layout can exist. The search space is data (search_space.hpp): a list of axes (tp, cp, sp,
// micro-batch, pp, vpp, ZeRO stage, recompute), each with the values it takes, whether the user fixed it,
// what it sets and at which level it acts; the constraints between them are layout_error() and
// schedule_error() (layout.hpp), and the axes' own searched rules.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "cost_model.hpp"
#include "estimate.hpp"
#include "layout.hpp"
#include "search_space.hpp"

namespace headroom {

struct candidate {
  layout where;
  std::int64_t micro_batch = 1;  // sequences per micro-batch of this layout (the global batch is fixed)
  stage_breakdown worst;         // the stage that decides "fits"
  layout_cost cost;
  bool tight = false;  // headroom under 5% of capacity: too tight to trust (is_tight)
  int recipe = 0;      // which of suggestion::recipes it runs (suggest_across); 0 for a one-recipe search
};

// The reference case's impossibility bound (d): state >= bytes_per_param * Ψ / N on every rank, and at most
// capacity - reserve is usable.
struct state_bound {
  int gpus = 0;
  std::int64_t shardable_per_param = 0;  // bytes per parameter that stay on the GPU (16 by default)
  std::int64_t state_total = 0;          // shardable_per_param * Ψ
  std::int64_t per_gpu = 0;              // state_total / N: the least state any rank can hold
  std::int64_t usable = 0;               // capacity - reserve
  bool impossible = false;               // per_gpu > usable
};

// A fitting layout as the ranking sees it: what its place in the order (and a table's choice of rows) derives
// from, without its breakdown.
struct ranked_fit {
  layout where;
  std::int64_t micro_batch = 1;
  layout_cost cost;
  std::int64_t headroom = 0;  // bytes: the capacity less the worst stage's decisive total
  bool tight = false;         // is_tight
  int recipe = 0;             // as candidate::recipe
  std::int64_t built = -1;    // its candidate's index in suggestion::fitting; -1 where none was built
};

struct suggestion {
  int gpus = 0;
  std::vector<candidate> fitting;     // ranked: not tight first, then by cost, dp bytes, headroom (the first
                                      // `top` of them where suggest() was given one; the rows a selection
                                      // chose where suggest_across was given one)
  std::vector<ranked_fit> ranked;     // every fitting layout, ranked, where suggest_across was given a
                                      // selection (else empty: `fitting` holds every one)
  std::int64_t fit = 0;               // layouts that fit: fitting.size() unless `top` held fewer
  std::optional<candidate> smallest;  // the smallest total seen, fitting or not
  std::int64_t evaluated = 0;         // layouts evaluated
  state_bound bound;
  std::vector<search_axis> space;     // the axes searched and their values
  bool micro_batch_searched = false;  // the micro-batch was an axis (its value is in each candidate)
  bool vpp_searched = false;
  // The recipes searched when more than one was (suggest_across; candidate::recipe indexes it), else empty:
  // every candidate runs the problem's recipe.
  std::vector<recipe> recipes;
  bool offload_searched = false;  // optimizer offload was searched beside no offload (suggest_across)
};

// Returns the bound for N GPUs.
state_bound bound_for(const problem& p, int gpus, bool offload_optimizer, bool offload_params = false);

// Precomputed per-(tp, sp, cp) ledger sums for one problem; evaluating a layout is then arithmetic only.
class layout_search {
 public:
  // Validates the problem and precomputes. Throws bad_input.
  layout_search(const problem& p, const search_axes& axes, const cost_model& costs);

  // Returns every fitting layout for `gpus`, ranked, each with its worst stage's full breakdown and its
  // cost, and how many were evaluated and fit; with `top`, the first `top` of the ranking alone (the same
  // first rows: the rest are ranked without a breakdown and dropped as they fall behind).
  suggestion suggest(int gpus, std::size_t top = SIZE_MAX) const;
  // Returns true when some layout fits on `gpus`; counts evaluations into `evaluated`.
  bool any_fits(int gpus, std::int64_t& evaluated) const;

  const param_counts& params() const { return m_params; }
  const problem& the_problem() const { return m_problem; }
  const search_axes& axes() const { return m_axes; }
  // Returns the axes searched, with their values: the search space as data (for --explain and JSON).
  // Every layout evaluated passes layout_error() and schedule_error() (a vpp > 1 needs pp > 1, each
  // stage's layers divisible by vpp and the micro-batches per step divisible by pp; the global batch
  // splits into micro-batches over dp: batch_splits()).
  const std::vector<search_axis>& space() const { return m_space; }
  // Returns whether the micro-batch is searched (not fixed by the user).
  bool micro_batch_searched() const { return !m_axes.micro_batch.has_value(); }
  // Returns a floor no layout at any N goes below, in bytes: one layer's activations (the fewest a stage
  // holds, at the smallest micro-batch and the most sharded tp / cp / sp) plus the fixed reserve, or plus
  // the backward working set and the fixed overheads. When it exceeds the capacity, no N can fit.
  std::int64_t per_rank_floor() const;
  // Returns the problem with the micro-batch of `c` (the one its figures are computed for).
  const problem& problem_of(const candidate& c) const;

 private:
  // One valid combination of the ledger-level axes, with its per-layer sums.
  struct variant {
    std::size_t combo;    // index into m_ledger
    std::size_t problem;  // index into m_problems: the problem with this micro-batch
    std::int64_t ranks;   // the tp * pp * cp it contributes (tp * cp): with a pipeline's, N's divisor
    bool monotone_first;  // every monotone axis (the micro-batch) at its first value
    activation_sums sums;
    peak_sums peaks;
  };
  // One valid combination of the pipeline-level axes.
  struct pipeline {
    std::size_t combo;   // index into m_pipeline
    std::int64_t ranks;  // the tp * pp * cp it contributes (pp): N must be a multiple
    std::size_t first_place, places;  // its stages that can be the worst: m_places[first_place, + places)
  };
  struct fast_total;
  struct scratch;
  struct fit_record;
  struct ranking {
    std::vector<fit_record> records;
    std::vector<std::uint32_t> order;  // indices into `records`, best first
  };
  // Enumerates the layouts on `gpus` and returns the fitting ones' records ranked (the first `top` of them),
  // with s's counts, bound, space and smallest layout filled.
  ranking rank(int gpus, std::size_t top, suggestion& s) const;
  // Returns an upper bound on the layouts for_each_layout visits on `gpus` (a count).
  std::int64_t layouts_at_most(int gpus) const;
  // Returns the candidate of record `r`, with its worst stage's full breakdown.
  candidate candidate_of(const fit_record& r) const;
  friend suggestion suggest_across(const problem& p, const search_axes& axes, const cost_model& costs, int gpus,
                                   const std::vector<recipe>& recipes, bool allow_offload,
                                   const std::function<std::vector<std::size_t>(const suggestion&)>& select);
  void precompute_ledger(std::optional<bad_input>& first_error);
  void precompute_pipeline(std::optional<bad_input>& first_error);
  template <class Visit>
  void for_each_layout(int gpus, bool monotone_first_only, Visit&& visit) const;
  template <class Visit>
  bool visit_states(search_point& x, const variant& v, const pipeline& q, scratch& w, Visit& visit) const;

  problem m_problem;
  search_axes m_axes;
  cost_model m_costs;
  layout m_settings;  // what the search does not vary (ZeRO if fixed, offloads, ZeRO-3 units, replicas)
  param_counts m_params;
  std::vector<search_axis> m_space;
  axis_combos m_ledger, m_pipeline, m_state, m_activation;  // the combinations of each level's axes
  std::vector<problem> m_problems;                          // one per micro-batch value, in the axis' order
  std::vector<variant> m_variants;
  std::vector<pipeline> m_pipelines;
  std::vector<stage_place> m_places;  // every pipeline's stages that can be the worst (pipeline::first_place)
};

struct min_gpus_result {
  state_bound bound;      // for N = 1: the state every N shares (offload leaves params + grads)
  double activation_room_bound = 0;  // reference case (e): Ψ-state / (usable - full-recompute activations at tp=1)
  std::int64_t full_recompute_activations = 0;  // 2*s*b*h*L bytes at tp=1, the reference case's 4.5 GiB
  double strict_bound = 0;                      // Ψ-state / usable: no activations at all
  int first_candidate = 0;                      // ceil(strict_bound): no smaller N can fit
  std::optional<int> n_min;                     // the smallest N with a fitting layout
  std::optional<int> n_nodes;  // the smallest whole-node count with a fitting layout (whole_node_count)
  std::optional<suggestion> at_min, at_nodes;
  std::int64_t evaluated = 0;
  std::int64_t per_rank_floor = 0;  // layout_search::per_rank_floor()
  bool floor_proves_none = false;   // the floor exceeds the capacity: no N was searched
};

// Returns the layouts that fit `gpus` GPUs under each of `recipes` (the problem's own first; empty: only the
// problem's), and with optimizer offload as well as without when `allow_offload`: one ranking, in which
// offloaded layouts come after every other layout that fits (the cost model does not price the host
// optimizer step) and otherwise as suggest() ranks. The bound and the search space are those of the
// problem's own recipe without offload. Every fitting layout gets its breakdown unless `select` is given: then
// suggestion::ranked lists every one (ranked_fit) and `select`, given the suggestion with `ranked` filled,
// returns the indices into it whose breakdowns to build (the first always is); `fitting` holds those alone, in
// the ranking's order. Throws bad_input.
suggestion suggest_across(const problem& p, const search_axes& axes, const cost_model& costs, int gpus,
                          const std::vector<recipe>& recipes, bool allow_offload,
                          const std::function<std::vector<std::size_t>(const suggestion&)>& select = {});

// Searches N = ceil(strict bound), ... up to max_gpus; stops at once when the per-rank floor proves no N
// can fit. Throws bad_input.
min_gpus_result min_gpus(const layout_search& search, int max_gpus);

}  // namespace headroom
