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

// The state-moving levers that need no search: optimizer offload and the 8-bit recipe by the state bound on
// `gpus` GPUs, a higher ZeRO stage when the command line held it lower.
void state_levers(const problem& p, const search_axes& axes, int gpus, std::vector<std::string>& out) {
  if (!axes.offload_optimizer) {
    const state_bound b = bound_for(p, gpus, true, axes.offload_params);
    out.push_back("optimizer offload (--offload-optimizer; --suggest --allow-offload searches it): state at "
                  "best " + gib_text(b.per_gpu) + " per GPU against " + gib_text(b.usable) + " usable" +
                  (b.impossible ? ", not enough alone" : ", which the state bound allows"));
  }
  if (p.precision.name != eight_bit) {
    problem q = p;
    q.precision = load_recipe(eight_bit);
    const state_bound b = bound_for(q, gpus, axes.offload_optimizer, axes.offload_params);
    out.push_back(std::string("an 8-bit optimizer (--recipe ") + eight_bit + "; --suggest --recipes " +
                  p.precision.name + "," + eight_bit + " searches both): state at best " + gib_text(b.per_gpu) +
                  " per GPU" + (b.impossible ? ", not enough alone" : ", which the state bound allows"));
  }
  if (axes.zero && *axes.zero < 3 && p.precision.highest_zero() >= 3)
    out.push_back("ZeRO-3 (--zero held the search at ZeRO-" + std::to_string(*axes.zero) +
                  "): parameters and gradients are sharded too");
}

// The smallest GPU count with a fitting layout, as a lever (searching on `gpus` now).
std::string gpu_lever(const problem& p, const search_axes& axes, const cost_model& costs, int max_gpus, int gpus) {
  const min_gpus_result r = min_gpus(layout_search(p, axes, costs), max_gpus);
  if (!r.n_min)
    return "more GPUs alone do not help: no count up to " + std::to_string(max_gpus) +
           " has a fitting layout with these settings";
  return std::string(*r.n_min > gpus ? "more GPUs" : "another GPU count") +
         ": the smallest count with a fitting layout is " + std::to_string(*r.n_min) +
         (r.n_pow2 && *r.n_pow2 != *r.n_min ? " (power of two: " + std::to_string(*r.n_pow2) + ")" : "") +
         " (--min-gpus)";
}

// The longest sequence the layout `l` fits at, as a lever ("" when even the shortest step does not fit).
std::string sequence_lever(const problem& p, const layout& l) {
  try {
    const planned_fit f = plan_max_fit(p, l, fit_axis::seq, p.training.seq);
    if (!f.search.largest) return "";
    return "a shorter sequence: " + axes_string(l) + " fits up to seq " + std::to_string(*f.search.largest) +
           " (plan --max-fit seq)";
  } catch (const bad_input&) {
    return "";
  }
}

}  // namespace

advice advise_search(const problem& p, const search_axes& axes, const cost_model& costs, const suggestion& s,
                     int max_gpus) {
  advice a;
  const state_bound& b = s.bound;
  if (b.impossible) {
    a.bound_by = "state";
    a.why = "state alone, " + gib_text(b.per_gpu) + " per GPU at best on " + std::to_string(s.gpus) +
            " GPUs, exceeds the " + gib_text(b.usable) + " the GPU leaves after the reserve, so a shorter sequence "
            "or a smaller micro-batch cannot help";
    a.levers.push_back(gpu_lever(p, axes, costs, max_gpus, s.gpus));
    state_levers(p, axes, s.gpus, a.levers);
    return a;
  }
  if (s.evaluated == 0) {  // nothing to weigh: the fixed axes leave no valid layout on this count
    a.bound_by = "layout";
    a.why = "no layout is valid on " + std::to_string(s.gpus) + " GPUs with the axes the command line fixes";
    a.levers.push_back("fix fewer axes (drop --tp, --pp, --cp, --ep), or a GPU count that tp x pp x cp divides");
    a.levers.push_back(gpu_lever(p, axes, costs, max_gpus, s.gpus));
    return a;
  }
  a.bound_by = "activations";
  a.why = "state fits (" + gib_text(b.per_gpu) + " per GPU at best, " + gib_text(b.usable) +
          " usable), but no layout leaves room for its activations and working set";
  if (axes.recompute && *axes.recompute != recompute_mode::full)
    a.levers.push_back("full recomputation (--recompute held the search at " + std::string(to_string(*axes.recompute)) +
                       "): keeps one input per layer");
  if (axes.micro_batch && *axes.micro_batch > 1)
    a.levers.push_back("a smaller micro-batch (--micro-batch held it at " + std::to_string(*axes.micro_batch) +
                       "; activations grow with it)");
  if (axes.cp)
    a.levers.push_back("context parallelism (--cp held it at " + std::to_string(*axes.cp) +
                       "): each rank keeps seq / cp of the activations");
  if (s.smallest) {
    problem q = p;
    q.training.micro_batch = s.smallest->micro_batch;
    if (const std::string l = sequence_lever(q, s.smallest->where); !l.empty()) a.levers.push_back(l);
  }
  a.levers.push_back(gpu_lever(p, axes, costs, max_gpus, s.gpus));
  return a;
}

advice advise_plan(const problem& p, const breakdown& b) {
  advice a;
  const auto& w = b.worst_stage();
  const layout& l = b.where;
  const std::int64_t usable = w.capacity - p.device.reserve.fixed;
  if (w.state > usable) {
    a.bound_by = "state";
    a.why = "state alone, " + gib_text(w.state) + " on stage " + std::to_string(w.stage) + ", exceeds the " +
            gib_text(usable) + " the GPU leaves after the reserve, so a shorter sequence or a smaller "
            "micro-batch cannot help";
    a.levers.push_back("more GPUs or more sharding (--suggest ranks every layout on N GPUs; --min-gpus finds N)");
    search_axes axes;
    axes.zero = l.zero;
    axes.offload_optimizer = l.offload_optimizer;
    axes.offload_params = l.offload_params;
    state_levers(p, axes, l.gpus, a.levers);
    return a;
  }
  a.bound_by = "activations";
  a.why = "state, " + gib_text(w.state) + ", fits; activations " + gib_text(w.activations) + " and the step's working set " +
          gib_text(w.terms().peak_extra()) + " do not";
  if (l.recompute != recompute_mode::full)
    a.levers.push_back(std::string("full recomputation (--recompute full; now ") + to_string(l.recompute) + ")");
  if (p.training.micro_batch > 1)
    a.levers.push_back("a smaller micro-batch (now " + std::to_string(p.training.micro_batch) +
                       "; plan --max-fit micro-batch finds the largest)");
  a.levers.push_back("context parallelism (--cp; now " + std::to_string(l.cp) +
                     "): each rank keeps seq / cp of the activations");
  if (const std::string s = sequence_lever(p, l); !s.empty()) a.levers.push_back(s);
  a.levers.push_back("more GPUs or another layout (--suggest)");
  return a;
}

}  // namespace headroom
