// results_file.cpp: atomic, non-clobbering result files (see results_file.hpp).
#include "results_file.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "planner/errors.hpp"

namespace headroom::probes {

void write_new_file(const std::string& path, const std::string& text, bool overwrite) {
  namespace fs = std::filesystem;
  if (!overwrite && fs::exists(path))
    throw bad_input("output", "'" + path + "' exists; refusing to overwrite it (--force to replace)");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw bad_input("output", "cannot write '" + path + "' (cannot create " + tmp + ")");
    out << text;
    out.flush();
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      throw std::runtime_error("writing " + tmp + " failed");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw std::runtime_error("renaming " + tmp + " to " + path + " failed: " + ec.message());
  }
}

}  // namespace headroom::probes
