// search_space.hpp: the axes --suggest and --min-gpus search, as data. Each axis is an object: its name, the
// values tried, whether the user fixed it, what a value sets in a layout, and the level at which it acts,
// which says how early the search can precompute around it. The search's loops (suggest.cpp) run over the
// levels, not over named axes: a new axis (expert parallelism, expert tensor parallelism, hybrid-sharding
// replicas) is one more entry in search_space(), with its setter and its level.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "layout.hpp"

namespace headroom {

// Axes the user fixed on the command line; the search varies the rest.
struct search_axes {
  std::optional<int> tp, pp, cp, zero, vpp;
  std::optional<int> ep, etp;      // expert parallelism and expert tp (MoE models; etp 0 = tp)
  int dp_replicate = 1;            // HSDP replicas: not searched (replicas only add memory)
  std::int64_t reduce_bucket = 0, prefetch_bucket = 0;  // DeepSpeed's (layout.hpp)
  std::optional<std::int64_t> micro_batch;  // unset: searched, the global batch fixed
  std::optional<recompute_mode> recompute;
  std::optional<bool> sequence_parallel;
  // What an imported launch's framework runs, where the search varies the axis (empty: every value): the ZeRO
  // stages (Megatron 0-1, its distributed optimizer being ZeRO-1; torchtitan 0 and 3, FSDP) and the
  // recompute modes (torchtitan: none and full, having no core-attention selective mode).
  std::vector<int> zero_stages;
  std::vector<recompute_mode> recompute_modes;
  // A searched pp divides the layers (with a counted embedding and loss) evenly: Megatron refuses a remainder
  // when its launch states no split (arguments.py l.985-998).
  bool even_pp_split = false;
  bool offload_optimizer = false;
  bool offload_params = false;  // ZeRO-3 parameter offload: fixes the ZeRO stage at 3
  int zero3_inflight_units = 2;
  std::int64_t zero3_live_params = 0;
  bool reshard_after_forward = true;
};

// A point of the search space: a layout, and the micro-batch it runs (the one axis the problem holds).
struct search_point {
  layout where;
  std::int64_t micro_batch = 1;
};

// Where an axis' values act, outermost first. The search computes each level's figures once for all the
// values of the levels inside it.
enum class axis_level {
  ledger,      // one layer's activation ledger (tp, cp, sp, micro-batch): sums precomputed at construction
  pipeline,    // the stages (pp, vpp): valid values found at construction, stage pieces per GPU count
  state,       // the state and the ZeRO-3 transient only (ZeRO stage): per layout
  activation,  // which activations are kept only (recompute): the innermost loop
};

// One axis of the search. Booleans are 0/1, enums their values. `applies` of a ledger or pipeline axis
// may read only fields its own level sets (it is asked at construction), that of a state or activation
// axis only what the outer levels set (it is asked once for the level's loop); `searched_rule` may read
// dp.
struct search_axis {
  const char* name = "";
  std::vector<std::int64_t> values;  // tried in this order; the first is `plan`'s default
  bool fixed = false;                // the user gave it: one value
  axis_level level = axis_level::ledger;
  void (*set)(search_point&, std::int64_t) = nullptr;  // writes a value into a point
  // Whether the axis means anything for a layout (nullptr: always). Where it does not, a searched axis is
  // tried at its first value only: sp without tp, vpp without a pipeline, ZeRO without sharding.
  bool (*applies)(const layout&) = nullptr;
  // A rule a searched value must meet beyond layout_error and schedule_error (nullptr: none). A value the
  // user fixed is taken as given, as `plan` takes it.
  bool (*searched_rule)(const problem&, const layout&) = nullptr;
  // Memory never falls as the value grows, so a layout fits at some value only if it fits at the first:
  // any_fits() tries the first alone.
  bool monotone = false;
};

// Returns the lowest ZeRO stage the search tries for `p` under `a`: the recipe's lowest (recipe.hpp), and
// at least 1 with optimizer offload (layout_error's rule).
inline int lowest_searched_zero(const problem& p, const search_axes& a) {
  return a.offload_params ? 3 : std::max(p.precision.lowest_zero(), a.offload_optimizer ? 1 : 0);
}

// Returns the axes for `p` with the user's fixed axes `a`: tp, cp, sp, (MoE: ep, expert tp,) micro-batch, pp, vpp,
// ZeRO stage, recompute, each level's axes in loop order (the last varies fastest).
std::vector<search_axis> search_space(const problem& p, const search_axes& a);

// Every combination of the values of one level's axes, in order (the last axis varying fastest): what the
// search's loop at that level runs through. Holds copies of what it needs of the axes.
class axis_combos {
 public:
  axis_combos() = default;
  axis_combos(const std::vector<search_axis>& space, axis_level level);

  // Returns the number of combinations (1 for a level without axes). A level has at most 64 axes.
  std::size_t size() const { return m_count; }
  // Writes combination `c`'s values into `x`.
  void apply(std::size_t c, search_point& x) const {
    const std::size_t n = m_columns.size();
    for (std::size_t k = 0; k < n; ++k) m_columns[k].set(x, m_values[c * n + k]);
  }
  // Returns which of the level's axes apply to `l`, bit k for the k-th, asking each `applies` once: the
  // search asks it once for all the combinations of a state or activation level, so the `applies` of such
  // an axis may read only what the outer levels set (ZeRO: the shard degree).
  std::uint64_t applying(const layout& l) const {
    std::uint64_t mask = 0;
    for (std::size_t k = 0; k < m_columns.size(); ++k)
      if (!m_columns[k].applies || m_columns[k].applies(l)) mask |= std::uint64_t{1} << k;
    return mask;
  }
  // Returns whether combination `c` is tried where the axes in `mask` (applying()) apply: no searched
  // axis outside it is past its first value. No call: the search's inner loops ask it.
  bool applies(std::size_t c, std::uint64_t mask) const {
    if (!m_any_applies) return true;
    const std::size_t n = m_columns.size();
    for (std::size_t k = 0; k < n; ++k)
      if (m_columns[k].searched && !m_first[c * n + k] && !(mask >> k & 1)) return false;
    return true;
  }
  // Returns whether combination `c` is tried for layout `l`, into which it was written: no searched axis
  // that does not apply to `l` is past its first value.
  bool applies(std::size_t c, const layout& l) const {
    if (!m_any_applies) return true;
    const std::size_t n = m_columns.size();
    for (std::size_t k = 0; k < n; ++k) {
      const column& col = m_columns[k];
      if (col.applies && col.searched && !m_first[c * n + k] && !col.applies(l)) return false;
    }
    return true;
  }
  // Returns whether the rule of every searched axis of this level holds for `l` under `p`.
  bool rules_hold(const problem& p, const layout& l) const {
    if (!m_any_rule) return true;
    for (const column& col : m_columns)
      if (col.rule && col.searched && !col.rule(p, l)) return false;
    return true;
  }
  // Returns whether combination `c` (written into layout `l`) is the one `plan` builds from the same
  // flags, and the user's: some axis fixed, every searched axis at its first value, and every fixed axis
  // meaning something in `l` unless every axis is fixed (vpp given, pp searched: pp = 1 is not what the
  // user asks for). Its error is the one to report when nothing is valid.
  bool as_plan_builds(std::size_t c, const layout& l) const;
  // Returns whether every monotone axis is at its first value in combination `c`.
  bool monotone_first(std::size_t c) const;

 private:
  struct column {
    void (*set)(search_point&, std::int64_t);
    bool (*applies)(const layout&);
    bool (*rule)(const problem&, const layout&);
    bool searched, monotone;
  };
  std::vector<column> m_columns;
  std::vector<std::int64_t> m_values;  // combination c, column k at c * columns + k
  std::vector<unsigned char> m_first;  // whether that value is its axis' first
  std::size_t m_count = 1;
  bool m_any_applies = false, m_any_rule = false;  // whether a searched column has either (the fast exit)
};

}  // namespace headroom
