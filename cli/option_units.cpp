// option_units.cpp: memory and sequence units on the command line (option_units.hpp).
#include "option_units.hpp"

#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace headroom::cli {

namespace {

// Splits "80GiB" into 80 and "gib" (lower case); the number is what strtod reads.
bool split(const std::string& text, double& value, std::string& unit) {
  const char* begin = text.c_str();
  char* end = nullptr;
  value = std::strtod(begin, &end);
  if (end == begin) return false;
  unit.clear();
  for (const char* c = end; *c; ++c) {
    if (std::isspace(static_cast<unsigned char>(*c))) continue;
    unit.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(*c))));
  }
  return true;
}

std::string decimal(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

std::string gib_from_text(const std::string& text) {
  double v = 0;
  std::string unit;
  if (!split(text, v, unit) || unit.empty()) return text;  // a plain number: GiB; CLI11 says what else is wrong
  struct factor {
    const char* unit;
    double bytes;
  };
  static const factor factors[] = {{"b", 1},      {"kb", 1e3},          {"mb", 1e6},          {"gb", 1e9},
                                   {"tb", 1e12},  {"kib", 1024.0},      {"mib", 1048576.0},   {"gib", 1073741824.0},
                                   {"tib", 1099511627776.0}, {"k", 1024.0}, {"m", 1048576.0}, {"g", 1073741824.0},
                                   {"t", 1099511627776.0}};
  for (const auto& f : factors)
    if (unit == f.unit) return decimal(v * f.bytes / 1073741824.0);
  throw CLI::ValidationError("'" + text.substr(0, 40) +
                             "': unknown unit (GB = 10^9 bytes, GiB or G = 2^30, also MB, MiB, TB, TiB)");
}

std::string count_from_text(const std::string& text) {
  double v = 0;
  std::string unit;
  if (!split(text, v, unit) || unit.empty()) return text;
  if (unit == "k" && v >= 0 && v <= 1e9 && v == static_cast<double>(static_cast<long long>(v)))
    return std::to_string(static_cast<long long>(v) * 1024);
  throw CLI::ValidationError("'" + text.substr(0, 40) + "': a count, or thousands as 8k (x 1024)");
}

}  // namespace headroom::cli
