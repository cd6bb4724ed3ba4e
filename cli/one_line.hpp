// one_line.hpp: the one rule every line `headroom` writes to stderr follows (cli/main.cpp's catch, the
// multi-rank path of cli/multi_rank_probe.cpp): one line, at most 280 characters, so a launch script reads
// exactly one line per error whatever the input held (a path with a newline, a 1 MB argument).
#pragma once

#include <cstddef>
#include <string>

#include "planner/format.hpp"

namespace headroom::cli {

// The longest error line, characters (bytes).
inline constexpr std::size_t max_error_line = 280;

// Returns `s` as one line of at most max_error_line characters: control characters are escaped ("\n",
// "\x1b"), and a long value is cut in the middle so the cause at the end of the line stays
// (planner/format.hpp's printable).
inline std::string one_line(const std::string& s) {
  return printable(s, max_error_line);
}

}  // namespace headroom::cli
