// max_fit.cpp: the largest value that fits, on the device and by the planner (see max_fit.hpp).
#include "probes/cases/max_fit.hpp"

#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "planner/format.hpp"
#include "probes/trace/step_trace.hpp"

namespace headroom::probes {


max_fit_result max_fit(const problem& p, const layout& l, device& dev, const max_fit_options& o) {
  validate(p, l);
  max_fit_result r;
  r.axis = o.axis;
  r.step = fit_step(l, o.axis);
  const std::int64_t offset = fit_offset(p, l, o.axis);
  r.limit = o.limit ? o.limit : default_fit_limit(o.axis);
  r.current = fit_value(p, o.axis);
  if (r.limit < r.step || r.limit > (std::int64_t{1} << 40))
    throw bad_input("max-fit-limit", "must be between " + std::to_string(r.step) + " (one step of " +
                                         to_string(o.axis) + ") and 2^40, got " + std::to_string(r.limit));

  r.predicted_verdict = search_largest(r.step, r.limit, [&](std::int64_t v) {
    std::string why;
    const auto b = plan_at(with_fit_value(p, o.axis, v), l, why);
    if (!b) return fit_trial{v, false, why};
    return fit_trial{v, b->fits(),
                     "decisive total " + gib_str(b->worst_stage().decisive_total(), 1) + " GiB"};
  }, offset);
  r.predicted_peak = search_largest(r.step, r.limit, [&](std::int64_t v) {
    std::string why;
    const auto b = plan_at(with_fit_value(p, o.axis, v), l, why);
    if (!b) return fit_trial{v, false, why};
    std::int64_t peak = 0;
    for (const auto& s : b->stages) peak = std::max(peak, s.step_peak);
    return fit_trial{v, peak <= p.device.capacity, "step peak " + gib_str(peak, 1) + " GiB"};
  }, offset);

  r.replayed = search_largest(r.step, r.limit, [&](std::int64_t v) {
    const problem pv = with_fit_value(p, o.axis, v);
    std::string why;
    const auto b = plan_at(pv, l, why);
    if (!b) return fit_trial{v, false, why};
    const int stage = o.stage ? *o.stage : b->worst;
    if (stage < 0 || stage >= l.pp)
      throw bad_input("stage", "must be between 0 and " + std::to_string(l.pp - 1));
    const stage_breakdown& st = b->stages[static_cast<std::size_t>(stage)];
    if (st.persistent > dev.capacity())
      return fit_trial{v, false, "persistent state " + gib_str(st.persistent, 1) + " GiB exceeds the device"};
    const step_trace t = build_trace(pv, b->where, stage);
    std::unique_ptr<block_checker> checker = o.make_checker ? o.make_checker() : nullptr;
    case_options co;
    co.checker = checker.get();
    co.cleanup_slack = o.cleanup_slack;
    const case_result c = run_case(t, dev, o.make_allocator, co);
    r.allocator = c.allocator;
    if (c.replayed.verified && !c.replayed.verified->ok()) {
      const auto bad = c.replayed.verified->first_mismatch;
      throw device_error(std::string("block verification failed at ") + to_string(o.axis) + " " +
                         std::to_string(v) + ": " + std::to_string(c.replayed.verified->mismatched_words) +
                         " words did not hold their pattern, first in tensor '" +
                         (bad ? t.tensors[static_cast<std::size_t>(*bad)].name : std::string("?")) + "'");
    }
    if (c.replayed.oom_event) {
      const auto& e = t.events[*c.replayed.oom_event];
      return fit_trial{v, false,
                       "out of memory at event " + std::to_string(*c.replayed.oom_event) + " (" +
                           to_string(e.when) + ", " + t.tensors[static_cast<std::size_t>(e.tensor)].name +
                           ")"};
    }
    return fit_trial{v, true, "peak reserved " + gib_str(c.replayed.reserved.bytes, 2) + " GiB"};
  }, offset);
  return r;
}

}  // namespace headroom::probes
