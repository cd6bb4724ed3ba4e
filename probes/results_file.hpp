// results_file.hpp: writing result files so that a reader never sees half of one and nothing is silently
// overwritten: the text goes to a temporary file beside the target and is renamed over it.
#pragma once

#include <stdexcept>
#include <string>

namespace headroom::probes {

// An output that could not be written: the machine's problem (disk full, permissions), not the input's.
class output_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Writes `text` to `path` atomically. Throws bad_input("output", ...) when `path` exists and `overwrite` is
// false, or exists and is not a regular file (a directory or device is never replaced), and output_error
// naming the file and the cause when it cannot be written (the temporary file is removed).
void write_new_file(const std::string& path, const std::string& text, bool overwrite);

}  // namespace headroom::probes
