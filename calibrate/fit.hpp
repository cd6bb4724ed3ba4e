// fit.hpp: non-negative least squares for a handful of terms, exactly: every subset of the columns is
// solved by its normal equations and the best feasible one kept (Lawson and Hanson's answer, found by
// enumeration, which for three terms is eight 3x3 solves). With the standard error of each coefficient.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace headroom::calibrate {

struct nnls_result {
  std::vector<double> coef;     // one per column, >= 0
  std::vector<double> stderr_;  // one per column; 0 for a coefficient at its bound or an exact fit
  double rss = 0;               // residual sum of squares
  int dof = 0;                  // rows - active columns
};

// Solves min ||X b - y|| subject to b >= 0, rows of X are observations. Columns that are all zero get 0.
// Returns nullopt when no subset is solvable (every column zero or X empty).
std::optional<nnls_result> nnls(const std::vector<std::vector<double>>& x, const std::vector<double>& y);

// Returns the pairs of columns (by index) whose non-zero patterns are proportional (|cosine| > 0.9999):
// terms the data cannot tell apart.
std::vector<std::pair<int, int>> indistinguishable(const std::vector<std::vector<double>>& x);

}  // namespace headroom::calibrate
