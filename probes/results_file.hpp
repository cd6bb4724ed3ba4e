// results_file.hpp: writing result files so that a reader never sees half of one and nothing is silently
// overwritten: the text goes to a temporary file beside the target and is renamed over it.
#pragma once

#include <string>

namespace headroom::probes {

// Writes `text` to `path` atomically. Throws bad_input("output", ...) when `path` exists and `overwrite` is
// false, and std::runtime_error when the file cannot be written (the temporary file is removed).
void write_new_file(const std::string& path, const std::string& text, bool overwrite);

}  // namespace headroom::probes
