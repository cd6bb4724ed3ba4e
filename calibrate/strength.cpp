// strength.cpp: a calibration's band, why it has none, and the weak-fit verdict (see strength.hpp).
#include "strength.hpp"

#include <cmath>

#include "planner/format.hpp"

namespace headroom::calibrate {

std::string no_spread_reason(const calibration& c) {
  int fitted = c.activation.fitted ? 1 : 0;
  bool spread = c.worst_residual != 0 || (c.activation.fitted && c.activation.stderr_ > 0);
  for (const auto& t : c.terms) {
    fitted += t.fitted ? 1 : 0;
    spread = spread || (t.fitted && t.stderr_ > 0);
  }
  if (spread) return "";
  const auto n = c.records.size();
  if (static_cast<int>(n) <= fitted)
    return std::to_string(n) + (n == 1 ? " record fits " : " records fit ") + std::to_string(fitted) +
           (fitted == 1 ? " term" : " terms") + ": no spread (give more records than terms)";
  return "every record is fitted exactly: no spread";
}

double reserve_uncertainty(const calibration& c, std::int64_t churn, std::int64_t tokens,
                           std::int64_t activations) {
  const double parts[] = {c.terms[0].fitted ? c.terms[0].stderr_ : 0.0,
                          static_cast<double>(churn) * c.terms[1].stderr_,
                          static_cast<double>(tokens) * c.terms[2].stderr_,
                          static_cast<double>(activations) * c.activation.stderr_};
  double ss = 0;
  for (double v : parts) ss += v * v;
  return std::sqrt(ss) + std::fabs(c.worst_residual);
}

std::string weakness(const calibration& c) {
  // The terms as (value, standard error, the input of a record it multiplies), activations last.
  struct term {
    std::string name;
    double value, se;
    bool fitted;
  };
  std::vector<term> terms;
  for (int t = 0; t < term_count; ++t)
    terms.push_back({term_name(t), c.terms[t].value, c.terms[t].stderr_, c.terms[t].fitted});
  terms.push_back({"activations", c.activation.value, c.activation.stderr_, c.activation.fitted});
  auto input = [](const observation& o, std::size_t t) { return t < o.x.size() ? o.x[t] : o.activations; };
  std::string term_why, record_why;
  double worst_term = 0, worst_record = 0;
  for (std::size_t t = 0; t < terms.size(); ++t) {
    const auto& tm = terms[t];
    if (!tm.fitted || tm.value == 0 || tm.se <= weak_term_stderr * std::fabs(tm.value)) continue;
    double share = 0;  // the most of any record's reserve the term carries
    for (const auto& o : c.records)
      if (o.y > 0) share = std::max(share, std::fabs(tm.value * input(o, t)) / o.y);
    const double rel = tm.se / std::fabs(tm.value);
    if (share < weak_term_share || rel <= worst_term) continue;
    worst_term = rel;
    auto shown = [&](double v) {  // the fixed term in GiB, as calibrate prints it; the others as numbers
      return t == 0 ? gib_str(static_cast<std::int64_t>(v), 2) + " GiB" : eng(v);
    };
    term_why = "the " + tm.name + " term " + shown(tm.value) + " +- " + shown(tm.se) + " (" +
               trim(100 * rel, 0) + "% of its value, carrying up to " + trim(100 * share, 0) +
               "% of a record's reserve)";
  }
  for (const auto& o : c.records) {
    const double r = std::fabs(o.residual);
    if (o.y == 0 || r <= weak_residual_floor || r <= weak_residual_share * std::fabs(o.y)) continue;
    const double rel = r / std::fabs(o.y);
    if (rel <= worst_record) continue;
    worst_record = rel;
    record_why = "the fit misses " + printable(o.origin, 80) + " by " + gib_str(static_cast<std::int64_t>(o.residual), 2) +
                 " GiB (" + (o.residual > 0 ? "+" : "-") + trim(100 * rel, 0) + "% of the reserve it needed)";
  }
  if (term_why.empty() || record_why.empty()) return term_why + record_why;
  return term_why + "; " + record_why;
}

}  // namespace headroom::calibrate
