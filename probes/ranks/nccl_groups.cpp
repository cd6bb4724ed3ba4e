// nccl_groups.cpp: the NCCL groups of a multi-rank probe and the id exchange's wire format (see
// nccl_groups.hpp).
#include "probes/ranks/nccl_groups.hpp"

#include "planner/cost_model.hpp"
#include "planner/errors.hpp"

namespace headroom::probes {

bool joins_group(grid_axis a, std::size_t group_size, int world_size) {
  return group_size >= 2 || (world_size == 1 && a == grid_axis::dp);
}

std::string nccl_id_message(const layout& l, int rank, bool ready, const nccl_id_maker& make_id,
                            std::string& why) {
  std::string msg(nccl_id_message_bytes, '\0');
  if (ready) {
    for (std::size_t i = 0; i < std::size(nccl_axes); ++i) {
      const auto group = group_of(l, rank, nccl_axes[i]);
      if (!joins_group(nccl_axes[i], group.size(), l.gpus) || group[0] != rank) continue;
      const auto id = make_id(why);
      if (!id) {
        ready = false;
        break;
      }
      msg.replace(1 + i * nccl_id_bytes, nccl_id_bytes, *id);
    }
  }
  msg[0] = ready ? 1 : 0;
  return msg;
}

std::vector<int> unready_ranks(const std::vector<std::string>& messages) {
  std::vector<int> out;
  for (std::size_t r = 0; r < messages.size(); ++r)
    if (messages[r].empty() || messages[r][0] == 0) out.push_back(static_cast<int>(r));
  return out;
}

std::int64_t first_collective_bytes(const problem& p, const layout& l, grid_axis a,
                                    std::int64_t dp_bucket_bytes) {
  switch (a) {
    case grid_axis::tp:
      return static_cast<std::int64_t>(activation_message_bytes(p, l));
    case grid_axis::cp:
    case grid_axis::pp:
      return static_cast<std::int64_t>(activation_message_bytes(p, l, true));
    case grid_axis::dp:
      return dp_bucket_bytes;
  }
  return static_cast<std::int64_t>(activation_message_bytes(p, l));
}

std::vector<nccl_group_spec> nccl_group_specs(const problem& p, const layout& l, int rank,
                                              const std::vector<std::string>& messages,
                                              std::int64_t dp_bucket_bytes) {
  const rank_coords coords = coords_of(l, rank);
  std::vector<nccl_group_spec> specs;
  for (std::size_t i = 0; i < std::size(nccl_axes); ++i) {
    const auto group = group_of(l, rank, nccl_axes[i]);
    if (!joins_group(nccl_axes[i], group.size(), l.gpus)) continue;
    const auto leader = static_cast<std::size_t>(group[0]);
    if (leader >= messages.size() || messages[leader].size() != nccl_id_message_bytes)
      throw bad_input("ranks", "rank " + std::to_string(leader) + " sent no NCCL id message");
    nccl_group_spec g;
    g.name = to_string(nccl_axes[i]);
    g.size = static_cast<int>(group.size());
    g.rank_in_group = coords.along(nccl_axes[i]);
    g.unique_id = messages[leader].substr(1 + i * nccl_id_bytes, nccl_id_bytes);
    g.first_bytes = first_collective_bytes(p, l, nccl_axes[i], dp_bucket_bytes);
    g.point_to_point = nccl_axes[i] == grid_axis::pp;
    specs.push_back(g);
  }
  return specs;
}

}  // namespace headroom::probes
