// results_file.cpp: atomic, non-clobbering, all-or-nothing result files (see results_file.hpp).
#include "probes/io/results_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "planner/errors.hpp"

namespace headroom::probes {

void check_output_target(const std::string& path, bool overwrite) {
  namespace fs = std::filesystem;
  if (path == "-") return;
  std::error_code ec;
  const auto status = fs::symlink_status(path, ec);
  if (!ec && fs::exists(status)) {
    if (!fs::is_regular_file(status))
      throw bad_input("output", "'" + path + "' exists and is not a regular file; refusing to replace it");
    if (!overwrite)
      throw bad_input("output", "'" + path + "' exists; refusing to overwrite it (--force to replace)");
  }
}

void output_set::expect(const std::string& path) {
  if (path.empty()) return;
  if (path == "-" && !standard_output_)
    throw bad_input("output", "'-' (standard output) is not available for this output");
  if (std::find(expected_.begin(), expected_.end(), path) != expected_.end())
    throw bad_input("output", path == "-" ? "only one output can go to standard output ('-')"
                                          : "'" + path + "' is named for two outputs");
  check_output_target(path, overwrite_);
  expected_.push_back(path);
}

void output_set::add(const std::string& path, writer w) {
  if (path.empty()) return;
  if (std::find(expected_.begin(), expected_.end(), path) == expected_.end()) expect(path);
  pending_.push_back({path, std::move(w)});
}

void output_set::add(const std::string& path, std::string text) {
  add(path, [text = std::move(text)](std::ostream& out) { out << text; });
}

bool output_set::to_stdout() const {
  return std::find(expected_.begin(), expected_.end(), "-") != expected_.end();
}

void output_set::commit() {
  namespace fs = std::filesystem;
  // The targets may have appeared since expect(): check again before anything is written.
  for (const auto& p : pending_) check_output_target(p.path, overwrite_);
  std::vector<std::string> temps;
  auto remove_temps = [&] {
    for (const auto& t : temps) std::remove(t.c_str());
  };
  for (const auto& p : pending_) {
    if (p.path == "-") continue;
    const std::string tmp = p.path + ".tmp." + std::to_string(::getpid());
    temps.push_back(tmp);
    auto fail = [&](const std::string& what) {
      remove_temps();
      throw output_error("'" + p.path + "': " + what);
    };
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(std::string("cannot create it (") + std::strerror(errno) + ")");
    p.write(out);
    out.flush();
    if (!out) {
      const int err = errno;
      out.close();
      fail(std::string("writing failed (") + std::strerror(err) + ")");
    }
    out.close();
    if (!out) fail(std::string("closing failed (") + std::strerror(errno) + ")");
  }
  // Every temporary is complete: put them in place, then write standard output.
  std::size_t next = 0;
  std::vector<std::string> written;
  for (const auto& p : pending_) {
    if (p.path == "-") continue;
    std::error_code ec;
    fs::rename(temps[next], p.path, ec);
    if (ec) {
      const std::string tmp = temps[next];
      temps.erase(temps.begin(), temps.begin() + static_cast<std::ptrdiff_t>(next));
      remove_temps();
      std::string done;
      for (const auto& w : written) done += (done.empty() ? "" : ", ") + w;
      throw output_error("'" + p.path + "': renaming " + tmp + " over it failed: " + ec.message() +
                         (done.empty() ? "" : " (already written: " + done + ")"));
    }
    written.push_back(p.path);
    ++next;
  }
  for (const auto& p : pending_)
    if (p.path == "-") {
      p.write(*standard_output_);
      standard_output_->flush();
    }
  pending_.clear();
}

void write_new_file(const std::string& path, const std::string& text, bool overwrite,
                    std::ostream* standard_output) {
  output_set s(overwrite, standard_output);
  s.add(path, text);
  s.commit();
}

}  // namespace headroom::probes
