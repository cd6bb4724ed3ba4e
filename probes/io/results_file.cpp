// results_file.cpp: atomic, non-clobbering, all-or-nothing result files (see results_file.hpp).
#include "probes/io/results_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>

#include "planner/errors.hpp"
#include "planner/format.hpp"

namespace headroom::probes {

namespace {

namespace fs = std::filesystem;

// How much of a path an error line shows: long enough to recognise, short enough that the cause after it
// stays on the 280-character line (cli/main.cpp).
constexpr std::size_t shown_path = 120;

// Returns `path` quoted and sanitised for an error line.
std::string in_quotes(const std::string& path) {
  return "'" + printable(path, shown_path) + "'";
}

// Returns what identifies the file `path` names, however it is spelt: its device and inode when it exists
// (so hard links and symbolic links to one file are one file), else its absolute path with every existing
// directory resolved ("./x", "sub/../x" and "/abs/x" are one file).
std::string identity(const std::string& path) {
  if (path == "-") return "-";
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0)
    return "inode " + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec) return "path " + fs::path(path).lexically_normal().string();
  const fs::path c = fs::weakly_canonical(p, ec);
  return "path " + (ec ? p.lexically_normal() : c).string();
}

// A temporary file beside a target: a short name of its own in the target's directory, so any name the
// user may legally give (up to NAME_MAX) works, and the rename that puts it in place stays on one file
// system.
struct temporary {
  int dir = -1;      // the target's directory, opened
  std::string name;  // the temporary's name in it
  std::string target_name;
};

// Opens `path`'s directory and creates a fresh temporary there (mode 0666 less the umask, as a plain
// create would give). Throws output_error naming `path` and the cause.
temporary make_temporary(const std::string& path) {
  const fs::path p(path);
  temporary t;
  t.target_name = p.filename().string();
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  t.dir = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (t.dir < 0) throw output_error(in_quotes(path) + ": cannot create it (" + std::strerror(errno) + ")");
  const long name_max = ::fpathconf(t.dir, _PC_NAME_MAX);
  if (name_max > 0 && t.target_name.size() > static_cast<std::size_t>(name_max)) {
    ::close(t.dir);
    throw output_error(in_quotes(path) + ": cannot create it (the file name is longer than " +
                       std::to_string(name_max) + " bytes)");
  }
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    char name[16];
    std::snprintf(name, sizeof name, ".hr%08x", static_cast<unsigned>(rd()));
    const int fd = ::openat(t.dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      ::close(fd);
      t.name = name;
      return t;
    }
    if (errno != EEXIST) break;
  }
  const int err = errno;
  ::close(t.dir);
  throw output_error(in_quotes(path) + ": cannot create it (" + std::strerror(err) + ")");
}

// Writes what `w` writes into the temporary `t`; returns the errno of the failure, or 0.
int fill(const temporary& t, const output_set::writer& w) {
  const int fd = ::openat(t.dir, t.name.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return errno;
  int err = 0;
  try {
    fd_writer buf(fd);
    std::ostream out(&buf);
    w(out);
    out.flush();
    err = buf.error() ? buf.error() : (out ? 0 : EIO);
  } catch (...) {
    ::close(fd);  // a writer that throws (a JSON dump of bytes that are not UTF-8) leaks no descriptor
    throw;
  }
  if (::close(fd) != 0 && !err) err = errno;
  return err;
}

}  // namespace

fd_writer::fd_writer(int fd) : m_fd(fd) {
  setp(m_buf, m_buf + sizeof m_buf);
}

fd_writer::int_type fd_writer::overflow(int_type c) {
  if (!drain()) return traits_type::eof();
  if (!traits_type::eq_int_type(c, traits_type::eof())) {
    *pptr() = traits_type::to_char_type(c);
    pbump(1);
  }
  return traits_type::not_eof(c);
}

int fd_writer::sync() {
  return drain() ? 0 : -1;
}

bool fd_writer::drain() {
  const char* p = pbase();
  while (p < pptr() && !m_error) {
    const ssize_t n = ::write(m_fd, p, static_cast<std::size_t>(pptr() - p));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      m_error = n < 0 ? errno : EIO;
    else
      p += n;
  }
  setp(m_buf, m_buf + sizeof m_buf);
  return !m_error;
}

void check_output_target(const std::string& path, bool overwrite) {
  if (path == "-") return;
  std::error_code ec;
  const auto status = fs::symlink_status(path, ec);
  if (!ec && fs::exists(status)) {
    if (!fs::is_regular_file(status))
      throw bad_input("output",
                      in_quotes(path) + " exists and is not a regular file; refusing to replace it");
    if (!overwrite)
      throw bad_input("output", in_quotes(path) + " exists; refusing to overwrite it (--force to replace)");
  }
}

namespace {

// Returns the message refusing output `out`, which is the input `in` (however spelt).
std::string is_an_input(const std::string& out, const std::string& in) {
  return in_quotes(out) + (out == in ? " is" : " is the same file as " + in_quotes(in) + ",") +
         " one of the command's inputs: refusing to write over it, even with --force";
}

}  // namespace

void output_set::input(const std::string& path) {
  if (path.empty() || path == "-") return;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;  // nothing there to destroy
  const std::string id = "inode " + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  for (const auto& [out, out_id] : expected_)
    if (out_id == id) throw bad_input("output", is_an_input(out, path));
  inputs_.emplace_back(path, id);
}

void output_set::expect(const std::string& path) {
  if (path.empty()) return;
  if (path != "-") {
    const std::string id = identity(path);
    for (const auto& [in, in_id] : inputs_)
      if (in_id == id) throw bad_input("output", is_an_input(path, in));
  }
  if (path == "-" && !standard_output_)
    throw bad_input("output", "'-' (standard output) is not available for this output");
  const std::string id = identity(path);
  for (const auto& [seen, seen_id] : expected_)
    if (seen_id == id)
      throw bad_input("output", path == "-"    ? "only one output can go to standard output ('-')"
                                : seen == path ? in_quotes(path) + " is named for two outputs"
                                               : in_quotes(seen) + " and " + in_quotes(path) +
                                                     " name one file, for two outputs");
  check_output_target(path, overwrite_);
  expected_.emplace_back(path, id);
}

void output_set::add(const std::string& path, writer w) {
  if (path.empty()) return;
  const bool known =
      std::any_of(expected_.begin(), expected_.end(), [&](const auto& e) { return e.first == path; });
  if (!known) expect(path);
  if (std::any_of(pending_.begin(), pending_.end(), [&](const pending& p) { return p.path == path; }))
    throw bad_input("output", path == "-" ? "only one output can go to standard output ('-')"
                                          : in_quotes(path) + " is named for two outputs");
  pending_.push_back({path, std::move(w)});
}

void output_set::add(const std::string& path, std::string text) {
  add(path, [text = std::move(text)](std::ostream& out) { out << text; });
}

bool output_set::to_stdout() const {
  return std::any_of(expected_.begin(), expected_.end(), [](const auto& e) { return e.first == "-"; });
}

void output_set::commit() {
  // The targets may have appeared since expect(): check again before anything is written.
  for (const auto& p : pending_) check_output_target(p.path, overwrite_);
  std::vector<temporary> temps;
  auto drop_temps = [&](std::size_t from) {
    for (std::size_t i = from; i < temps.size(); ++i) ::unlinkat(temps[i].dir, temps[i].name.c_str(), 0);
    for (auto& t : temps) ::close(t.dir);
    temps.clear();
  };
  try {
    for (const auto& p : pending_) {
      if (p.path == "-") continue;
      temps.push_back(make_temporary(p.path));
      if (const int err = fill(temps.back(), p.write))
        throw output_error(in_quotes(p.path) + ": writing failed (" + std::strerror(err) + ")");
    }
  } catch (...) {
    drop_temps(0);
    throw;
  }
  // Every temporary is complete: put them in place, then write standard output.
  std::size_t next = 0;
  std::string written;
  for (const auto& p : pending_) {
    if (p.path == "-") continue;
    const auto& t = temps[next];
    if (::renameat(t.dir, t.name.c_str(), t.dir, t.target_name.c_str()) != 0) {
      const int err = errno;
      drop_temps(next);
      throw output_error(in_quotes(p.path) + ": putting it in place failed (" + std::strerror(err) + ")" +
                         (written.empty() ? "" : " (already written: " + written + ")"));
    }
    written += (written.empty() ? "" : ", ") + in_quotes(p.path);
    ++next;
  }
  for (auto& t : temps) ::close(t.dir);
  temps.clear();
  for (const auto& p : pending_)
    if (p.path == "-") {
      errno = 0;
      p.write(*standard_output_);
      standard_output_->flush();
      if (!*standard_output_)
        throw output_error(std::string("standard output: writing failed (") +
                           std::strerror(errno ? errno : EIO) + ")");
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
