// rank_grid.hpp: where each rank of a layout sits. World ranks are laid out in Megatron-LM's default order
// "tp-cp-ep-dp-pp" (tensor-parallel fastest, pipeline slowest: the tp group of a rank is consecutive ranks,
// so it stays inside one node; Megatron-LM core/parallel_state.py, RankGenerator), with ep = 1 (the models
// here have no experts). The groups a rank communicates in are the ranks that differ from it on one axis.
#pragma once

#include <string>
#include <vector>

#include "layout.hpp"

namespace headroom {

enum class grid_axis { tp, cp, dp, pp };
const char* to_string(grid_axis a);

struct rank_coords {
  int rank = 0;
  int tp = 0, cp = 0, dp = 0, pp = 0;  // this rank's index along each axis
  // Returns the index along `a` (writable: the coordinates of a neighbour are this with one index changed).
  int along(grid_axis a) const { return const_cast<rank_coords*>(this)->along(a); }
  int& along(grid_axis a);
};

// Returns the coordinates of world rank `rank` of `l` (0 <= rank < l.gpus). Throws bad_input when the rank
// is out of range or the layout's axes do not multiply to its GPU count.
rank_coords coords_of(const layout& l, int rank);

// Returns the world rank at `c` (the inverse of coords_of).
int rank_at(const layout& l, const rank_coords& c);

// Returns the ranks of `rank`'s group along `a`, in the order of their index along `a` (so the group's own
// rank of `rank` is its coordinate on `a`). A group of size 1 is just the rank.
std::vector<int> group_of(const layout& l, int rank, grid_axis a);

// Returns the size of the layout along `a`.
int axis_size(const layout& l, grid_axis a);

// Returns "tp 1/8, cp 0/1, dp 3/4, pp 2/8" for `c` in `l`.
std::string describe(const layout& l, const rank_coords& c);

}  // namespace headroom
