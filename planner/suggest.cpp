// suggest.cpp: layout enumeration, ranking, minimum-GPU search and the state bound (see suggest.hpp).
#include "suggest.hpp"

#include <algorithm>
#include <cmath>

#include "errors.hpp"

namespace headroom {

state_bound bound_for(const problem& p, int gpus, bool offload_optimizer) {
  state_bound b;
  b.gpus = gpus;
  for (const auto& buf : p.precision.buffers)
    if (!(offload_optimizer && (buf.kind == buffer_kind::master || buf.kind == buffer_kind::optimizer)))
      b.shardable_per_param += buf.bytes;
  b.state_total = detail::checked_mul(b.shardable_per_param, count_params(p.model).total, "state");
  b.per_gpu = b.state_total / gpus;
  b.usable = p.device.capacity - p.device.reserve;
  b.impossible = b.per_gpu > b.usable;
  return b;
}

layout_search::layout_search(const problem& p, const search_axes& axes, const cost_model& costs)
    : m_problem(p), m_axes(axes), m_costs(costs) {
  validate(p.model);
  validate(p.training, p.device);
  m_params = count_params(p.model);
  const auto& m = p.model;
  const std::int64_t seq = p.training.seq;
  // Candidate axes; layout_error() decides which are valid, so the search and `plan` agree by construction.
  std::optional<bad_input> first_error;
  // Remembers the first error of a probe on an axis the user fixed: that is the one to report.
  auto valid = [&](const layout& probe, bool fixed) {
    auto e = layout_error(p, probe);
    if (e && fixed && !first_error) first_error = e;
    return !e;
  };
  // Context parallelism is searched only where the sequence is long (>= 16k), in powers of two that leave
  // at least 4k tokens per rank.
  std::vector<int> cps;
  if (axes.cp)
    cps.push_back(*axes.cp);
  else
    for (int c = 1; c <= 64; c *= 2)
      if (c == 1 || (seq >= 16384 && seq / c >= 4096)) cps.push_back(c);
  // A fixed axis is validated even outside the searched range, so its own error is the one reported.
  for (int t = 1; t <= std::max(p.device.gpus_per_node, axes.tp.value_or(0)); ++t) {
    if (axes.tp && *axes.tp != t) continue;
    for (int c : cps)
      for (bool sp : {true, false}) {
        if (t == 1 && !sp) continue;  // sp means nothing without tp
        if (axes.sequence_parallel && t > 1 && *axes.sequence_parallel != sp) continue;
        layout probe;
        probe.gpus = t * c;
        probe.tp = t;
        probe.cp = c;
        probe.sequence_parallel = sp;
        if (!valid(probe, axes.tp || axes.cp || axes.sequence_parallel)) continue;
        const ledger_shape shape = shape_of(p, probe);
        auto sums = sum_ledger(layer_ledger(m, shape));
        detail::checked_mul(sums.none, m.layers * 4, "activations");
        m_variants.push_back({t, c, probe.sp(), sums, sum_peaks(m, shape)});
      }
  }
  // Every pp whose split is valid: layers need not divide (the balanced split of schedule.hpp), so
  // Llama 3 405B's 126 layers are searched at pp = 16 too.
  for (int q = 1; q <= std::max<std::int64_t>(m.layers + 2, axes.pp.value_or(0)); ++q) {
    if (axes.pp && *axes.pp != q) continue;
    layout probe;
    probe.gpus = probe.pp = q;
    probe.vpp = axes.vpp;
    if (valid(probe, axes.pp.has_value())) m_pp.push_back(q);
  }
  if (m_variants.empty() || m_pp.empty()) {
    if (first_error) throw *first_error;
    throw bad_input(m_variants.empty() ? "tp" : "pp", "no valid value for this model among the fixed axes");
  }
}

template <class Visit>
void layout_search::for_each_layout(int gpus, Visit&& visit) const {
  static constexpr recompute_mode modes[] = {recompute_mode::none, recompute_mode::selective,
                                             recompute_mode::full};
  layout l;
  l.gpus = gpus;
  l.vpp = m_axes.vpp;
  l.offload_optimizer = m_axes.offload_optimizer;
  l.zero3_inflight_units = m_axes.zero3_inflight_units;
  l.zero3_live_params = m_axes.zero3_live_params;
  l.reshard_after_forward = m_axes.reshard_after_forward;
  // The pipeline sizes that divide N, found once per N rather than once per (tp, cp) variant.
  std::vector<int> pps;
  for (int q : m_pp)
    if (q <= gpus && gpus % q == 0) pps.push_back(q);
  for (const auto& v : m_variants) {
    for (int q : pps) {
      const std::int64_t tpc = static_cast<std::int64_t>(v.tp) * q * v.cp;
      if (tpc > gpus || gpus % tpc) continue;
      l.tp = v.tp;
      l.cp = v.cp;
      l.pp = q;
      l.sequence_parallel = v.sp;
      const bool sharded = gpus / tpc * v.cp > 1;
      for (int z = 0; z <= 3; ++z) {
        if (m_axes.zero ? *m_axes.zero != z : (!sharded && z > 0)) continue;
        l.zero = z;
        for (auto r : modes) {
          if (m_axes.recompute && *m_axes.recompute != r) continue;
          l.recompute = r;
          if (!visit(l, v)) return;
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
  const std::int64_t tight_below = m_problem.device.capacity / 20;
  for_each_layout(gpus, [&](const layout& l, const variant& v) {
    ++s.evaluated;
    candidate c{l, evaluate_worst(m_problem, m_params, v.sums, v.peaks, l), {}, false};
    if (!s.smallest || c.worst.decisive_total() < s.smallest->worst.decisive_total()) s.smallest = c;
    if (c.worst.fits) {
      c.cost = cost_of(m_problem, m_params, l, m_costs);
      c.tight = c.worst.headroom < tight_below;
      s.fitting.push_back(c);
    }
    return true;
  });
  std::sort(s.fitting.begin(), s.fitting.end(), [](const candidate& a, const candidate& b) {
    if (a.tight != b.tight) return !a.tight;
    if (a.cost.total != b.cost.total) return a.cost.total < b.cost.total;
    if (a.cost.dp_bytes != b.cost.dp_bytes) return a.cost.dp_bytes < b.cost.dp_bytes;
    return a.worst.headroom > b.worst.headroom;
  });
  return s;
}

bool layout_search::any_fits(int gpus, std::int64_t& evaluated) const {
  bool found = false;
  for_each_layout(gpus, [&](const layout& l, const variant& v) {
    ++evaluated;
    found = evaluate_worst(m_problem, m_params, v.sums, v.peaks, l).fits;
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
  r.full_recompute_activations =
      2 * p.training.seq * p.training.micro_batch * p.model.hidden * p.model.layers;
  r.seed_bound = state / static_cast<double>(b.usable - r.full_recompute_activations);
  r.strict_bound = state / static_cast<double>(b.usable);
  r.first_candidate = std::max(1, static_cast<int>(std::ceil(r.strict_bound - 1e-9)));
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
