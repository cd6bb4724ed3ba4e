// suggest.cpp: layout enumeration, ranking, minimum-GPU search and the state bound (see suggest.hpp).
#include "suggest.hpp"

#include <algorithm>
#include <cmath>

#include "errors.hpp"
#include "schedule.hpp"

namespace headroom {

state_bound bound_for(const problem& p, int gpus, bool offload_optimizer) {
  state_bound b;
  b.gpus = gpus;
  for (const auto& buf : p.precision.buffers)
    if (!(offload_optimizer && (buf.kind == buffer_kind::master || buf.kind == buffer_kind::optimizer)))
      b.shardable_per_param += buf.bytes;
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
  m_params = count_params(p.model);
  check_state_fits_in_int64(p, m_params);
  const auto& m = p.model;
  const std::int64_t seq = p.training.seq;
  // Candidate axes; layout_error() decides which are valid, so the search and `plan` agree by construction.
  std::optional<bad_input> first_error;
  // Remembers the first error of a probe on an axis the user fixed: that is the one to report.
  // The tp / cp / sp probes have pp = 1: the pipeline split is checked with the pp axis, not with them.
  problem unsplit = p;
  unsplit.training.split = {};
  auto valid = [&](const problem& against, const layout& probe, bool fixed) {
    auto e = layout_error(against, probe);
    if (e && fixed && !first_error) first_error = e;
    return !e;
  };
  auto fixed_or = [](auto fixed, std::vector<std::int64_t> searched) {
    return fixed ? std::vector<std::int64_t>{static_cast<std::int64_t>(*fixed)} : searched;
  };
  // The axes and their values. tp: 1 .. GPUs per node (a fixed one is validated even beyond it, so its
  // own error is the one reported). cp: searched only where the sequence is long (>= 16k), in powers of
  // two that leave at least 4k tokens per rank. Micro-batch: powers of two up to 16 (the global batch
  // fixed). pp: every count the split allows, up to the layers (+2 for a counted embedding and loss).
  // vpp: 1 .. 8. ZeRO 0-3 and the three recompute modes.
  std::vector<std::int64_t> tps, cps{1}, mbs{1, 2, 4, 8, 16}, pps, vpps, zeros{0, 1, 2, 3}, modes{0, 1, 2};
  for (int t = 1; t <= std::max(p.device.gpus_per_node, axes.tp.value_or(0)); ++t) tps.push_back(t);
  for (int c = 2; c <= 64; c *= 2)
    if (seq >= 16384 && seq / c >= 4096) cps.push_back(c);
  for (std::int64_t q = 1; q <= std::max<std::int64_t>(m.layers + 2, axes.pp.value_or(0)); ++q)
    pps.push_back(q);
  for (int v = 1; v <= 8; ++v) vpps.push_back(v);
  m_space = {
      {"tp", fixed_or(axes.tp, tps), axes.tp.has_value()},
      {"cp", fixed_or(axes.cp, cps), axes.cp.has_value()},
      {"sp",
       axes.sequence_parallel ? std::vector<std::int64_t>{*axes.sequence_parallel ? 1 : 0}
                              : std::vector<std::int64_t>{1, 0},
       axes.sequence_parallel.has_value()},
      {"micro_batch", fixed_or(axes.micro_batch, mbs), axes.micro_batch.has_value()},
      {"pp", fixed_or(axes.pp, pps), axes.pp.has_value()},
      {"vpp", fixed_or(axes.vpp, vpps), axes.vpp.has_value()},
      {"zero", fixed_or(axes.zero, zeros), axes.zero.has_value()},
      {"recompute",
       axes.recompute ? std::vector<std::int64_t>{static_cast<std::int64_t>(*axes.recompute)} : modes,
       axes.recompute.has_value()},
  };
  const auto& tp_axis = m_space[0].values;
  const auto& cp_axis = m_space[1].values;
  const auto& sp_axis = m_space[2].values;
  const auto& mb_axis = m_space[3].values;
  // One problem per micro-batch value: the ledger and every figure derive from it.
  for (std::int64_t b : mb_axis) {
    m_problems.push_back(p);
    m_problems.back().training.micro_batch = b;
    validate(m_problems.back().training, p.device);
  }
  for (std::int64_t t : tp_axis)
    for (std::int64_t c : cp_axis)
      for (std::int64_t sp : sp_axis) {
        // sp means nothing without tp: tp = 1 is searched once, as "sp" (which is then off).
        if (t == 1 && !sp && !axes.sequence_parallel) continue;
        layout probe;
        probe.gpus = static_cast<int>(t * c);
        probe.tp = static_cast<int>(t);
        probe.cp = static_cast<int>(c);
        probe.sequence_parallel = sp != 0;
        if (!valid(unsplit, probe, axes.tp || axes.cp || axes.sequence_parallel)) continue;
        for (std::size_t i = 0; i < m_problems.size(); ++i) {
          const ledger_shape shape = shape_of(m_problems[i], probe);
          auto sums = sum_ledger(layer_ledger(m, shape));
          detail::checked_mul(sums.none, m.layers * 4, "activations");
          m_variants.push_back(
              {probe.tp, probe.cp, probe.sp(), static_cast<int>(i), sums, sum_peaks(m, shape)});
        }
      }
  // Every (pp, vpp) whose split is valid: layers need not divide (the balanced split of schedule.hpp), so
  // Llama 3 405B's 126 layers are searched at pp = 16 too.
  for (std::int64_t q : m_space[4].values)
    for (std::int64_t v : m_space[5].values) {
      if (v > 1 && q == 1 && !axes.vpp) continue;  // interleaving needs a pipeline
      layout probe;
      probe.gpus = probe.pp = static_cast<int>(q);
      probe.vpp = static_cast<int>(v);
      if (valid(p, probe, axes.pp.has_value() && (axes.vpp.has_value() || v == 1)))
        m_pp_vpp.emplace_back(probe.pp, probe.vpp);
    }
  if (m_variants.empty() || m_pp_vpp.empty()) {
    if (first_error) throw *first_error;
    throw bad_input(m_variants.empty() ? "tp" : "pp", "no valid value for this model among the fixed axes");
  }
}

std::int64_t layout_search::per_rank_floor() const {
  std::int64_t best = INT64_MAX;
  for (const auto& v : m_variants) {
    if (v.mb != 0) continue;
    const problem& p = m_problems[0];
    for (std::int64_t r : m_space[7].values) {
      const auto mode = static_cast<recompute_mode>(r);
      const std::int64_t a = v.sums.of(mode);
      const std::int64_t seed = a + p.device.reserve.fixed;
      const std::int64_t peak = a + v.peaks.working_set_of(mode) + p.device.fixed_overheads;
      best = std::min(best, std::max(seed, peak));
    }
  }
  return best;
}

const problem& layout_search::problem_of(const candidate& c) const {
  const auto& mbs = m_space[3].values;
  for (std::size_t i = 0; i < mbs.size(); ++i)
    if (mbs[i] == c.micro_batch) return m_problems[i];
  return m_problem;
}

// The decisive total of a layout's worst stage, computed from the stage pieces of estimate.hpp without a
// stage_breakdown: the search's inner loop. evaluate_worst() gives the same figure (suggest_test checks).
struct layout_search::fast_total {
  std::int64_t decisive = 0;
  bool fits = false;
};

template <class Visit>
void layout_search::for_each_layout(int gpus, bool smallest_micro_batch_only, Visit&& visit) const {
  const auto& zeros = m_space[6].values;
  const auto& modes = m_space[7].values;
  const bool mb_searched = micro_batch_searched(), vpp_searched = !m_axes.vpp;
  layout l;
  l.gpus = gpus;
  l.offload_optimizer = m_axes.offload_optimizer;
  l.zero3_inflight_units = m_axes.zero3_inflight_units;
  l.zero3_live_params = m_axes.zero3_live_params;
  l.reshard_after_forward = m_axes.reshard_after_forward;
  // The (pp, vpp) pairs whose pp divides N, found once per N rather than once per variant.
  std::vector<std::pair<int, int>> pvs;
  for (auto pv : m_pp_vpp)
    if (pv.first <= gpus && gpus % pv.first == 0) pvs.push_back(pv);
  for (const auto& v : m_variants) {
    if (smallest_micro_batch_only && v.mb != 0) continue;
    const problem& p = m_problems[static_cast<std::size_t>(v.mb)];
    const std::int64_t mb = p.training.micro_batch;
    const std::int64_t cap = p.device.capacity, fixed = p.device.fixed_overheads;
    const reserve_model& reserve = p.device.reserve;
    for (auto [q, vpp] : pvs) {
      const std::int64_t tpc = static_cast<std::int64_t>(v.tp) * q * v.cp;
      if (tpc > gpus || gpus % tpc) continue;
      l.tp = v.tp;
      l.cp = v.cp;
      l.pp = q;
      l.vpp = vpp;
      l.sequence_parallel = v.sp;
      const std::int64_t dp = gpus / tpc;
      // Micro-batch: b > 1 must divide the global batch per replica (Megatron asserts it).
      if (mb_searched && v.mb != 0 &&
          (mb * dp > p.training.global_batch || p.training.global_batch % (mb * dp)))
        continue;
      const std::int64_t M = microbatches_per_step(p, l);
      if (vpp_searched && vpp > 1 && M % q) continue;  // Megatron's interleaved schedule: M divisible by pp
      const bool sharded = dp * v.cp > 1;
      const bool exact = !middle_stages_dominated(p, l);  // an explicit split: every stage, the slow path
      // The pieces that depend on neither ZeRO nor recompute, for the first and the last stage.
      struct stage_piece {
        std::int64_t layers, params_on_rank, chunks, embedding;
      } pieces[2];
      const int nstages = q == 1 ? 1 : 2;
      for (int k = 0; k < nstages; ++k) {
        const int stage = k == 0 ? 0 : q - 1;
        auto& x = pieces[k];
        x.layers = stage_layers(p, l, stage);
        x.params_on_rank = stage_params_on_rank(p, m_params, l, stage, x.layers);
        x.chunks = chunks_in_flight(l, stage, M) * (x.layers / vpp);
        x.embedding =
            stage == 0 && v.peaks.first_stage ? embeddings_in_flight(l, M) * v.peaks.first_stage : 0;
      }
      for (std::int64_t z : zeros) {
        if (!m_axes.zero && !sharded && z > 0) continue;
        l.zero = static_cast<int>(z);
        std::int64_t state[2], transient[2];
        for (int k = 0; k < nstages; ++k) {
          transient[k] = stage_transient(p, m_params, l, pieces[k].layers, pieces[k].params_on_rank);
          state[k] = persistent_bytes(p, l, pieces[k].params_on_rank) + transient[k];
        }
        const std::int64_t tokens = reserve.fixed_only() ? 0 : reserve_tokens(p, l);
        const std::int64_t ugrad = unsharded_layer_grad_bytes(p, m_params, l);
        for (std::int64_t r : modes) {
          l.recompute = static_cast<recompute_mode>(r);
          fast_total t;
          if (exact) {
            t.decisive = evaluate_worst(p, m_params, v.sums, v.peaks, l).decisive_total();
          } else {
            const std::int64_t per_layer = v.sums.of(l.recompute);
            const std::int64_t ws = v.peaks.working_set_of(l.recompute) + ugrad;
            for (int k = 0; k < nstages; ++k) {
              const bool last = k == nstages - 1;
              const std::int64_t act = saturating_mul(pieces[k].chunks, per_layer) + pieces[k].embedding;
              const std::int64_t held = state[k] + act;
              const std::int64_t extra = std::max(ws, last ? v.peaks.output_phase : 0);
              const std::int64_t peak = held + extra + fixed;
              const std::int64_t res = reserve.bytes(transient[k] + act + extra, tokens);
              t.decisive = std::max({t.decisive, held + res, peak});
            }
          }
          t.fits = t.decisive <= cap;
          if (!visit(l, v, t)) return;
        }
      }
    }
  }
}

suggestion layout_search::suggest(int gpus) const {
  if (gpus <= 0) throw bad_input("gpus", "must be positive, got " + std::to_string(gpus));
  suggestion s;
  s.gpus = gpus;
  s.bound = bound_for(m_problem, gpus, m_axes.offload_optimizer);
  s.space = m_space;
  s.micro_batch_searched = micro_batch_searched();
  s.vpp_searched = !m_axes.vpp;
  const std::int64_t tight_below = m_problem.device.capacity / 20;
  // The smallest total seen: its layout and variant, the full breakdown made once at the end.
  std::int64_t smallest = INT64_MAX;
  layout smallest_layout;
  const variant* smallest_variant = nullptr;
  for_each_layout(gpus, false, [&](const layout& l, const variant& v, const fast_total& t) {
    ++s.evaluated;
    if (t.decisive < smallest) {
      smallest = t.decisive;
      smallest_layout = l;
      smallest_variant = &v;
    }
    if (t.fits) {
      const problem& p = m_problems[static_cast<std::size_t>(v.mb)];
      candidate c{l, p.training.micro_batch, evaluate_worst(p, m_params, v.sums, v.peaks, l), {}, false};
      c.cost = cost_of(p, m_params, l, m_costs);
      c.tight = c.worst.headroom < tight_below;
      s.fitting.push_back(std::move(c));
    }
    return true;
  });
  if (smallest_variant) {
    const problem& p = m_problems[static_cast<std::size_t>(smallest_variant->mb)];
    s.smallest = candidate{
        smallest_layout,
        p.training.micro_batch,
        evaluate_worst(p, m_params, smallest_variant->sums, smallest_variant->peaks, smallest_layout),
        {},
        false};
  }
  // Ranked through an index (candidates are large): not tight first, then by cost, dp bytes, headroom,
  // and at equal figures the smaller micro-batch.
  std::vector<std::size_t> order(s.fitting.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t i, std::size_t j) {
    const candidate &a = s.fitting[i], &b = s.fitting[j];
    if (a.tight != b.tight) return !a.tight;
    if (a.cost.total != b.cost.total) return a.cost.total < b.cost.total;
    if (a.cost.dp_bytes != b.cost.dp_bytes) return a.cost.dp_bytes < b.cost.dp_bytes;
    if (a.worst.headroom != b.worst.headroom) return a.worst.headroom > b.worst.headroom;
    return a.micro_batch < b.micro_batch;
  });
  std::vector<candidate> ranked;
  ranked.reserve(order.size());
  for (std::size_t i : order) ranked.push_back(std::move(s.fitting[i]));
  s.fitting = std::move(ranked);
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

min_gpus_result min_gpus(const layout_search& search, int max_gpus) {
  const problem& p = search.the_problem();
  min_gpus_result r;
  const state_bound b = bound_for(p, 1, search.axes().offload_optimizer);
  r.bound = b;
  const double state = static_cast<double>(b.state_total);
  // The seed's (e): leave room for the cheapest activations at tp = 1, full recomputation: 2*s*b*h*L.
  r.full_recompute_activations = saturating_mul(
      saturating_mul(saturating_mul(2 * p.training.seq, p.training.micro_batch), p.model.hidden),
      p.model.layers);
  r.seed_bound = state / static_cast<double>(b.usable - r.full_recompute_activations);
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
  int pow2 = 1;
  while (pow2 < *r.n_min) pow2 *= 2;
  for (; pow2 <= max_gpus; pow2 *= 2) {
    if (search.any_fits(pow2, r.evaluated)) {
      r.n_pow2 = pow2;
      r.at_pow2 = search.suggest(pow2);
      r.evaluated += r.at_pow2->evaluated;
      break;
    }
  }
  return r;
}

}  // namespace headroom
