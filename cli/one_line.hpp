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

// Returns `s` with the folders of its paths written ".../" (first path first) until it fits `max_len`, or
// with every path so shortened: a file's name stays, so a long checkout folder costs the line its folders,
// not its cause or its fix. A path is a word holding '/' (words end at a space, ':' or quote).
inline std::string without_long_folders(std::string s, std::size_t max_len) {
  for (std::size_t at = 0; s.size() > max_len && at < s.size();) {
    const std::size_t start = s.find_first_not_of(" :\"'", at);
    if (start == std::string::npos) break;
    std::size_t end = s.find_first_of(" :\"'", start);
    if (end == std::string::npos) end = s.size();
    const std::size_t slash = s.rfind('/', end - 1);
    if (slash != std::string::npos && slash >= start && slash - start > 3) {
      s.replace(start, slash - start, "...");
      end = start + 3 + (end - slash);
    }
    at = end;
  }
  return s;
}

// Returns `s` as one line of at most max_error_line characters: control characters are escaped ("\n",
// "\x1b"); a line too long first loses its paths' folders (without_long_folders), then is cut in the middle
// so the cause at the end of the line stays (planner/format.hpp's printable).
inline std::string one_line(const std::string& s) {
  return printable(without_long_folders(s, max_error_line), max_error_line);
}

}  // namespace headroom::cli
