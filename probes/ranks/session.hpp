// session.hpp: one rank's part of a multi-rank probe, start to finish, over a rank transport
// (rank_transport.hpp): the case and this rank's device (from the caller, rank_host), the NCCL-id exchange
// and the layout's groups (nccl_groups.hpp), the replay of the rank's stage, and the gather of every rank's
// outcome to rank 0, which gets the summary (multi_rank.hpp) and the files to write. The caller (the CLI)
// parses options, opens the device and prints; the session never prints or exits.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "planner/estimate.hpp"
#include "probes/ranks/launch.hpp"
#include "probes/ranks/multi_rank.hpp"
#include "probes/ranks/rank_transport.hpp"
#include "probes/trace/step_trace.hpp"

namespace headroom::probes {

// A rank's failure that carries its own exit status (rank_exit) and one line, for what neither bad_input
// nor device_error says (no usable device).
class rank_failure : public std::runtime_error {
 public:
  rank_failure(int status, const std::string& line) : std::runtime_error(line), exit_status(status) {}
  int exit_status;
};

// What the caller's device made of the rank's stage.
struct stage_replay {
  nlohmann::json record;        // the rank's measurement record; the session adds its "rank" block
  bool out_of_memory = false;   // the replay ran out of memory (the rank's status becomes does_not_fit)
  bool pattern_failed = false;  // blocks did not hold their fill pattern (device_failed)
};

// What a session needs from its caller. Each call may throw bad_input, device_error or rank_failure (any
// other exception is recorded as an internal error): the session records it as this rank's outcome, and
// rank 0 reports it with the rank's number.
class rank_host {
 public:
  virtual ~rank_host() = default;
  // Returns the problem and layout every rank probes (from the command line).
  virtual std::pair<problem, layout> form_case() = 0;
  // Rank 0 only, once the case is formed and before any rank opens its device: throws bad_input for an
  // output rank 0 could not write for layout `l` (a file or directory in the way), so that a refused output
  // costs no rank any work and leaves no file.
  virtual void check_outputs(const layout& l) = 0;
  // Opens this rank's device for `p` (rank `rank` of layout `l`); may set p's capacity to the device's.
  virtual void open_device(problem& p, const layout& l, int rank) = 0;
  // Returns a fresh NCCL unique id as bytes, or nullopt with `why` (no NCCL, no GPU).
  virtual std::optional<std::string> nccl_unique_id(std::string& why) = 0;
  // Joins `groups` in order and returns each one's memory (gpu_backend::join_nccl_groups).
  virtual std::vector<nccl_group_memory> join_nccl_groups(const std::vector<nccl_group_spec>& groups) = 0;
  // Replays `t` (the rank's stage of `p`, `l`) on the device against the planner's `predicted`; `nccl` is
  // what the rank's communicators hold beside it. Returns the record and what went wrong.
  virtual stage_replay replay_stage(const problem& p, const layout& l, const step_trace& t,
                                    const stage_breakdown& predicted,
                                    const std::vector<nccl_group_memory>& nccl) = 0;
  // Closes the device (its communicators and context), before the gather's wait.
  virtual void close_device() = 0;
};

struct session_options {
  bool nccl = false;                     // join the layout's NCCL groups (the CUDA backend)
  std::int64_t dp_bucket_bytes = 0;      // the data-parallel group's first all-reduce, bytes
  std::chrono::milliseconds timeout{0};  // for each exchange between the ranks
};

// How a session ended, and what rank 0 has to report.
struct session_result {
  enum class ending {
    done,              // a rank other than 0: rank 0 has its outcome
    gather_timed_out,  // this rank's outcome did not reach rank 0 (`line` says why)
    no_case,           // rank 0 could not form the case: `line` is the answer for every rank
    summarised,        // rank 0: the summary of every rank
  };
  ending how = ending::done;
  int exit_status = 0;  // rank_exit: this rank's exit status (summarised: the summary's)
  std::string line;     // gather_timed_out: "rank N: ..."; no_case: the rank's error line
  // summarised only:
  problem p;
  layout l;
  rank_summary summary;
  std::vector<std::optional<std::string>> messages;  // every rank's outcome message (nullopt: no answer)
  std::optional<nlohmann::json> own_record;          // rank 0's own measurement record
};

// Returns the transport of this launch: a world of one needs no MPI; otherwise MPI, or nullptr with `why`
// when this build has none.
std::unique_ptr<rank_transport> open_rank_transport(const launch_info& li, std::string& why);

// Whether every rank of a world may start its session, and who says why not.
struct world_verdict {
  bool ok = true;      // every rank passed its checks
  bool speak = false;  // this rank says `line`: the lowest rank that failed (exactly one process speaks)
  std::string line;    // this rank's failure ("bad input: ..."), empty when it passed
};

// Every rank, before its session: checks that `tr`'s world is the one `li` claims (check_world) and runs the
// caller's `check` (options; throws bad_input), then exchanges the verdicts so that every rank learns
// whether all passed. A claim can be wrong on one rank only (variables set by hand), so the rank that
// failed, not rank 0, says why. When the exchange times out, each rank decides alone (a failed rank speaks
// for itself; a rank that passed goes on, and the session's deadlines name the missing rank).
world_verdict agree_on_world(rank_transport& tr, const launch_info& li, const std::function<void()>& check,
                             std::chrono::milliseconds timeout);

// Runs rank li.rank's part of the probe over `tr`: every rank takes part in every exchange whatever failed
// before it, so no rank is left waiting. Once the case is formed, the ranks exchange whether rank 0 formed
// it (and accepted its outputs): when it did not, no rank opens its device and rank 0's line answers for
// every rank. Returns how it ended (summarised on rank 0 once it has formed the case). Throws bad_input,
// before any exchange, when `tr`'s world is not the one `li` claims (check_world).
session_result run_rank_session(rank_transport& tr, const launch_info& li, const session_options& o,
                                rank_host& host);

// Returns the files rank 0 writes for `json_out`, as (path, text) in order: the summary record (to
// `json_out`, "-" for standard output), then, unless "-", the record of each rank that has one
// (rank_record_path). The environment is rank 0's record's, else `fallback_environment`. Empty when
// `json_out` is. Text that is not UTF-8 (a path's bytes) is written with U+FFFD in its place. A rank
// message that is not a rank outcome has no file (summarise_ranks lists that rank as failed).
std::vector<std::pair<std::string, std::string>> session_files(const session_result& r, const launch_info& li,
                                                               const std::string& json_out,
                                                               const nlohmann::json& inputs,
                                                               const nlohmann::json& fallback_environment);

}  // namespace headroom::probes
