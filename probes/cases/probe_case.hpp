// probe_case.hpp: one case on one device, start to finish: a fresh allocator, the replay (with fill and
// verify when a checker is given), every live tensor freed and every cached byte returned, and then the
// check that the device is back at the free memory it had before the case, so the next case (after an
// out-of-memory too) starts from the same device. `headroom probe replay` and `probe max-fit` run cases
// through it, on the sim device, a CUDA device, or a fault-injecting fake in the tests.
#pragma once

#include <functional>
#include <memory>

#include "probes/allocators/allocator.hpp"
#include "probes/allocators/caching_allocator.hpp"
#include "probes/trace/replay.hpp"

namespace headroom::probes {

using allocator_factory = std::function<std::unique_ptr<allocator>(device&)>;

// Returns the factory of the policies any device takes: "raw" or "caching" (with `copt`). Throws bad_input
// for another name ("driver-pool" is the CUDA backend's own, gpu_backend::make_allocator).
allocator_factory policy_factory(const std::string& name, const caching_options& copt);

// The device's free memory around a case. `slack` is what may be missing without failing the check: 0 on a
// device only this process uses; on a real GPU, the driver's own bookkeeping may move by a page.
struct cleanup_check {
  memory_info before, after;
  std::int64_t mapped_after = 0;  // bytes the device still had mapped through its own interface
  std::int64_t slack = 0;
  // Returns the bytes the device is short of its starting free memory (0 when it came back).
  std::int64_t missing() const { return before.free > after.free ? before.free - after.free : 0; }
  bool returned() const { return mapped_after == 0 && missing() <= slack; }
};

struct case_result {
  replay_result replayed;
  std::string allocator;  // allocator::describe()
  cleanup_check cleanup;
  std::optional<pool_high_water> pool;  // the driver pool's marks, read before the allocator went away
};

struct case_options {
  bool record_timeline = false;
  block_checker* checker = nullptr;
  bool sample_device = false;  // record the driver's device-used at the reserved peak
  std::int64_t cleanup_slack = 0;
};

// Runs `t` on `dev` through the allocator `make` builds. Returns the result; throws device_error when a
// device call fails (after giving back everything the case held) or when the device did not return to its
// starting free memory ("... MiB missing"), and bad_input for a malformed trace.
case_result run_case(const step_trace& t, device& dev, const allocator_factory& make, const case_options& o);

}  // namespace headroom::probes
