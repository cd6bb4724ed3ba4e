// search_space.cpp: the search's axes and their combinations (see search_space.hpp).
#include "search_space.hpp"

#include <algorithm>
#include <string_view>

namespace headroom {

namespace {

// Returns {fixed} when the user gave the axis, else the values searched.
template <class T>
std::vector<std::int64_t> fixed_or(const std::optional<T>& fixed, std::vector<std::int64_t> searched) {
  return fixed ? std::vector<std::int64_t>{static_cast<std::int64_t>(*fixed)} : searched;
}

}  // namespace

std::vector<search_axis> search_space(const problem& p, const search_axes& a) {
  // tp: 1 .. GPUs per node (a fixed value is used as given, even beyond it, so its own error is the one
  // reported). cp: searched only where the sequence is long (>= 16k), in powers of two that leave at least
  // 4k tokens per rank. Micro-batch: powers of two up to 16 (the global batch fixed). pp: every count the
  // split allows, up to the layers (+2 for a counted embedding and loss). vpp: 1 .. 8. ZeRO 0-3 and the
  // three recompute modes.
  std::vector<std::int64_t> tps, cps{1}, pps, vpps, recomputes;
  for (int t = 1; t <= p.device.gpus_per_node; ++t) tps.push_back(t);
  for (int c = 2; c <= 64; c *= 2)
    if (p.training.seq >= 16384 && p.training.seq / c >= 4096) cps.push_back(c);
  const std::int64_t split_layers =
      p.model.layers + int{p.training.split.embedding_as_layer} + int{p.training.split.loss_as_layer};
  for (std::int64_t q = 1; q <= p.model.layers + 2; ++q)
    if (!a.even_pp_split || split_layers % q == 0) pps.push_back(q);
  for (int v = 1; v <= 8; ++v) vpps.push_back(v);
  // ZeRO stages: those the recipe runs with (recipe.hpp), from 1 with optimizer offload.
  std::vector<std::int64_t> zeros;
  for (int z = lowest_searched_zero(p, a); z <= p.precision.highest_zero(); ++z)
    if (a.zero_stages.empty() ||
        std::find(a.zero_stages.begin(), a.zero_stages.end(), z) != a.zero_stages.end())
      zeros.push_back(z);
  for (const auto& r : recompute_names)
    if (a.recompute_modes.empty() ||
        std::find(a.recompute_modes.begin(), a.recompute_modes.end(), r.value) != a.recompute_modes.end())
      recomputes.push_back(static_cast<std::int64_t>(r.value));
  // ep: the divisors of the routed experts (a dense model: 1). etp: tp (0) and, where tp > 1, 1 (Megatron's
  // MoE parallel folding runs experts without tensor parallelism under a tensor-parallel attention).
  std::vector<std::int64_t> eps{1}, etps{0, 1};
  if (p.model.moe.enabled())
    for (std::int64_t e = 2; e <= p.model.moe.experts && e <= max_gpus; ++e)
      if (p.model.moe.experts % e == 0) eps.push_back(e);
  if (!p.model.moe.enabled()) etps = {0};
  std::vector<search_axis> space = {
      {.name = "tp",
       .values = fixed_or(a.tp, tps),
       .fixed = a.tp.has_value(),
       .level = axis_level::ledger,
       .set = [](search_point& x, std::int64_t v) { x.where.tp = static_cast<int>(v); }},
      {.name = "cp",
       .values = fixed_or(a.cp, cps),
       .fixed = a.cp.has_value(),
       .level = axis_level::ledger,
       .set = [](search_point& x, std::int64_t v) { x.where.cp = static_cast<int>(v); }},
      {.name = "sp",
       .values = a.sequence_parallel ? std::vector<std::int64_t>{*a.sequence_parallel ? 1 : 0}
                                     : std::vector<std::int64_t>{1, 0},
       .fixed = a.sequence_parallel.has_value(),
       .level = axis_level::ledger,
       .set = [](search_point& x, std::int64_t v) { x.where.sequence_parallel = v != 0; },
       .applies = [](const layout& l) { return l.tp > 1; }},
      {.name = "ep",
       .values = fixed_or(a.ep, eps),
       .fixed = a.ep.has_value(),
       .level = axis_level::ledger,
       .set = [](search_point& x, std::int64_t v) { x.where.ep = static_cast<int>(v); }},
      {.name = "etp",
       .values = fixed_or(a.etp, etps),
       .fixed = a.etp.has_value(),
       .level = axis_level::ledger,
       .set = [](search_point& x, std::int64_t v) { x.where.etp = static_cast<int>(v); },
       .applies = [](const layout& l) { return l.tp > 1; }},
      {.name = "micro_batch",
       .values = fixed_or(a.micro_batch, {1, 2, 4, 8, 16}),
       .fixed = a.micro_batch.has_value(),
       .level = axis_level::ledger,
       .set = [](search_point& x, std::int64_t v) { x.micro_batch = v; },
       .monotone = true},
      {.name = "pp",
       .values = fixed_or(a.pp, pps),
       .fixed = a.pp.has_value(),
       .level = axis_level::pipeline,
       .set = [](search_point& x, std::int64_t v) { x.where.pp = static_cast<int>(v); }},
      {.name = "vpp",
       .values = fixed_or(a.vpp, vpps),
       .fixed = a.vpp.has_value(),
       .level = axis_level::pipeline,
       .set = [](search_point& x, std::int64_t v) { x.where.vpp = static_cast<int>(v); },
       .applies = [](const layout& l) { return l.pp > 1; }},
      {.name = "zero",
       .values = fixed_or(a.zero, zeros),
       .fixed = a.zero.has_value(),
       .level = axis_level::state,
       .set = [](search_point& x, std::int64_t v) { x.where.zero = static_cast<int>(v); },
       .applies = [](const layout& l) { return l.shard_degree() > 1; }},
      {.name = "recompute",
       .values = fixed_or(a.recompute, recomputes),
       .fixed = a.recompute.has_value(),
       .level = axis_level::activation,
       .set = [](search_point& x, std::int64_t v) { x.where.recompute = static_cast<recompute_mode>(v); }},
  };
  // A dense model has no expert axes unless the user gave one (layout_error then refuses it).
  if (!p.model.moe.enabled())
    std::erase_if(space, [&](const search_axis& x) {
      return (std::string_view(x.name) == "ep" && !a.ep) || (std::string_view(x.name) == "etp" && !a.etp);
    });
  return space;
}

axis_combos::axis_combos(const std::vector<search_axis>& space, axis_level level) {
  std::vector<const search_axis*> axes;
  for (const auto& a : space)
    if (a.level == level && axes.size() < 64) {
      axes.push_back(&a);
      m_columns.push_back({a.set, a.applies, a.searched_rule, !a.fixed, a.monotone});
      m_count *= a.values.size();
      m_any_applies = m_any_applies || (a.applies && !a.fixed);
      m_any_rule = m_any_rule || (a.searched_rule && !a.fixed);
    }
  // An odometer over the axes' value indices, the last axis turning fastest.
  std::vector<std::size_t> at(axes.size(), 0);
  for (std::size_t c = 0; c < m_count; ++c) {
    for (std::size_t k = 0; k < axes.size(); ++k) {
      m_values.push_back(axes[k]->values[at[k]]);
      m_first.push_back(at[k] == 0);
    }
    for (std::size_t k = axes.size(); k-- > 0;) {
      if (++at[k] < axes[k]->values.size()) break;
      at[k] = 0;
    }
  }
}

bool axis_combos::as_plan_builds(std::size_t c, const layout& l) const {
  const std::size_t n = m_columns.size();
  bool any_fixed = false, all_fixed = true, fixed_apply = true;
  for (std::size_t k = 0; k < n; ++k) {
    const column& col = m_columns[k];
    if (col.searched && !m_first[c * n + k]) return false;
    any_fixed = any_fixed || !col.searched;
    all_fixed = all_fixed && !col.searched;
    if (!col.searched && col.applies && !col.applies(l)) fixed_apply = false;
  }
  return any_fixed && (all_fixed || fixed_apply);
}

bool axis_combos::monotone_first(std::size_t c) const {
  const std::size_t n = m_columns.size();
  for (std::size_t k = 0; k < n; ++k)
    if (m_columns[k].monotone && !m_first[c * n + k]) return false;
  return true;
}

}  // namespace headroom
