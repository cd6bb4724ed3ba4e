// suggest.cpp: layout enumeration, ranking, minimum-GPU search and the state bound (see suggest.hpp).
#include "suggest.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "errors.hpp"
#include "problem_json.hpp"
#include "schedule.hpp"

namespace headroom {

state_bound bound_for(const problem& p, int gpus, bool offload_optimizer, bool offload_params) {
  state_bound b;
  b.gpus = gpus;
  for (const auto& buf : p.precision.buffers)
    if (!offloaded(buf, offload_optimizer, offload_params)) b.shardable_per_param += buf.bytes;
  b.state_total = detail::checked_mul(b.shardable_per_param, count_params(p.model).total, "state");
  b.per_gpu = b.state_total / gpus;
  b.usable = p.device.capacity - p.device.reserve.fixed;  // the other reserve terms are >= 0
  b.impossible = b.per_gpu > b.usable;
  return b;
}

layout_search::layout_search(const problem& p, const search_axes& axes, const cost_model& costs)
    : m_problem(p), m_axes(axes), m_costs(costs) {
  validate(p.model);
  validate(p.training, p.device);
  layout& settings = m_settings;  // the settings the search does not vary, with the ZeRO stage if fixed
  settings.zero = axes.zero.value_or(lowest_searched_zero(p, axes));
  settings.offload_optimizer = axes.offload_optimizer;
  settings.offload_params = axes.offload_params;
  settings.dp_replicate = axes.dp_replicate;
  settings.zero3_inflight_units = axes.zero3_inflight_units;
  settings.zero3_live_params = axes.zero3_live_params;
  settings.reshard_after_forward = axes.reshard_after_forward;
  settings.reduce_bucket = axes.reduce_bucket;
  settings.prefetch_bucket = axes.prefetch_bucket;
  if (auto e = sharding_error(settings)) throw *e;
  if (axes.zero && (*axes.zero > p.precision.highest_zero() || *axes.zero < p.precision.lowest_zero()))
    throw recipe_zero_error(p.precision, *axes.zero);
  if (auto e = sequence_error(p.model, p.training)) throw *e;
  m_params = count_params(p.model);
  check_state_fits_in_int64(p, m_params);
  m_space = search_space(p, axes);
  m_ledger = axis_combos(m_space, axis_level::ledger);
  m_pipeline = axis_combos(m_space, axis_level::pipeline);
  m_state = axis_combos(m_space, axis_level::state);
  m_activation = axis_combos(m_space, axis_level::activation);
  // One problem per micro-batch the ledger combinations set, in their order: the ledger and every
  // figure derive from it.
  for (std::size_t c = 0; c < m_ledger.size(); ++c) {
    search_point x;
    m_ledger.apply(c, x);
    if (std::any_of(m_problems.begin(), m_problems.end(),
                    [&](const problem& q) { return q.training.micro_batch == x.micro_batch; }))
      continue;
    m_problems.push_back(p);
    m_problems.back().training.micro_batch = x.micro_batch;
    validate(m_problems.back().training, p.device);
  }
  // Candidate values; layout_error() decides which are valid, so the search and `plan` agree by
  // construction. When nothing is valid, the error reported is the one `plan` gives for the same flags.
  std::optional<bad_input> first_error;
  precompute_ledger(first_error);
  precompute_pipeline(first_error);
  if (m_variants.empty() || m_pipelines.empty()) {
    if (first_error) throw *first_error;
    throw bad_input(m_variants.empty() ? "tp" : "pp", "no valid value for this model among the fixed axes");
  }
}

namespace {
// Returns the fewest GPUs on which the axes set in `l` form a grid: tp * pp * cp * ep * expert tp * replicas
// (so that ep * expert tp divides dp * tp * cp and the replicas divide dp), at most max_gpus. The
// precomputation checks each level's values on it; a variant's own ranks stay tp * cp.
int smallest_grid(const layout& l) {
  return static_cast<int>(std::min<std::int64_t>(
      max_gpus, static_cast<std::int64_t>(l.tp) * l.pp * l.cp * l.ep * l.expert_tp() * l.dp_replicate));
}
}  // namespace

void layout_search::precompute_ledger(std::optional<bad_input>& first_error) {
  // Checked with pp = 1 and no split: the pipeline is checked with its own axes.
  problem unsplit = m_problem;
  unsplit.training.split = {};
  const auto& m = m_problem.model;
  for (std::size_t c = 0; c < m_ledger.size(); ++c) {
    search_point x;
    x.where = m_settings;  // a ZeRO stage the recipe runs with: the grid's ranks below make dp > 1
    m_ledger.apply(c, x);
    if (!m_ledger.applies(c, x.where)) continue;  // sp means nothing without tp: tp = 1 is searched once
    x.where.gpus = smallest_grid(x.where);
    auto e = layout_error(unsplit, x.where);
    if (e && !first_error && m_ledger.as_plan_builds(c, x.where)) first_error = e;
    if (e) continue;
    std::size_t i = 0;
    while (i + 1 < m_problems.size() && m_problems[i].training.micro_batch != x.micro_batch) ++i;
    ledger_shape shape = shape_of(m_problems[i], x.where);
    // torchtitan's per-op policy keeps op outputs no other mode lists: the ledger lists them when the
    // search is held to that mode (the search tries it only when --recompute names it).
    shape.op_policy = m_axes.recompute == recompute_mode::selective_op;
    auto sums = sum_ledger(layer_ledger(m, shape), m_problems[i].training.recompute_modules);
    detail::checked_mul(sums.none, m.layers * 4, "activations");
    const peak_sums peaks = sum_peaks(m, shape);
    detail::checked_mul(peaks.moe_layer.none, m.layers * 4, "activations");
    // The variant's own ranks: tp * cp. Its gpus above included ep * expert tp so that the expert grid
    // divides; the loop asks expert_grid_fits() of every layout.
    m_variants.push_back({c, i, x.where.tp * x.where.cp, m_ledger.monotone_first(c), sums, peaks});
  }
}

void layout_search::precompute_pipeline(std::optional<bad_input>& first_error) {
  // Every (pp, vpp) whose split is valid: layers need not divide (the balanced split of schedule.hpp), so
  // Llama 3 405B's 126 layers are searched at pp = 16 too.
  for (std::size_t c = 0; c < m_pipeline.size(); ++c) {
    search_point x;
    x.where = m_settings;
    m_pipeline.apply(c, x);
    if (!m_pipeline.applies(c, x.where)) continue;  // interleaving needs a pipeline
    x.where.gpus = smallest_grid(x.where);
    auto e = layout_error(m_problem, x.where);
    if (e && !first_error && m_pipeline.as_plan_builds(c, x.where)) first_error = e;
    if (e) continue;
    // The stages to evaluate: which can be the worst depends on pp, vpp and the split alone.
    const std::size_t first = m_places.size();
    for_each_worst_candidate(m_problem, m_params, x.where, [&](const stage_place& s) { m_places.push_back(s); });
    // Its own ranks are pp: the replicas it was checked with may come from cp (dp * cp divisible by them).
    m_pipelines.push_back({c, x.where.pp, first, m_places.size() - first});
  }
}

std::int64_t layout_search::per_rank_floor() const {
  std::int64_t best = INT64_MAX;
  for (const auto& v : m_variants) {
    if (!v.monotone_first) continue;
    const problem& p = m_problems[v.problem];
    for (std::size_t r = 0; r < m_activation.size(); ++r) {
      search_point x;
      m_activation.apply(r, x);
      const auto mode = x.where.recompute;
      // The cheapest layer kind the model has: a lower bound whatever the stage holds.
      const std::int64_t a = m_params.moe_before.empty() || m_params.moe_before.back() == p.model.layers
                                 ? (m_params.moe_before.empty() ? v.sums.of(mode) : v.peaks.moe_layer.of(mode))
                                 : std::min(v.sums.of(mode), v.peaks.moe_layer.of(mode));
      const std::int64_t seed = a + p.device.reserve.fixed;
      const std::int64_t ws = m_params.moe_before.empty() ? v.peaks.working_set_of(mode)
                                                          : std::min(v.peaks.working_set_of(mode),
                                                                     v.peaks.moe_working_set[static_cast<std::size_t>(mode)]);
      const std::int64_t peak = a + ws + p.device.allocator_workspaces + p.device.fixed_overheads;
      best = std::min(best, std::max(seed, peak));
    }
  }
  return best;
}

const problem& layout_search::problem_of(const candidate& c) const {
  for (const auto& q : m_problems)
    if (q.training.micro_batch == c.micro_batch) return q;
  return m_problem;
}

// The decisive total of a layout's worst stage, computed from the stage pieces of estimate.hpp and the
// verdict of stage_terms.hpp without a stage_breakdown: the search's inner loop. evaluate_worst() gives
// the same figure from the same pieces and the same stages (suggest_test, search_agrees_test check).
struct layout_search::fast_total {
  std::int64_t decisive = 0;
  bool fits = false;
  const stage_place* worst = nullptr;  // the first stage with that total (evaluate_worst's choice)
  const layout_shares* shares = nullptr;  // what its stages share, for evaluate_stage
};

// What one (variant, pipeline) keeps for its inner levels, per stage to evaluate (pipeline::places): found
// once per search call, reused for every pair.
struct layout_search::scratch {
  std::vector<rank_params> on_rank;
  std::vector<std::int64_t> persistent, transient;
  std::vector<std::int64_t> activations;  // [activation combination][stage]
  std::vector<unsigned char> found;       // per activation combination: its activations are found
};

std::int64_t layout_search::layouts_at_most(int gpus) const {
  // The variants and the pipelines whose ranks divide N, each counted once (not their pairs: this bound is
  // asked before every ranking and must cost nothing beside it).
  auto divides = [&](std::int64_t ranks) { return ranks <= gpus && gpus % ranks == 0; };
  std::int64_t variants = 0, pipelines = 0;
  for (const auto& v : m_variants) variants += divides(v.ranks) ? 1 : 0;
  for (const auto& q : m_pipelines) pipelines += divides(q.ranks) ? 1 : 0;
  return saturating_mul(saturating_mul(variants, pipelines),
                        static_cast<std::int64_t>(m_state.size() * m_activation.size()));
}

// Runs `visit(layout, variant, fast_total)` over every valid layout on `gpus`, level by level (ledger,
// pipeline, state, activation: search_space.hpp), until it returns false.
template <class Visit>
void layout_search::for_each_layout(int gpus, bool monotone_first_only, Visit&& visit) const {
  search_point x;
  layout& l = x.where;
  l = m_settings;  // the axes' levels below set the rest
  l.gpus = gpus;
  // The pipelines whose ranks divide N, found once per N rather than once per variant.
  std::vector<pipeline> pipes;
  std::size_t most_places = 0;
  for (const auto& q : m_pipelines)
    if (q.ranks <= gpus && gpus % q.ranks == 0) pipes.push_back(q), most_places = std::max(most_places, q.places);
  scratch w;
  w.on_rank.resize(most_places);
  w.persistent.resize(most_places);
  w.transient.resize(most_places);
  w.activations.resize(most_places * m_activation.size());
  w.found.resize(m_activation.size());
  for (const auto& v : m_variants) {
    if ((monotone_first_only && !v.monotone_first) || v.ranks > gpus || gpus % v.ranks) continue;
    const problem& p = m_problems[v.problem];
    m_ledger.apply(v.combo, x);
    for (const pipeline& q : pipes) {
      const std::int64_t tpc = v.ranks * q.ranks;  // tp * pp * cp, before anything is set
      if (tpc > gpus || gpus % tpc) continue;
      m_pipeline.apply(q.combo, x);
      if (!m_ledger.rules_hold(p, l) || !m_pipeline.rules_hold(p, l) || !expert_grid_fits(l)) continue;
      if (!batch_splits(p, l) || !schedule_runs(l, microbatches_per_step(p, l))) continue;  // schedule_error()
      if (!visit_states(x, v, q, w, visit)) return;
    }
  }
}

// The state and activation levels of one (variant, pipeline) whose layout `x` is valid: each stage's
// parameters once, its state once per ZeRO stage, its activations once per recompute mode. Returns false
// when `visit` stopped the search.
template <class Visit>
bool layout_search::visit_states(search_point& x, const variant& v, const pipeline& q, scratch& w,
                                 Visit& visit) const {
  layout& l = x.where;
  const problem& p = m_problems[v.problem];
  const device_spec& device = p.device;
  const stage_place* places = m_places.data() + q.first_place;
  const std::size_t n = q.places;
  layout_shares sh = shares_of(p, m_params, l);  // its unsharded gradients are the ZeRO stage's, below
  for (std::size_t i = 0; i < n; ++i)
    w.on_rank[i] = stage_params_on_rank(p, m_params, l, places[i].stage, places[i].layers, places[i].moe_layers);
  std::fill(w.found.begin(), w.found.end(), 0);
  const std::uint64_t state_axes = m_state.applying(l);
  for (std::size_t z = 0; z < m_state.size(); ++z) {
    if (!m_state.applies(z, state_axes)) continue;
    m_state.apply(z, x);
    if (!m_state.rules_hold(p, l)) continue;
    sh.unsharded_grad = unsharded_layer_grad_bytes(p, m_params, l, sh.shard_degree);
    for (std::size_t i = 0; i < n; ++i) {
      w.persistent[i] = persistent_bytes(p, l, w.on_rank[i], sh);
      w.transient[i] = stage_transient(p, m_params, l, places[i].largest_chunk, w.on_rank[i], sh);
    }
    const std::uint64_t activation_axes = m_activation.applying(l);
    for (std::size_t r = 0; r < m_activation.size(); ++r) {
      if (!m_activation.applies(r, activation_axes)) continue;
      m_activation.apply(r, x);
      if (!m_activation.rules_hold(p, l)) continue;
      // No state-level axis changes a stage's activations (search_space.hpp): found once per mode.
      std::int64_t* activations = w.activations.data() + r * n;
      if (!w.found[r]) {
        for (std::size_t i = 0; i < n; ++i)
          activations[i] = stage_activations(p, m_params, v.sums, v.peaks, l, places[i], sh).activations;
        w.found[r] = 1;
      }
      fast_total t;
      std::size_t worst = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const stage_terms terms{w.persistent[i], w.transient[i], activations[i],
                                stage_working_set(v.peaks, l, places[i], sh.unsharded_grad),
                                places[i].last ? v.peaks.output_phase : 0, device.allocator_workspaces};
        const std::int64_t d = terms.decisive_total(device, sh.tokens);
        if (i == 0 || d > t.decisive) t.decisive = d, worst = i;
      }
      t.fits = fits_in(t.decisive, device.capacity);
      t.worst = places + worst;
      t.shares = &sh;
      if (!visit(l, v, t)) return false;
    }
  }
  return true;
}

// A fitting layout as the ranking sees it: the figures the order needs, and where its breakdown comes from
// (the stage the search found the worst, and what the layout's stages share). The full breakdowns are made
// once the order is known, for the rows wanted alone, with evaluate_stage: the function estimate() builds
// `plan`'s stages with.
// What the stages share is not kept: shares_of gives it again from the layout (the search's own, with the
// ZeRO stage's unsharded gradients, is the same), and a record is a third smaller without it.
struct layout_search::fit_record {
  layout where;
  const variant* v = nullptr;
  const stage_place* place = nullptr;
  layout_cost cost;
  std::int64_t decisive = INT64_MAX;
  std::int64_t micro_batch = 0;
  std::int64_t seen = 0;  // its place in the enumeration: equal figures keep that order
  bool tight = false;
};

namespace {
// What the ranking orders a fitting layout by, and its record's index.
struct rank_key {
  bool tight;
  double cost, dp_bytes;
  std::int64_t decisive, micro_batch, seen;
  std::uint32_t index;
};
// The order: not tight first, then by cost, dp bytes, headroom (the capacity less the decisive total: one
// capacity for every layout here), the smaller micro-batch, and the enumeration's order (strict: `seen`
// differs between layouts).
bool ranks_before(const rank_key& a, const rank_key& b) {
  if (a.tight != b.tight) return !a.tight;
  if (a.cost != b.cost) return a.cost < b.cost;
  if (a.dp_bytes != b.dp_bytes) return a.dp_bytes < b.dp_bytes;
  if (a.decisive != b.decisive) return a.decisive < b.decisive;
  if (a.micro_batch != b.micro_batch) return a.micro_batch < b.micro_batch;
  return a.seen < b.seen;
}
// Returns the ranking key of fitting record `f`, with `index` (a template: the record is layout_search's
// own).
template <class Record>
rank_key key_of(const Record& f, std::uint32_t index) {
  return {f.tight, f.cost.total, f.cost.dp_bytes, f.decisive, f.micro_batch, f.seen, index};
}
}  // namespace

layout_search::ranking layout_search::rank(int gpus, std::size_t top, suggestion& s) const {
  if (gpus <= 0) throw bad_input("gpus", "must be positive, got " + std::to_string(gpus));
  s.gpus = gpus;
  s.bound = bound_for(m_problem, gpus, m_axes.offload_optimizer, m_axes.offload_params);
  s.space = m_space;
  s.micro_batch_searched = micro_batch_searched();
  s.vpp_searched = !m_axes.vpp;
  auto before = [](const fit_record& a, const fit_record& b) {
    return ranks_before(key_of(a, 0), key_of(b, 0));
  };
  const std::int64_t capacity = m_problem.device.capacity;
  std::vector<fit_record> fits;  // every fitting layout, or at most 2 x top of them: the best, by `before`
  // Once `top` are kept, the last of them: a layout not before it cannot be among the first `top` (the order
  // is strict: `seen` differs), so it is counted and dropped without a record.
  std::optional<fit_record> cutoff;
  auto keep_best = [&] {
    if (top == 0) return fits.clear();
    std::nth_element(fits.begin(), fits.begin() + static_cast<std::ptrdiff_t>(top - 1), fits.end(), before);
    fits.resize(top);
    cutoff = fits[top - 1];
  };
  // Every fitting layout kept: room for as many as the levels could give, up to 65,536 records (about 13 MB),
  // so that the list grows without moving them (only the pages written are touched).
  if (top == SIZE_MAX)
    fits.reserve(static_cast<std::size_t>(std::min<std::int64_t>(layouts_at_most(gpus), 1 << 16)));
  fit_record smallest;  // the smallest total seen, fitting or not
  fit_record next;      // the layout being ranked: its order's figures first, the rest once it is kept
  for_each_layout(gpus, false, [&](const layout& l, const variant& v, const fast_total& t) {
    if (t.decisive < smallest.decisive) smallest = {l, &v, t.worst, {}, t.decisive, 0, 0, false};
    if (t.fits) {
      ++s.fit;
      const problem& p = m_problems[v.problem];
      next.cost = cost_of(p, m_params, l, m_costs);
      next.decisive = t.decisive;
      next.micro_batch = p.training.micro_batch;
      next.seen = s.evaluated;
      next.tight = is_tight(capacity - t.decisive, capacity);
      if (top > 0 && (!cutoff || before(next, *cutoff))) {
        next.where = l, next.v = &v, next.place = t.worst;
        fits.push_back(next);
        if (fits.size() / 2 >= top && fits.size() >= 64) keep_best();  // every `top` (or 64) more
      }
    }
    ++s.evaluated;
    return true;
  });
  if (smallest.v) s.smallest = candidate_of(smallest);
  if (fits.size() > top) keep_best();
  // Sorted as keys beside their index: records are large, and sorting them through an index reads them out
  // of order.
  std::vector<rank_key> keys(fits.size());
  for (std::size_t i = 0; i < fits.size(); ++i) keys[i] = key_of(fits[i], static_cast<std::uint32_t>(i));
  std::sort(keys.begin(), keys.end(),
            [](const rank_key& a, const rank_key& b) { return ranks_before(a, b); });
  ranking r;
  r.order.resize(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) r.order[i] = keys[i].index;
  r.records = std::move(fits);
  return r;
}

candidate layout_search::candidate_of(const fit_record& r) const {
  const problem& p = m_problems[r.v->problem];
  candidate c{
      r.where, p.training.micro_batch,
      evaluate_stage(p, m_params, r.v->sums, r.v->peaks, r.where, *r.place, shares_of(p, m_params, r.where)),
      r.cost, false};
  c.tight = c.worst.tight();
  return c;
}

suggestion layout_search::suggest(int gpus, std::size_t top) const {
  suggestion s;
  const ranking r = rank(gpus, top, s);
  s.fitting.reserve(r.order.size());
  for (const std::uint32_t i : r.order) s.fitting.push_back(candidate_of(r.records[i]));
  return s;
}

bool layout_search::any_fits(int gpus, std::int64_t& evaluated) const {
  // Memory never falls as the micro-batch grows (activations min(pp - k, G / (b dp)) * b, the working set
  // and the output phase are non-decreasing in b), so a layout fits at some micro-batch only if it fits
  // at the smallest: only that one is tried. suggest_test checks it against the full enumeration.
  bool found = false;
  for_each_layout(gpus, true, [&](const layout&, const variant&, const fast_total& t) {
    ++evaluated;
    found = t.fits;
    return !found;
  });
  return found;
}

suggestion suggest_across(const problem& p, const search_axes& axes, const cost_model& costs, int gpus,
                          const std::vector<recipe>& recipes, bool allow_offload,
                          const std::function<std::vector<std::size_t>(const suggestion&)>& select) {
  std::vector<recipe> searched{p.precision};
  for (const auto& r : recipes) {
    if (r.name.empty()) throw bad_input("recipes", "a recipe without a name cannot be told apart in the ranking");
    const auto same = std::find_if(searched.begin(), searched.end(), [&](const recipe& s) { return s.name == r.name; });
    if (same == searched.end())
      searched.push_back(r);
    else if (recipe_to_json(*same) != recipe_to_json(r))  // one name, two recipes: never drop one silently
      throw bad_input("recipes", "two different recipes are named '" + r.name + "': rename one");
  }
  std::vector<bool> offloads{axes.offload_optimizer};
  if (allow_offload && !axes.offload_optimizer) offloads.push_back(true);
  // Every search is ranked first (records, no breakdown); the breakdowns are built once the rows are known,
  // while the searches their records point into are alive.
  struct one_search {
    layout_search search;
    layout_search::ranking ranking;
    int recipe = 0;
  };
  std::vector<one_search> runs;
  runs.reserve(searched.size() * offloads.size());
  suggestion all;
  for (std::size_t i = 0; i < searched.size(); ++i) {
    for (const bool offload : offloads) {
      problem q = p;
      q.precision = searched[i];
      search_axes a = axes;
      a.offload_optimizer = offload;
      // A recipe runs only at its framework's ZeRO stages: a fixed stage outside them skips the recipe.
      if (a.zero && (*a.zero < q.precision.lowest_zero() || *a.zero > q.precision.highest_zero())) continue;
      runs.push_back({layout_search(q, a, costs), {}, static_cast<int>(i)});
      suggestion s;
      runs.back().ranking = runs.back().search.rank(gpus, SIZE_MAX, s);
      if (runs.size() == 1) {
        all = std::move(s);
        continue;
      }
      all.evaluated += s.evaluated;
      all.fit += s.fit;
      if (s.smallest && (!all.smallest || s.smallest->worst.total < all.smallest->worst.total)) {
        all.smallest = std::move(s.smallest);
        all.smallest->recipe = static_cast<int>(i);
      }
    }
  }
  if (searched.size() > 1) all.recipes = searched;
  all.offload_searched = offloads.size() > 1;
  // The rows: each search's ranking in turn, then (more than one search) one order over them.
  struct row {
    const one_search* run;
    const layout_search::fit_record* record;
  };
  std::vector<row> rows;
  for (const auto& run : runs)
    for (const std::uint32_t i : run.ranking.order) rows.push_back({&run, &run.ranking.records[i]});
  const std::int64_t capacity = p.device.capacity;
  if (runs.size() > 1)  // one search's ranking is already this order (one offload throughout)
    std::stable_sort(rows.begin(), rows.end(), [&](const row& x, const row& y) {
      const auto &a = *x.record, &b = *y.record;
      if (a.tight != b.tight) return !a.tight;
      if (a.where.offload_optimizer != b.where.offload_optimizer) return !a.where.offload_optimizer;
      if (a.cost.total != b.cost.total) return a.cost.total < b.cost.total;
      if (a.cost.dp_bytes != b.cost.dp_bytes) return a.cost.dp_bytes < b.cost.dp_bytes;
      if (a.decisive != b.decisive) return a.decisive < b.decisive;  // the larger headroom first
      return a.micro_batch < b.micro_batch;
    });
  std::vector<std::size_t> wanted;
  if (select) {
    all.ranked.reserve(rows.size());
    for (const row& r : rows)
      all.ranked.push_back({r.record->where, r.record->micro_batch, r.record->cost, capacity - r.record->decisive,
                            r.record->tight, r.run->recipe, -1});
    wanted = select(all);
    if (!rows.empty()) wanted.push_back(0);  // the first row: --explain and the launch's edit name it
    std::sort(wanted.begin(), wanted.end());
    wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  } else {
    wanted.resize(rows.size());
    for (std::size_t i = 0; i < wanted.size(); ++i) wanted[i] = i;
  }
  all.fitting.reserve(wanted.size());
  for (const std::size_t i : wanted) {
    if (i >= rows.size()) throw std::out_of_range("suggest_across: a selected row beyond the ranking");
    all.fitting.push_back(rows[i].run->search.candidate_of(*rows[i].record));
    all.fitting.back().recipe = rows[i].run->recipe;
    if (select) all.ranked[i].built = static_cast<std::int64_t>(all.fitting.size() - 1);
  }
  return all;
}

min_gpus_result min_gpus(const layout_search& search, int max_gpus) {
  const problem& p = search.the_problem();
  min_gpus_result r;
  const state_bound b = bound_for(p, 1, search.axes().offload_optimizer, search.axes().offload_params);
  r.bound = b;
  const double state = static_cast<double>(b.state_total);
  // The reference case's (e): room for the cheapest activations at tp = 1, full recomputation: 2*s*b*h*L.
  r.full_recompute_activations = saturating_mul(
      saturating_mul(saturating_mul(2 * p.training.seq, p.training.micro_batch), p.model.hidden),
      p.model.layers);
  r.activation_room_bound = state / static_cast<double>(b.usable - r.full_recompute_activations);
  r.strict_bound = state / static_cast<double>(b.usable);
  // The bound as a count, range-checked before the cast: past max_gpus (or not finite) no N is searched.
  const double first = std::ceil(r.strict_bound - 1e-9);
  r.first_candidate =
      std::isfinite(first) && first <= max_gpus ? std::max(1, static_cast<int>(first)) : max_gpus + 1;
  if (b.usable <= 0) r.first_candidate = max_gpus + 1;
  r.per_rank_floor = search.per_rank_floor();
  if (r.per_rank_floor > p.device.capacity) {
    r.floor_proves_none = true;
    return r;
  }
  for (int n = r.first_candidate; n <= max_gpus; ++n) {
    if (search.any_fits(n, r.evaluated)) {
      r.n_min = n;
      break;
    }
  }
  if (!r.n_min) return r;
  r.at_min = search.suggest(*r.n_min);
  r.evaluated += r.at_min->evaluated;
  const int node = search.the_problem().device.gpus_per_node;
  for (int n = whole_node_count(*r.n_min, node); n <= max_gpus; n = whole_node_count(n + 1, node)) {
    if (search.any_fits(n, r.evaluated)) {
      r.n_nodes = n;
      r.at_nodes = search.suggest(n);
      r.evaluated += r.at_nodes->evaluated;
      break;
    }
  }
  return r;
}

}  // namespace headroom
