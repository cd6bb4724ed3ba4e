// max_fit.cpp: the largest value that fits, by the planner (see max_fit.hpp).
#include "planner/max_fit.hpp"

#include <numeric>

#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/schedule.hpp"

namespace headroom {

fit_axis fit_axis_from(const std::string& name) {
  if (name == "micro-batch") return fit_axis::micro_batch;
  if (name == "seq") return fit_axis::seq;
  if (name == "layers") return fit_axis::layers;
  throw bad_input("max-fit", "must be micro-batch, seq or layers, got '" + printable(name, 40) + "'");
}

const char* to_string(fit_axis a) {
  switch (a) {
    case fit_axis::micro_batch:
      return "micro-batch";
    case fit_axis::seq:
      return "seq";
    case fit_axis::layers:
      return "layers";
  }
  return "?";
}

std::int64_t fit_step(const layout& l, fit_axis a) {
  switch (a) {
    case fit_axis::micro_batch:
      return 1;
    case fit_axis::layers:
      return static_cast<std::int64_t>(l.pp) * l.vpp;
    case fit_axis::seq:
      return std::lcm<std::int64_t>(256, static_cast<std::int64_t>(l.cp) * (l.sp() ? l.tp : 1));
  }
  return 1;
}

std::int64_t fit_offset(const problem& p, const layout& l, fit_axis a) {
  if (a != fit_axis::layers) return 0;
  const auto& s = p.training.split;
  if (!s.layers.empty() || s.first_stage || s.last_stage)
    throw bad_input("max-fit", "layers: --pp-layout or --first/--last-stage-layers pin the layers of each stage; "
                               "drop them to search the layer count");
  if (l.vpp <= 1) return 0;
  return (s.embedding_as_layer ? 1 : 0) + (s.loss_as_layer ? 1 : 0);
}

std::int64_t fit_value(const problem& p, fit_axis a) {
  switch (a) {
    case fit_axis::micro_batch:
      return p.training.micro_batch;
    case fit_axis::seq:
      return p.training.seq;
    case fit_axis::layers:
      return p.model.layers;
  }
  return 0;
}

problem with_fit_value(problem p, fit_axis a, std::int64_t value) {
  switch (a) {
    case fit_axis::micro_batch:
      p.training.micro_batch = value;
      p.training.global_batch = std::max(p.training.global_batch, value);
      break;
    case fit_axis::seq:
      p.training.seq = value;  // the position table stays as it is, as with `plan --seq`
      break;
    case fit_axis::layers:
      if (p.model.stated_params)
        *p.model.stated_params = detail::checked_mul(*p.model.stated_params / p.model.layers, value, "layers");
      p.model.layers = value;
      break;
  }
  return p;
}

std::int64_t default_fit_limit(fit_axis a) {
  switch (a) {
    case fit_axis::micro_batch:
      return 4096;
    case fit_axis::seq:
      return std::int64_t{4} << 20;
    case fit_axis::layers:
      return 4096;
  }
  return 1;
}

fit_search search_largest(std::int64_t step, std::int64_t limit, const std::function<fit_trial(std::int64_t)>& trial,
                          std::int64_t offset) {
  fit_search s;
  auto run = [&](std::int64_t k) {  // k steps
    s.trials.push_back(trial(k * step - offset));
    return s.trials.back().fits;
  };
  const std::int64_t kmax = limit / step;
  if (kmax < 1 || !run(1)) return s;
  std::int64_t good = 1, bad = 0;  // bad == 0: no miss seen yet
  while (bad == 0) {
    if (good == kmax) {
      s.reached_limit = true;
      s.largest = good * step - offset;
      return s;
    }
    const std::int64_t next = good > kmax / 2 ? kmax : good * 2;
    if (run(next))
      good = next;
    else
      bad = next;
  }
  while (bad - good > 1) {
    const std::int64_t mid = good + (bad - good) / 2;
    if (run(mid))
      good = mid;
    else
      bad = mid;
  }
  s.largest = good * step - offset;
  return s;
}

namespace {

// Returns `p` at `value` of the axis for layout `l`. A micro-batch keeps the micro-batches per step: the
// global batch grows with it, so every value meets the batch rule and only the micro-batch changes.
problem trial_problem(const problem& p, const layout& l, fit_axis a, std::int64_t value, std::int64_t per_step) {
  problem q = with_fit_value(p, a, value);
  if (a == fit_axis::micro_batch)
    q.training.global_batch = detail::checked_mul(detail::checked_mul(value, l.dp(), "micro-batch"), per_step,
                                                  "micro-batch");
  return q;
}

}  // namespace

std::optional<breakdown> plan_at(const problem& p, const layout& l, std::string& why) {
  try {
    return estimate(p, l);
  } catch (const bad_input& e) {
    why = e.what();
    return std::nullopt;
  }
}

planned_fit plan_max_fit(const problem& p, const layout& l, fit_axis axis, std::int64_t limit) {
  validate(p, l);
  planned_fit r;
  r.axis = axis;
  r.step = fit_step(l, axis);
  const std::int64_t offset = fit_offset(p, l, axis);
  r.limit = limit ? limit : default_fit_limit(axis);
  r.current = fit_value(p, axis);
  if (r.limit < r.step || r.limit > (std::int64_t{1} << 40))
    throw bad_input("max-fit-limit", "must be between " + std::to_string(r.step) + " (one step of " +
                                         to_string(axis) + ") and 2^40, got " + std::to_string(r.limit));
  const std::int64_t per_step = microbatches_per_step(p, l);
  r.search = search_largest(r.step, r.limit, [&](std::int64_t v) {
    std::string why;
    const auto b = plan_at(trial_problem(p, l, axis, v, per_step), l, why);
    if (!b) return fit_trial{v, false, why};
    return fit_trial{v, b->fits(), "decisive total " + gib_str(b->worst_stage().decisive_total(), 1) + " GiB"};
  }, offset);
  std::string why;
  if (r.search.largest) r.at_largest = plan_at(trial_problem(p, l, axis, *r.search.largest, per_step), l, why);
  if (r.search.reached_limit) return r;
  const std::int64_t next = r.search.largest ? *r.search.largest + r.step : r.step - offset;
  r.at_next = plan_at(trial_problem(p, l, axis, next, per_step), l, r.next_error);
  if (!r.at_next || !r.at_largest) return r;
  // The term that grew most across the edge, on the stage that decides at the next value.
  const auto& a = r.at_largest->stages[static_cast<std::size_t>(r.at_next->worst)];
  const auto& b = r.at_next->worst_stage();
  const struct {
    const char* name;
    std::int64_t before, after;
  } terms[] = {{"state", a.state, b.state},
               {"activations", a.activations, b.activations},
               {"reserve", a.reserve, b.reserve},
               {"backward working set", a.working_set, b.working_set},
               {"output phase", a.output_phase, b.output_phase}};
  for (const auto& t : terms)
    if (t.after - t.before > r.breaking_growth) {
      r.breaking_term = t.name;
      r.breaking_growth = t.after - t.before;
    }
  return r;
}

}  // namespace headroom
