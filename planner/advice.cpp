// advice.cpp: see advice.hpp.
#include "planner/advice.hpp"

#include "planner/format.hpp"
#include "planner/max_fit.hpp"
#include "planner/recipe.hpp"

namespace headroom {

namespace {

constexpr const char* eight_bit = "bf16-adam8bit";

std::string gib_text(std::int64_t bytes) {
  return gib_str(bytes, 1) + " GiB";
}

// Returns how the setting `flag` `value` is typed: by `spell` when given (an imported launch), else the flag;
// "" when the launch cannot state it (no lever then).
std::string typed(const flag_spelling& spell, std::string_view flag, std::string_view value) {
  if (spell) return spell(flag, value);
  return value.empty() ? std::string(flag) : std::string(flag) + " " + std::string(value);
}

// The verdict on layout `l` as a lever states it: "fits, headroom X" or "not enough alone, short by X"; "" when
// the layout is not valid (then no lever).
std::string checked(const problem& p, const layout& l) {
  if (layout_error(p, l) || schedule_error(p, l)) return "";
  try {
    const breakdown b = estimate(p, l);
    const stage_breakdown& w = b.worst_stage();
    if (w.fits) return "fits, headroom " + gib_text(w.headroom);
    return "not enough alone, short by " + gib_text(-w.headroom);
  } catch (const bad_input&) {
    return "";
  }
}

// The state-moving levers that need no search: optimizer offload and the 8-bit recipe by the state bound on
// `gpus` GPUs, a higher ZeRO stage when the command line held it lower.
void state_levers(const problem& p, const search_axes& axes, int gpus, const flag_spelling& spell,
                  std::vector<std::string>& out) {
  if (const std::string t = typed(spell, "--offload-optimizer", ""); !axes.offload_optimizer && !t.empty()) {
    const state_bound b = bound_for(p, gpus, true, axes.offload_params);
    out.push_back("optimizer offload (" + t +
                  "; --suggest --allow-offload searches it): state at "
                  "best " +
                  gib_text(b.per_gpu) + " per GPU against " + gib_text(b.usable) + " usable" +
                  (b.impossible ? ", not enough alone" : ", which the state bound allows"));
  }
  if (const std::string t = typed(spell, "--recipe", eight_bit);
      p.precision.name != eight_bit && !t.empty()) {
    problem q = p;
    q.precision = load_recipe(eight_bit);
    const state_bound b = bound_for(q, gpus, axes.offload_optimizer, axes.offload_params);
    out.push_back("an 8-bit optimizer (" + t + "; --suggest --recipes " + p.precision.name + "," + eight_bit +
                  " searches both): state at best " + gib_text(b.per_gpu) + " per GPU" +
                  (b.impossible ? ", not enough alone" : ", which the state bound allows"));
  }
  if (const std::string t = typed(spell, "--zero", "3");
      axes.zero && *axes.zero < 3 && p.precision.highest_zero() >= 3 && !t.empty())
    out.push_back("ZeRO-3 (" + t + "; now ZeRO-" + std::to_string(*axes.zero) +
                  "): parameters and gradients are sharded too");
}

// The smallest GPU count with a fitting layout, as a lever (searching on `gpus` now).
std::string gpu_lever(const problem& p, const search_axes& axes, const cost_model& costs, int max_gpus,
                      int gpus) {
  const min_gpus_result r = min_gpus(layout_search(p, axes, costs), max_gpus);
  if (!r.n_min)
    return "more GPUs alone do not help: no count up to " + std::to_string(max_gpus) +
           " has a fitting layout with these settings";
  return std::string(*r.n_min > gpus ? "more GPUs" : "another GPU count") +
         ": the smallest count with a fitting layout is " + std::to_string(*r.n_min) +
         (r.n_nodes && *r.n_nodes != *r.n_min
              ? " (in whole nodes of " + std::to_string(p.device.gpus_per_node) + ": " + std::to_string(*r.n_nodes) + ")"
              : "") +
         " (--min-gpus)";
}

// The largest sequence or micro-batch below the current one that the layout `l` fits at, as a lever with the
// setting that applies it ("" when even the smallest does not fit).
std::string fit_lever(const problem& p, const layout& l, fit_axis axis, const flag_spelling& spell) {
  const bool seq = axis == fit_axis::seq;
  try {
    const planned_fit f = plan_max_fit(p, l, axis, seq ? p.training.seq : p.training.micro_batch);
    if (!f.search.largest) return "";
    const std::string n = std::to_string(*f.search.largest),
                      t = typed(spell, seq ? "--seq" : "--micro-batch", n);
    if (t.empty()) return "";
    return std::string(seq ? "a shorter sequence: " : "a smaller micro-batch: ") + axes_string(l) +
           " fits up to " + (seq ? "seq " : "micro-batch ") + n + " (" + t + "; plan --max-fit " +
           to_string(axis) + ")";
  } catch (const bad_input&) {
    return "";
  }
}

}  // namespace

advice advise_search(const problem& p, const search_axes& axes, const cost_model& costs, const suggestion& s,
                     int max_gpus, const flag_spelling& spell) {
  advice a;
  const state_bound& b = s.bound;
  if (b.impossible) {
    a.bound_by = "state";
    a.why = "state alone, " + gib_text(b.per_gpu) + " per GPU at best on " + std::to_string(s.gpus) +
            " GPUs, exceeds the " + gib_text(b.usable) +
            " the GPU leaves after the reserve, so a shorter sequence "
            "or a smaller micro-batch cannot help";
    a.levers.push_back(gpu_lever(p, axes, costs, max_gpus, s.gpus));
    state_levers(p, axes, s.gpus, spell, a.levers);
    return a;
  }
  if (s.evaluated == 0) {  // nothing to weigh: the fixed axes leave no valid layout on this count
    a.bound_by = "layout";
    a.why = "no layout is valid on " + std::to_string(s.gpus) + " GPUs with the axes the command line fixes";
    a.levers.push_back(
        "fix fewer axes (drop --tp, --pp, --cp, --ep), or a GPU count that tp x pp x cp divides");
    a.levers.push_back(gpu_lever(p, axes, costs, max_gpus, s.gpus));
    return a;
  }
  a.bound_by = "activations";
  a.why = "state fits (" + gib_text(b.per_gpu) + " per GPU at best, " + gib_text(b.usable) +
          " usable), but no layout leaves room for its activations and working set";
  const std::string full = typed(spell, "--recompute", "full");
  if (axes.recompute && *axes.recompute != recompute_mode::full && !full.empty())
    a.levers.push_back("full recomputation (" + full + "; the search was held at " +
                       to_string(*axes.recompute) + "): keeps one input per layer");
  if (axes.micro_batch && *axes.micro_batch > 1)
    a.levers.push_back("a smaller micro-batch (--micro-batch held it at " +
                       std::to_string(*axes.micro_batch) + "; activations grow with it)");
  if (const std::string t = axes.cp ? typed(spell, "--cp", std::to_string(*axes.cp * 2)) : ""; !t.empty())
    a.levers.push_back("context parallelism (" + t + "; the search was held at " + std::to_string(*axes.cp) +
                       "): each rank keeps seq / cp of the activations");
  if (s.smallest) {
    problem q = p;
    q.training.micro_batch = s.smallest->micro_batch;
    if (const std::string l = fit_lever(q, s.smallest->where, fit_axis::seq, spell); !l.empty())
      a.levers.push_back(l);
  }
  a.levers.push_back(gpu_lever(p, axes, costs, max_gpus, s.gpus));
  return a;
}

advice advise_plan(const problem& p, const breakdown& b, const flag_spelling& spell) {
  advice a;
  const auto& w = b.worst_stage();
  const layout& l = b.where;
  const std::int64_t usable = w.capacity - p.device.reserve.fixed;
  if (w.state > usable) {
    a.bound_by = "state";
    a.why = "state alone, " + gib_text(w.state) + " on stage " + std::to_string(w.stage) + ", exceeds the " +
            gib_text(usable) +
            " the GPU leaves after the reserve, so a shorter sequence or a smaller "
            "micro-batch cannot help";
    a.levers.push_back(
        "more GPUs or more sharding (--suggest ranks every layout on N GPUs; --min-gpus finds N)");
    layout z3 = l;
    z3.zero = 3;
    if (const std::string t = typed(spell, "--zero", "3"), v = checked(p, z3);
        l.zero < 3 && p.precision.highest_zero() >= 3 && !t.empty() && !v.empty())
      a.levers.push_back("ZeRO-3 (" + t + "; now ZeRO-" + std::to_string(l.zero) +
                         "): parameters and gradients sharded too, " + v);
    search_axes axes;
    axes.offload_optimizer = l.offload_optimizer;
    axes.offload_params = l.offload_params;
    state_levers(p, axes, l.gpus, spell, a.levers);
    return a;
  }
  a.bound_by = "activations";
  a.why = "state, " + gib_text(w.state) + ", fits; activations " + gib_text(w.activations) +
          " and the step's working set " + gib_text(w.terms().peak_extra()) + " do not";
  layout full = l;
  full.recompute = recompute_mode::full;
  if (const std::string t = typed(spell, "--recompute", "full"), v = checked(p, full);
      l.recompute != recompute_mode::full && !t.empty() && !v.empty())
    a.levers.push_back("full recomputation (" + t + "; now " + to_string(l.recompute) + "): " + v);
  if (p.training.micro_batch > 1)
    if (const std::string m = fit_lever(p, l, fit_axis::micro_batch, spell); !m.empty())
      a.levers.push_back(m);
  layout cp2 = l;
  cp2.cp = l.cp * 2;
  if (const std::string t = typed(spell, "--cp", std::to_string(cp2.cp)), v = checked(p, cp2);
      !t.empty() && !v.empty())
    a.levers.push_back("context parallelism (" + t + "; now " + std::to_string(l.cp) +
                       "): each rank keeps seq / cp of the activations, " + v);
  if (const std::string s = fit_lever(p, l, fit_axis::seq, spell); !s.empty()) a.levers.push_back(s);
  a.levers.push_back(
      "more GPUs or another layout (--suggest searches these GPUs; --min-gpus finds the count)");
  return a;
}

}  // namespace headroom
