// probe_case.cpp: one case, with cleanup and the free-memory check (see probe_case.hpp).
#include "probes/cases/probe_case.hpp"

#include <algorithm>

#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/units.hpp"

namespace headroom::probes {

allocator_factory policy_factory(const std::string& name, const caching_options& copt) {
  if (name == "raw") return [](device& d) { return make_raw_allocator(d); };
  if (name == "caching")
    return [copt](device& d) -> std::unique_ptr<allocator> {
      return std::make_unique<caching_allocator>(d, copt);
    };
  throw bad_input("allocator", "must be raw or caching on this device, got '" + name + "'");
}

case_result run_case(const step_trace& t, device& dev, const allocator_factory& make, const case_options& o) {
  case_result c;
  c.cleanup.slack = o.cleanup_slack;
  c.cleanup.before = dev.memory();
  const std::int64_t mapped_before = dev.used();
  {
    // The allocator's destructor gives everything back if the replay throws.
    std::unique_ptr<allocator> a = make(dev);
    c.allocator = a->describe();
    replay_options ro;
    ro.record_timeline = true;  // every record carries its timeline (probes/cases/measurement.hpp)
    ro.checker = o.checker;
    ro.truth = o.sample_device ? &dev : nullptr;
    ro.release_live = true;
    c.replayed = replay(t, *a, ro);
    c.pool = a->driver_high_water();
    a->empty_cache();
    if (a->stats().reserved != 0)
      throw device_error("the " + c.allocator + " allocator still holds " + gib_str(a->stats().reserved, 3) +
                         " GiB after every tensor was freed and its cache emptied");
  }
  c.cleanup.after = dev.memory();
  c.cleanup.mapped_after = dev.used() - mapped_before;
  if (!c.cleanup.returned()) {
    const std::int64_t short_by = std::max(c.cleanup.missing(), c.cleanup.mapped_after);
    throw device_error("the device did not return to its starting free memory after the case: " +
                       fixed(to_mib(short_by), 1) + " MiB missing (free " +
                       std::to_string(c.cleanup.before.free) + " bytes before, " +
                       std::to_string(c.cleanup.after.free) + " after)");
  }
  return c;
}

}  // namespace headroom::probes
