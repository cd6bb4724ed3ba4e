// compare.hpp: regression checks between two sets of records of the same problems from two environments (a
// new driver, CUDA, torch or NCCL against a baseline): records are matched by case, the environments are
// named with what changed between them, and every watched figure that moved is listed with old, new, change
// and the tolerance it was judged by. Watched: the reserved peak, the segments (created over the capture and
// held at the peak), fragmentation at the reserved peak, the context and NCCL cost (device used - reserved
// where a record holds both; an overheads record's measured layers), an observation's published figure.
#pragma once

#include <string>
#include <vector>

#include "probes/records/measurement_record.hpp"

namespace headroom::calibrate {

// The gate. A figure moved beyond it when its change exceeds the bound of its unit.
struct tolerance {
  double fraction = 0.02;         // a byte figure moved by more than this fraction...
  std::int64_t bytes = 64 << 20;  // ...and by more than this many bytes (the larger bound applies)
  double fragmentation = 0.02;    // fragmentation moved by more than this (absolute, 0-1)
  double segments = 0.02;         // a segment count moved by more than this fraction of the baseline's
                                  // (so, with a handful of segments, by one)
};

// The unit of a watched figure, which decides its tolerance.
enum class figure_unit { bytes, fraction, count };

struct moved_figure {
  std::string key, figure;
  double old_value = 0, new_value = 0;
  figure_unit unit = figure_unit::bytes;
  bool bytes = true;     // unit == bytes (kept for readers that ask only this)
  bool exceeds = false;  // beyond the tolerance
  bool worse = false;    // grew (every watched figure is better smaller): beyond the tolerance, a regression
  double allowed = 0;    // the change the tolerance allowed, in the figure's unit
};

struct comparison {
  std::vector<moved_figure> moved;                   // every figure that changed at all
  std::vector<std::string> only_baseline, only_new;  // case keys present on one side
  // Records paired although their keys differ: the only unmatched record of its kind on each side (two
  // snapshots of one problem from two machines carry different file names). One line each.
  std::vector<std::string> paired;
  // Each set's environments ("GPU NVIDIA H100, driver 550.54.15, CUDA 12.4, torch 2.4.0, NCCL 2.21.5"), one
  // per distinct environment in the set, and what differs between the two ("driver: 550.54.15 -> 560.28.03").
  std::vector<std::string> baseline_environments, new_environments, environment_changes;
  int regressions = 0;  // figures that grew beyond the tolerance
  int improved = 0;     // figures that shrank beyond the tolerance (listed, not a failure)
};

// Returns the key that matches records of the same case: kind, backend, model, layout, stage, allocator
// (and the overheads probe's module loading, an observation's kind of figure, a snapshot's file name when
// no case is attached).
std::string case_key(const probes::measurement_record& r);

// Returns the environment record `r` states, one line ("not stated" for each part it does not give).
std::string environment_of(const probes::measurement_record& r);

comparison compare(const std::vector<probes::measurement_record>& baseline,
                   const std::vector<probes::measurement_record>& fresh, const tolerance& tol);

}  // namespace headroom::calibrate
