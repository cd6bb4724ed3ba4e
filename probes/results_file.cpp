// results_file.cpp: atomic, non-clobbering result files (see results_file.hpp).
#include "results_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "planner/errors.hpp"

namespace headroom::probes {

void write_new_file(const std::string& path, const std::string& text, bool overwrite) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::symlink_status(path, ec);
  if (!ec && fs::exists(status)) {
    if (!fs::is_regular_file(status))
      throw bad_input("output", "'" + path + "' exists and is not a regular file; refusing to replace it");
    if (!overwrite)
      throw bad_input("output", "'" + path + "' exists; refusing to overwrite it (--force to replace)");
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  auto fail = [&](const std::string& what) {
    std::remove(tmp.c_str());
    throw output_error("'" + path + "': " + what);
  };
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(std::string("cannot create it (") + std::strerror(errno) + ")");
    out << text;
    out.flush();
    if (!out) {
      const int err = errno;
      out.close();
      fail(std::string("writing failed (") + std::strerror(err) + ")");
    }
    out.close();
    if (!out) fail(std::string("closing failed (") + std::strerror(errno) + ")");
  }
  fs::rename(tmp, path, ec);
  if (ec) fail("renaming " + tmp + " over it failed: " + ec.message());
}

}  // namespace headroom::probes
