// fit.cpp: exact non-negative least squares by subset enumeration (see fit.hpp).
#include "fit.hpp"

#include <cmath>
#include <limits>

namespace headroom::calibrate {

namespace {

// Solves A z = b (n x n, Gaussian elimination with partial pivoting); returns false when singular. `inv`
// receives A^-1 when asked.
bool solve(std::vector<std::vector<double>> a, std::vector<double> b, std::vector<double>& z,
           std::vector<std::vector<double>>* inv) {
  const std::size_t n = b.size();
  std::vector<std::vector<double>> id(n, std::vector<double>(n, 0));
  for (std::size_t i = 0; i < n; ++i) id[i][i] = 1;
  double scale = 0;
  for (const auto& r : a)
    for (double v : r) scale = std::max(scale, std::fabs(v));
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t piv = c;
    for (std::size_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[piv][c])) piv = r;
    if (std::fabs(a[piv][c]) <= 1e-12 * scale || scale == 0) return false;
    std::swap(a[c], a[piv]);
    std::swap(b[c], b[piv]);
    std::swap(id[c], id[piv]);
    for (std::size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (std::size_t k = 0; k < n; ++k) {
        a[r][k] -= f * a[c][k];
        id[r][k] -= f * id[c][k];
      }
      b[r] -= f * b[c];
    }
  }
  z.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    z[i] = b[i] / a[i][i];
    for (std::size_t k = 0; k < n; ++k) id[i][k] /= a[i][i];
  }
  if (inv) *inv = id;
  return true;
}

}  // namespace

std::optional<nnls_result> nnls(const std::vector<std::vector<double>>& x_in, const std::vector<double>& y) {
  if (x_in.empty() || x_in.size() != y.size()) return std::nullopt;
  const std::size_t cols = x_in[0].size();
  if (cols == 0 || cols > 16) return std::nullopt;
  // Columns scaled to a largest magnitude of 1 (bytes, bytes per byte and bytes per token differ by twenty
  // orders in the normal equations otherwise); coefficients and errors are scaled back at the end.
  std::vector<double> scale(cols, 0);
  for (const auto& row : x_in) {
    if (row.size() != cols) return std::nullopt;
    for (std::size_t c = 0; c < cols; ++c) scale[c] = std::max(scale[c], std::fabs(row[c]));
  }
  std::vector<std::vector<double>> x = x_in;
  for (auto& row : x)
    for (std::size_t c = 0; c < cols; ++c) row[c] = scale[c] > 0 ? row[c] / scale[c] : 0;
  auto unscale = [&](nnls_result r) {
    for (std::size_t c = 0; c < cols; ++c)
      if (scale[c] > 0) {
        r.coef[c] /= scale[c];
        r.stderr_[c] /= scale[c];
      }
    return r;
  };
  std::optional<nnls_result> best;
  for (unsigned mask = 1; mask < (1u << cols); ++mask) {
    std::vector<std::size_t> act;
    for (std::size_t c = 0; c < cols; ++c)
      if (mask & (1u << c)) act.push_back(c);
    if (act.size() > x.size()) continue;
    const std::size_t k = act.size();
    std::vector<std::vector<double>> xtx(k, std::vector<double>(k, 0));
    std::vector<double> xty(k, 0);
    for (std::size_t r = 0; r < x.size(); ++r)
      for (std::size_t i = 0; i < k; ++i) {
        xty[i] += x[r][act[i]] * y[r];
        for (std::size_t j = 0; j < k; ++j) xtx[i][j] += x[r][act[i]] * x[r][act[j]];
      }
    std::vector<double> z;
    std::vector<std::vector<double>> inv;
    if (!solve(xtx, xty, z, &inv)) continue;
    bool feasible = true;
    for (double v : z) feasible = feasible && v >= 0;
    if (!feasible) continue;
    nnls_result r;
    r.coef.assign(cols, 0);
    r.stderr_.assign(cols, 0);
    for (std::size_t i = 0; i < k; ++i) r.coef[act[i]] = z[i];
    for (std::size_t row = 0; row < x.size(); ++row) {
      double pred = 0;
      for (std::size_t c = 0; c < cols; ++c) pred += x[row][c] * r.coef[c];
      r.rss += (y[row] - pred) * (y[row] - pred);
    }
    r.dof = static_cast<int>(x.size()) - static_cast<int>(k);
    if (r.dof > 0) {
      const double sigma2 = r.rss / r.dof;
      for (std::size_t i = 0; i < k; ++i) r.stderr_[act[i]] = std::sqrt(std::max(0.0, sigma2 * inv[i][i]));
    }
    // Prefer the smaller residual; at equal residual (within rounding), fewer active terms.
    if (!best || r.rss < best->rss * (1 - 1e-12) - 1e-9) best = r;
  }
  if (best) return unscale(*best);
  if (!best) {
    // Every column zero: the all-zero answer.
    nnls_result r;
    r.coef.assign(cols, 0);
    r.stderr_.assign(cols, 0);
    for (double v : y) r.rss += v * v;
    r.dof = static_cast<int>(x.size());
    bool any = false;
    for (const auto& row : x)
      for (double v : row) any = any || v != 0;
    if (any) return std::nullopt;
    return r;
  }
  return std::nullopt;
}

std::vector<int> dependent_columns(const std::vector<std::vector<double>>& x) {
  const std::size_t cols = x.empty() ? 0 : x[0].size();
  std::vector<int> out(cols, -1);
  auto column = [&](std::size_t c) {
    std::vector<double> v;
    double n = 0;
    for (const auto& r : x) {
      v.push_back(r[c]);
      n += r[c] * r[c];
    }
    n = std::sqrt(n);
    for (auto& e : v) e = n > 0 ? e / n : 0;
    return std::make_pair(v, n > 0);
  };
  auto dot = [](const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
  };
  const double floor = std::sqrt(1 - same_direction_cosine * same_direction_cosine);
  std::vector<std::vector<double>> basis;  // orthonormal, spanning the independent columns so far
  std::vector<std::size_t> kept;           // those columns
  for (std::size_t c = 0; c < cols; ++c) {
    auto [v, nonzero] = column(c);
    if (!nonzero) continue;
    std::vector<double> rest = v;
    for (const auto& q : basis) {
      const double d = dot(q, v);
      for (std::size_t i = 0; i < rest.size(); ++i) rest[i] -= d * q[i];
    }
    const double left = std::sqrt(dot(rest, rest));
    if (left >= floor) {
      for (auto& e : rest) e /= left;
      basis.push_back(rest);
      kept.push_back(c);
      continue;
    }
    double best = -1;
    for (std::size_t k : kept)
      if (const double cs = std::fabs(dot(column(k).first, v)); cs > best) {
        best = cs;
        out[c] = static_cast<int>(k);
      }
  }
  return out;
}

}  // namespace headroom::calibrate
