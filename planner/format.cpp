// format.cpp: number formatting for the CLI and --explain (see format.hpp).
#include "format.hpp"

#include <cmath>
#include <cstdio>

#include "units.hpp"

namespace headroom {

std::string fixed(double x, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  std::string s = buf;
  if (s == "-0.0" || s == "-0" || s == "-0.00" || s == "-0.000") s = s.substr(1);
  return s;
}

std::string fixed_width(double x, int width, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%*.*f", width, decimals, x);
  return buf;
}

std::string gib_str(std::int64_t bytes, int decimals) {
  return fixed(to_gib(bytes), decimals);
}

std::string mib_str(std::int64_t bytes, int decimals) {
  return fixed(to_mib(bytes), decimals);
}

std::string gib_cell(std::int64_t bytes, int width, int decimals) {
  return fixed_width(to_gib(bytes), width, decimals);
}

std::string trim(double x, int decimals) {
  std::string s = fixed(x, decimals);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

std::string eng(double x) {
  if (x == 0 || !std::isfinite(x)) return trim(x, 3);
  const double ax = std::fabs(x);
  if (ax < 1e4) return trim(x, 3);
  int e = static_cast<int>(std::floor(std::log10(ax)));
  e -= e % 3;
  double m = x / std::pow(10.0, e);
  std::string ms = trim(m, std::max(0, 3 - static_cast<int>(std::floor(std::log10(std::fabs(m))))));
  return ms + "e" + std::to_string(e);
}

}  // namespace headroom
