// rank_grid.cpp: Megatron's rank order (tp fastest, then cp, dp, pp) and the groups it implies.
#include "rank_grid.hpp"

#include "errors.hpp"

namespace headroom {

const char* to_string(grid_axis a) {
  switch (a) {
    case grid_axis::tp:
      return "tp";
    case grid_axis::cp:
      return "cp";
    case grid_axis::dp:
      return "dp";
    case grid_axis::pp:
      return "pp";
  }
  return "?";
}

int& rank_coords::along(grid_axis a) {
  switch (a) {
    case grid_axis::tp:
      return tp;
    case grid_axis::cp:
      return cp;
    case grid_axis::dp:
      return dp;
    case grid_axis::pp:
      return pp;
  }
  return pp;  // unreachable: every axis is named above
}

int axis_size(const layout& l, grid_axis a) {
  switch (a) {
    case grid_axis::tp:
      return l.tp;
    case grid_axis::cp:
      return l.cp;
    case grid_axis::dp:
      return l.dp();
    case grid_axis::pp:
      return l.pp;
  }
  return 1;
}

rank_coords coords_of(const layout& l, int rank) {
  if (l.tp < 1 || l.cp < 1 || l.pp < 1 || l.gpus < 1 || l.dp() < 1 ||
      static_cast<long long>(l.tp) * l.cp * l.pp * l.dp() != l.gpus)
    throw bad_input("layout", "tp x cp x pp x dp must equal the GPU count (" + std::to_string(l.gpus) + ")");
  if (rank < 0 || rank >= l.gpus)
    throw bad_input("rank",
                    std::to_string(rank) + " is outside the layout's " + std::to_string(l.gpus) + " ranks");
  rank_coords c;
  c.rank = rank;
  int r = rank;
  c.tp = r % l.tp;
  r /= l.tp;
  c.cp = r % l.cp;
  r /= l.cp;
  c.dp = r % l.dp();
  r /= l.dp();
  c.pp = r;
  return c;
}

int rank_at(const layout& l, const rank_coords& c) {
  return c.tp + l.tp * (c.cp + l.cp * (c.dp + l.dp() * c.pp));
}

std::vector<int> group_of(const layout& l, int rank, grid_axis a) {
  const rank_coords me = coords_of(l, rank);
  std::vector<int> g;
  for (int i = 0; i < axis_size(l, a); ++i) {
    rank_coords c = me;
    c.along(a) = i;
    g.push_back(rank_at(l, c));
  }
  return g;
}

std::string describe(const layout& l, const rank_coords& c) {
  std::string s;
  for (grid_axis a : {grid_axis::tp, grid_axis::cp, grid_axis::dp, grid_axis::pp})
    s += (s.empty() ? "" : ", ") + std::string(to_string(a)) + " " + std::to_string(c.along(a)) + "/" +
         std::to_string(axis_size(l, a));
  return s;
}

}  // namespace headroom
