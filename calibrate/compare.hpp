// compare.hpp: regression checks between two sets of records (a new driver, CUDA or NCCL against a
// baseline): records are matched by case, and every figure that moved is listed with old, new and change.
#pragma once

#include <string>
#include <vector>

#include "probes/records/measurement_record.hpp"

namespace headroom::calibrate {

struct tolerance {
  double fraction = 0.02;         // a byte figure moved by more than this fraction...
  std::int64_t bytes = 64 << 20;  // ...and by more than this many bytes (the larger bound applies)
  double fragmentation = 0.02;    // fragmentation moved by more than this (absolute, 0-1)
};

struct moved_figure {
  std::string key, figure;
  double old_value = 0, new_value = 0;
  bool bytes = true;     // a byte figure (else a fraction)
  bool exceeds = false;  // beyond the tolerance
};

struct comparison {
  std::vector<moved_figure> moved;                   // every figure that changed at all
  std::vector<std::string> only_baseline, only_new;  // case keys present on one side
  int regressions = 0;                               // moved figures beyond the tolerance
};

// Returns the key that matches records of the same case: kind, backend, model, layout, stage, allocator
// (and the overheads probe's module loading).
std::string case_key(const probes::measurement_record& r);

comparison compare(const std::vector<probes::measurement_record>& baseline,
                   const std::vector<probes::measurement_record>& fresh, const tolerance& tol);

}  // namespace headroom::calibrate
