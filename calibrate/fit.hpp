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

// The cosine above which two columns are taken as one: |cos| > 0.9999, i.e. the part of a column the earlier
// ones leave is under 1.41% of it (sqrt(1 - 0.9999^2)).
inline constexpr double same_direction_cosine = 0.9999;

// Returns, per column (by index), -1 when the data can tell it from the columns before it, or else the index
// of the earlier column it lies closest to (largest |cosine|): a column whose part outside the span of the
// earlier, independent columns is under 1.41% of its length (Gram-Schmidt in column order, each column
// scaled to length 1). An all-zero column is -1 (nothing to tell apart). Earlier columns win: in the
// reserve's order (fixed, fragmentation, per_token) the later term is the one pinned.
std::vector<int> dependent_columns(const std::vector<std::vector<double>>& x);

}  // namespace headroom::calibrate
