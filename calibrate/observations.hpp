// observations.hpp: the measurements teams already have (a training log's peak, an nvidia-smi reading, a
// published table) as headroom records. A table of runs (CSV or JSON; docs/calibrating.md) is read into
// rows, each row's problem is turned into a problem and a layout by the caller (the CLI parses plan flags),
// and each becomes a headroom.measurement record of kind "observation" that calibrate, compare and report
// read like any other (probes/records/measurement_record.hpp).
//
// What each kind of figure holds, and so which reserve terms it observes (calibration.hpp):
//   device_used     nvidia-smi's "Memory-Usage" / cudaMemGetInfo's used: the allocator's reserved bytes, the
//                   CUDA context, cuBLAS workspaces and NCCL buffers: every term (fixed 1, churn, tokens).
//   reserved_peak   torch.cuda.max_memory_reserved() (torchtitan's `max_reserved`): the caching allocator's
//                   segments only, no context: fixed 0, churn, tokens.
//   allocated_peak  torch.cuda.max_memory_allocated(): live tensors only, neither context nor the
//                   allocator's cached slack: fixed 0 and fragmentation 0; it speaks only to what the
//                   ledger misses of live tensors (per token, and the activation factor).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/layout.hpp"
#include "probes/records/measurement_record.hpp"

namespace headroom::calibrate {

enum class figure_kind { device_used, reserved_peak, allocated_peak };

// Returns the figure's name as records spell it ("reserved_peak").
const char* figure_name(figure_kind f);
// Returns the figure called `name`, or nullopt.
std::optional<figure_kind> figure_from(std::string_view name);

// Rows beyond this are a table no team keeps by hand: refused rather than read (one record per row).
inline constexpr std::size_t max_observation_rows = 10000;

// One run of the table, as given.
struct observation_row {
  std::size_t row = 0;     // 1-based: the data row (CSV: after the header) or the index in "runs"
  std::string name;        // the record's file name stem; "" -> obs-ROW
  std::string flags;       // the problem as `headroom plan` flags ("--preset llama3-8b --gpus 8 ...")
  nlohmann::json problem;  // or as a problem object (planner/problem_json.hpp) with its "layout"
  figure_kind figure = figure_kind::reserved_peak;
  std::int64_t bytes = 0;  // the figure, converted from value and unit
  std::string as_given;    // "71.3 GiB": the value and unit as the table gave them
  // Half the last digit the value was given to, in bytes ("69.7 GiB": 0.05 GiB; "61234 MiB": 0.5 MiB): the
  // figure lies within bytes +- rounding, which comparisons between rows allow for.
  std::int64_t rounding = 0;
  std::string gpu, driver, cuda_runtime, nccl, software, allocator, source, date;
};

// Returns the rows of a CSV table (RFC 4180 quoting; a header row naming the columns; docs/calibrating.md
// lists them). Throws bad_input naming "origin: row N, column 'C'" and the problem: an unknown or missing
// column, an unknown figure or unit, a value that is not a positive finite number within 16 TiB.
std::vector<observation_row> observations_from_csv(const std::string& text, const std::string& origin);
// Returns the rows of {"runs": [{...}, ...]} with the CSV's columns as keys ("problem" may be a string of
// flags or a problem object with "layout"). Throws bad_input as observations_from_csv.
std::vector<observation_row> observations_from_json(const nlohmann::json& j, const std::string& origin);

// Returns "origin: row N, column 'C'" (column "" -> without it): how every message names a cell.
std::string cell_where(const std::string& origin, std::size_t row, const std::string& column);

// Throws bad_input naming the row's value cell, the figure and the floor when row `r`'s figure is below
// what any rank of the run `p`, `l` holds whatever the kind of figure: the state the planner predicts
// (parameters, gradients, master weights and optimizer state on the GPU; planner/estimate.hpp) of the
// pipeline stage that holds least. Such a figure measured another run, or is another kind of figure. Also
// refuses a figure above the problem's GPU memory (device_spec::capacity), which no kind of figure can pass.
void check_observation_floor(const observation_row& r, const problem& p, const layout& l,
                             const std::string& origin);

// Throws bad_input naming record `r` (an observation record read back, with its case) when its figure is
// below the state its single-stage case holds (the check above, for a record edited or written by hand;
// a pipeline's record holds the worst stage's state, which another stage's figure may be below).
void check_record_floor(const probes::measurement_record& r);

// Throws bad_input naming row `r`'s cell when the GPU it states contradicts itself. The GPU types it names
// (planner/gpu_types.hpp) are the problem's --gpu-type (device_spec::gpu_type) when given, else every type
// the `gpu` cell may be (device_name_may_be); none (an unknown device, no gpu cell): nothing is checked.
//   - the `gpu` cell names a device that cannot be the problem's --gpu-type;
//   - the problem states a device total (`total_from`: the option or field that stated it, "--gpu-mem",
//     "device.capacity_bytes"; "" when the total is the planner's default or the type's own) that is not
//     within device_total_tolerance (planner/gpu_types.hpp) of any named type's capacity;
//   - the row's figure, less its rounding, is above the largest named type's capacity by more than that.
void check_observation_device(const observation_row& r, const problem& p, const std::string& total_from,
                              const std::string& origin);

// Throws bad_input naming the later row's value cell, the earlier row and both figures when two rows of one
// run contradict each other beyond the rounding of their values: rows whose `cases` (one per row, equal for
// runs of one problem and layout: compare.hpp problem_case) are equal and whose environment cells (gpu,
// driver, cuda, nccl, software, allocator) are equal, empty ones included. Within one run an allocated peak
// is at most the reserved peak (the allocator hands out what it reserved) and at most the device's used
// memory, and the reserved peak at most the device's used memory (which holds the allocator's segments).
void check_observations_agree(const std::vector<observation_row>& rows, const std::vector<std::string>& cases,
                              const std::string& origin);

// Returns the observation record (headroom.measurement, backend "observation") of row `r` measured on the
// case `p`, `l`: the figure, where it came from, the environment it was measured in, and the planner's
// prediction for the case's worst stage. `command_line` is the observe invocation that made it.
nlohmann::json observation_record(const observation_row& r, const problem& p, const layout& l,
                                  const std::string& command_line);

}  // namespace headroom::calibrate
