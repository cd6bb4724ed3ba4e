// multi_rank.hpp: a probe of every rank of a layout. Each rank (started by mpirun or srun, launch.hpp) sends
// rank 0 one message: its coordinates and its measurement record (headroom.measurement/1.4, which carries
// the rank's placement and its NCCL communicators' memory), or the one line that says why it has none.
// Rank 0 turns the messages into the per-rank table and the summary record (headroom.multi_rank/1): peak
// reserved / allocated / device-used per rank beside the planner's prediction for its stage, the worst rank
// named and compared with the planner's worst stage, the ranks that ran out of memory, failed or never
// answered.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "planner/estimate.hpp"
#include "planner/rank_grid.hpp"
#include "probes/cases/gpu_backend.hpp"
#include "probes/ranks/launch.hpp"

namespace headroom::probes {

// The exit statuses a rank reports in its outcome: the numbers of cli/exit_codes.hpp, which the CLI checks
// against these at compile time.
namespace rank_exit {
inline constexpr int ok = 0, internal = 1, bad_input = 2, does_not_fit = 3, no_device = 4, device_failed = 5;
}

// Returns the bytes of every communicator a rank joined (init + first collective), nullopt when it joined
// none (the sim backend).
std::optional<std::int64_t> nccl_total(const std::vector<nccl_group_memory>& nccl);

// Returns the "rank" block of a rank's record: world rank and size, local rank, launcher, host,
// coordinates, and the NCCL communicators it joined with their memory (empty on the sim backend).
nlohmann::json rank_block(const launch_info& li, const layout& l, const rank_coords& c,
                          const std::vector<nccl_group_memory>& nccl, const std::string& nccl_note);

// One rank's outcome, as sent to rank 0.
struct rank_outcome {
  int rank = 0;
  std::string hostname;
  int stage = 0;
  std::optional<nlohmann::json> record;  // the rank's measurement record
  std::string error;                     // one line: why there is no record
  int exit_status = 0;                   // the rank's own exit status (rank_exit)
};
std::string to_message(const rank_outcome& o);
// Throws bad_input when the message is not a rank outcome.
rank_outcome outcome_from_message(const std::string& text, const std::string& origin);

struct rank_row {
  int rank = 0;
  std::string hostname;
  rank_coords coords;
  int stage = 0;
  bool answered = false;
  std::string error;
  int exit_status = 0;
  std::int64_t predicted_step_peak = 0;  // the planner's step peak of the rank's stage
  std::int64_t requested = 0, allocated = 0, reserved = 0;
  std::optional<std::int64_t> device_used;  // at the reserved peak (GPU only)
  std::optional<std::int64_t> nccl_bytes;   // every communicator's init + first collective (GPU only)
  bool out_of_memory = false;
  std::string oom_where;  // "backward, mb0.layer3.grad.attn.probs, 1.50 GiB"
  // Returns the bytes that decide the rank's fit: device-used at the peak when measured, else reserved.
  std::int64_t footprint() const { return device_used.value_or(reserved); }
};

struct rank_summary {
  std::vector<rank_row> rows;
  std::vector<int> missing;  // ranks that did not answer by the deadline
  std::vector<int> out_of_memory, failed;
  std::optional<int> worst_rank;  // the answering rank with the largest footprint
  int planner_worst_stage = 0;
  std::int64_t planner_worst_step_peak = 0;
  // True when the worst rank's stage is one of the planner's worst stages (the same predicted step peak).
  bool worst_agrees = false;
  // Returns the exit status of the run: device failures, then out of memory, then bad input, else 0.
  int exit_status() const;
};

// Returns the summary of every rank's message (nullopt: the rank did not answer) for layout `b.where`.
rank_summary summarise_ranks(const std::vector<std::optional<std::string>>& messages, const breakdown& b);

// Returns the summary record: schema, launcher, world size, inputs, environment, one row per rank.
nlohmann::json summary_to_json(const rank_summary& s, const launch_info& li, const nlohmann::json& inputs,
                               const nlohmann::json& environment);

// Returns `path` with ".rankN" before its extension ("out.json" -> "out.rank3.json"): a rank's record file.
std::string rank_record_path(const std::string& path, int rank, int world_size);

}  // namespace headroom::probes
