// strength.hpp: how far a calibration (calibration.hpp) can be trusted: the band it puts on the headroom, why
// it has none, and whether its fit is too weak to use at all. plan prints the band beside the headroom and,
// for a weak fit, plans with the default reserve instead and says why (cli/plan_command.cpp); calibrate
// prints the verdict under its residuals (cli/calibrate_command.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "calibration.hpp"

namespace headroom::calibrate {

// Returns the uncertainty of the reserve, and so of the headroom, for a stage whose churning bytes are
// `churn`, whose micro-batch holds `tokens` tokens and whose ledger activations are `activations` bytes, in
// bytes (>= 0):
//   u = sqrt((se_fixed)^2 + (churn se_frag)^2 + (tokens se_tok)^2 + (activations se_act)^2) + |worst residual|
// the fit's standard errors propagated through the terms (taken as independent: the file keeps no
// covariance) plus the worst residual any record left. A band to print beside the headroom, not a
// confidence interval; a prior fixed term adds nothing (fixed_is_prior says so).
double reserve_uncertainty(const calibration& c, std::int64_t churn, std::int64_t tokens,
                           std::int64_t activations);

// Returns why the calibration carries no spread to print beside the headroom ("2 records fit 2 terms: no
// spread"), or "" when reserve_uncertainty can be non-zero (a fitted term has a standard error, or a record
// was left a residual).
std::string no_spread_reason(const calibration& c);

// The rule for a fit too weak to use (docs/calibrating.md, "When a fit is too weak to use"):
//   a term whose standard error exceeds weak_term_stderr of its value, where it carries at least
//   weak_term_share of some record's reserve (a term that moves no record's reserve is harmless however loose);
//   or a record the fit misses by more than weak_residual_share of the reserve it needed and by more than
//   weak_residual_floor bytes (a few MiB off a tiny reserve is not a weak fit).
inline constexpr double weak_term_stderr = 0.5;
inline constexpr double weak_term_share = 0.1;
inline constexpr double weak_residual_share = 0.25;
inline constexpr double weak_residual_floor = 512.0 * 1024 * 1024;

// Returns "" when the calibration's fit is strong enough to use, else why not in one phrase ("the
// activation factor 0.58 +- 0.57 (98% of its value); the record runs/b.json missed by -1.15 GiB (-53% of
// the reserve it needed)"), naming at most the worst term and the worst record.
std::string weakness(const calibration& c);

}  // namespace headroom::calibrate
