// nccl_groups.hpp: the NCCL communicators of a multi-rank probe: which of the layout's groups a rank joins,
// the wire format of the unique-id exchange (every rank sends one message of the same size; the first rank
// of each group fills that group's slot with a fresh id), and the specs each rank joins with, the payload of
// each group's first collective sized by the planner (planner/cost_model.hpp, activation_message_bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "planner/layout.hpp"
#include "planner/rank_grid.hpp"
#include "probes/cases/gpu_backend.hpp"

namespace headroom::probes {

// The axes a rank joins a communicator along, in the order every rank joins them; also the order of the id
// slots in an id message.
inline constexpr grid_axis nccl_axes[] = {grid_axis::tp, grid_axis::cp, grid_axis::dp, grid_axis::pp};
inline constexpr std::size_t nccl_id_bytes = 128;  // NCCL_UNIQUE_ID_BYTES
// The length of every rank's id message, bytes: one readiness byte (1 ready, 0 not), then one id slot of
// nccl_id_bytes per axis of nccl_axes (zero bytes where this rank does not lead that axis's group).
inline constexpr std::size_t nccl_id_message_bytes = 1 + nccl_id_bytes * std::size(nccl_axes);

// True when a rank joins its group along `a`: every group of two ranks or more; in a world of one rank its
// data-parallel group of one, so that a single-GPU run still exercises NCCL and reports a communicator's
// cost.
bool joins_group(grid_axis a, std::size_t group_size, int world_size);

// Makes a fresh NCCL unique id (bytes), or returns nullopt with why.
using nccl_id_maker = std::function<std::optional<std::string>(std::string& why)>;

// Returns rank `rank`'s id message for layout `l` (l.gpus ranks): when `ready`, a fresh id from `make_id`
// in the slot of every group this rank leads (its first rank); the readiness byte is 0 when not `ready` or
// when an id could not be made (then `why` says so).
std::string nccl_id_message(const layout& l, int rank, bool ready, const nccl_id_maker& make_id,
                            std::string& why);

// Returns the ranks whose id message says they are not ready, in rank order.
std::vector<int> unready_ranks(const std::vector<std::string>& messages);

// Returns the payload of the first collective along `a`, bytes: the tensor-parallel all-reduce of one
// layer's output (one micro-batch's activation message), the context-parallel exchange and the pipeline
// send of that message per tensor-parallel rank, and the data-parallel gradient bucket `dp_bucket_bytes`.
std::int64_t first_collective_bytes(const problem& p, const layout& l, grid_axis a,
                                    std::int64_t dp_bucket_bytes);

// Returns the groups rank `rank` joins, in nccl_axes order, each with the id its first rank sent in
// `messages` (every rank's id message, rank order). Throws bad_input when a message is not an id message.
std::vector<nccl_group_spec> nccl_group_specs(const problem& p, const layout& l, int rank,
                                              const std::vector<std::string>& messages,
                                              std::int64_t dp_bucket_bytes);

}  // namespace headroom::probes
