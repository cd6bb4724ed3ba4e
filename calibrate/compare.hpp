// compare.hpp: regression checks between two sets of records of the same problems from two environments (a
// new driver, CUDA, torch or NCCL against a baseline): records are matched by their whole case (the problem
// and layout blocks of planner/problem_json.hpp, less the planner's own allowances), the environments are
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
  std::vector<moved_figure> moved;  // every figure that changed at all
  // Records with no partner of their case on the other side, not compared: the case's label, and where the
  // other side holds a record of the same kind, the fields in which the nearest one differs ("nearest in the
  // new set differs in training.micro_batch 1 -> 2").
  std::vector<std::string> only_baseline, only_new;
  // The fields in which the first record of only_baseline differs from the nearest record of its kind with no
  // partner in the new set, baseline -> new ("training.micro_batch 1 -> 2"); "" when there is none.
  std::string nearest_difference;
  // Records paired although their keys differ: the only unmatched record of its kind on each side (two
  // snapshots of one problem from two machines carry different file names), or the one record of a case
  // left on each side once the others of that case were paired by file name. One line each.
  std::vector<std::string> paired;
  int compared = 0;  // pairs of records compared (0: nothing was compared)
  // Each set's environments ("GPU NVIDIA H100, driver 550.54.15, CUDA 12.4, torch 2.4.0, NCCL 2.21.5"), one
  // per distinct environment in the set, and what differs between the two ("driver: 550.54.15 -> 560.28.03").
  std::vector<std::string> baseline_environments, new_environments, environment_changes;
  int regressions = 0;  // figures that grew beyond the tolerance
  int improved = 0;     // figures that shrank beyond the tolerance (listed, not a failure)
};

// Returns the run `p` on `l` as JSON: the problem (problem_to_json) less what is the planner's allowance
// rather than the run (device.reserve, device.reserve_bytes, device.fixed_overheads_bytes) and the
// provenance notes (model.source, recipe.source), and the whole layout (layout_to_json). Two runs of equal
// problem_case hold the same memory in one environment: what compare pairs, and what observe checks rows
// against each other by.
nlohmann::json problem_case(const problem& p, const layout& l);

// Returns the case of record `r` as JSON, what pairs it with a record of the other side: its kind and
// backend; its problem (planner/problem_json.hpp: model, recipe, training with micro-batch, sequence,
// attention, global batch, pipeline split; device capacity and GPUs per node) less what is the planner's
// allowance rather than the run (device.reserve, device.reserve_bytes, device.fixed_overheads_bytes) and the
// provenance notes (model.source, recipe.source); its whole layout (layout_to_json: every axis, ZeRO,
// recompute, offload, ...); a probe's stage, allocator and rank; an overheads probe's module loading; an
// observation's kind of figure; a snapshot's file name when no case is attached (not its directory, which
// differs between two machines' copies). Everything else that changes the memory of a case is in those
// blocks, so two records of different micro-batch or sequence are never one case.
nlohmann::json case_of(const probes::measurement_record& r);

// Returns the label of record `r`'s case, for a line of output: kind, backend, model, layout, sequence and
// micro-batch, stage, allocator, rank, figure. Two cases may share a label; compare() then adds the fields
// that tell them apart.
std::string case_key(const probes::measurement_record& r);

// Returns the environment record `r` states, one line ("not stated" for each part it does not give).
std::string environment_of(const probes::measurement_record& r);

// Compares two record sets. A record pairs with the record of its case (case_of) on the other side. Several
// records of one case on a side (repeated runs, a set compared with itself) pair by file name; what is left
// pairs when it is one record on each side. Two or more left on one side facing any on the other cannot be
// paired without guessing: refused (bad_input), naming two of them. Records with no partner are listed in
// only_baseline / only_new and not compared.
comparison compare(const std::vector<probes::measurement_record>& baseline,
                   const std::vector<probes::measurement_record>& fresh, const tolerance& tol);

}  // namespace headroom::calibrate
