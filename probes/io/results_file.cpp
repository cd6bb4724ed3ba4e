// results_file.cpp: atomic, non-clobbering, all-or-nothing result files, whose temporaries a SIGTERM,
// SIGINT or SIGHUP removes (see results_file.hpp).
#include "probes/io/results_file.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>

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

// The cleanup signals: each removes the temporaries, then ends the process (remove_temporaries_on_signals).
constexpr int cleanup_signals[] = {SIGTERM, SIGINT, SIGHUP};

// A temporary's name: ".hr<pid>-<n>-<8 hex digits>", at most 3 + 10 + 1 + 10 + 1 + 8 characters.
constexpr std::size_t temp_name_size = 40;

// The temporaries that exist now, where a signal handler can find them: a fixed table in static storage,
// since a handler may not allocate or lock. A slot is claimed (free -> filling), given its directory and
// name, then published (held); the handler reads only held slots, and calls only unlinkat on them. A slot
// is published before its file is created and freed once its file is renamed or removed, so no temporary
// exists unpublished: a name the handler removes too early names no file yet (its random part makes it one
// no other file has), and one it removes too late names none any more.
enum slot_state : int { slot_free, slot_filling, slot_held };
struct registered_temporary {
  std::atomic<int> state{slot_free};
  int dir = -1;
  char name[temp_name_size] = {};
};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads the slots' states");
constexpr std::size_t registry_slots = 1024;
registered_temporary registry[registry_slots];

// Removes every published temporary, then ends the process by `sig`'s default action.
void on_cleanup_signal(int sig) {
  for (auto& slot : registry)
    if (slot.state.load(std::memory_order_acquire) == slot_held) ::unlinkat(slot.dir, slot.name, 0);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  sigset_t only;
  ::sigemptyset(&only);
  ::sigaddset(&only, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
  ::raise(sig);
}

// Holds the cleanup signals in this thread while it lives; one that arrives meanwhile is delivered (and
// handled) when it ends.
class cleanup_signals_held {
 public:
  cleanup_signals_held() {
    sigset_t set;
    ::sigemptyset(&set);
    for (const int sig : cleanup_signals) ::sigaddset(&set, sig);
    ::pthread_sigmask(SIG_BLOCK, &set, &m_old);
  }
  cleanup_signals_held(const cleanup_signals_held&) = delete;
  cleanup_signals_held& operator=(const cleanup_signals_held&) = delete;
  ~cleanup_signals_held() { ::pthread_sigmask(SIG_SETMASK, &m_old, nullptr); }

 private:
  sigset_t m_old;
};

// A temporary file beside a target: a short name of its own in the target's directory, so any name the
// user may legally give (up to NAME_MAX) works, and the rename that puts it in place stays on one file
// system.
struct temporary {
  int dir = -1;      // the target's directory, opened
  std::string name;  // the temporary's name in it
  std::string target_name;
  registered_temporary* slot = nullptr;  // where the signal handler finds it; null when the table was full
};

// Publishes `name` in `dir` for the signal handler; returns its slot, or null when every slot is taken.
registered_temporary* publish(int dir, const char* name) {
  for (auto& slot : registry) {
    int expected = slot_free;
    if (!slot.state.compare_exchange_strong(expected, slot_filling, std::memory_order_acquire)) continue;
    slot.dir = dir;
    std::snprintf(slot.name, sizeof slot.name, "%s", name);
    slot.state.store(slot_held, std::memory_order_release);
    return &slot;
  }
  return nullptr;
}

void unpublish(registered_temporary*& slot) {
  if (slot) slot->state.store(slot_free, std::memory_order_release);
  slot = nullptr;
}

// Removes `t`'s file when `remove`, then forgets it (its slot, its directory).
void release(temporary& t, bool remove) {
  if (remove) ::unlinkat(t.dir, t.name.c_str(), 0);
  unpublish(t.slot);
  if (t.dir >= 0) ::close(t.dir);
  t.dir = -1;
}

// Opens `path`'s directory and creates a fresh temporary there (mode 0666 less the umask, as a plain
// create would give), published for the signal handler. When the table is full, `held` is engaged: the
// cleanup signals wait until the commit ends, when every temporary is renamed or removed. Throws
// output_error naming `path` and the cause.
temporary make_temporary(const std::string& path, std::optional<cleanup_signals_held>& held) {
  static std::atomic<unsigned> counter{0};
  const fs::path p(path);
  temporary t;
  t.target_name = p.filename().string();
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  t.dir = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (t.dir < 0) throw output_error(in_quotes(path) + ": cannot create it (" + std::strerror(errno) + ")");
  const long name_max = ::fpathconf(t.dir, _PC_NAME_MAX);
  if (name_max > 0 && t.target_name.size() > static_cast<std::size_t>(name_max)) {
    release(t, false);
    throw output_error(in_quotes(path) + ": cannot create it (the file name is longer than " +
                       std::to_string(name_max) + " bytes)");
  }
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    char name[temp_name_size];
    std::snprintf(name, sizeof name, ".hr%ld-%u-%08x", static_cast<long>(::getpid()), counter++,
                  static_cast<unsigned>(rd()));
    t.slot = publish(t.dir, name);
    if (!t.slot && !held) held.emplace();
    const int fd = ::openat(t.dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      ::close(fd);
      t.name = name;
      return t;
    }
    const int err = errno;
    unpublish(t.slot);
    if (err != EEXIST) {
      release(t, false);
      throw output_error(in_quotes(path) + ": cannot create it (" + std::strerror(err) + ")");
    }
  }
  release(t, false);
  throw output_error(in_quotes(path) + ": cannot create it (" + std::strerror(EEXIST) + ")");
}

// Puts `t` in place of its target: replacing it when `overwrite`, else only when there is none (an atomic
// check where the file system has RENAME_NOREPLACE). Returns 0 or the errno of the failure.
int put_in_place(const temporary& t, bool overwrite) {
#ifdef RENAME_NOREPLACE
  if (!overwrite) {
    if (::renameat2(t.dir, t.name.c_str(), t.dir, t.target_name.c_str(), RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS) return errno;
    // A file system without RENAME_NOREPLACE: the check of commit()'s start stands.
  }
#else
  (void)overwrite;
#endif
  return ::renameat(t.dir, t.name.c_str(), t.dir, t.target_name.c_str()) == 0 ? 0 : errno;
}

// Test-only (results_file.hpp, tests/output_signals_test.cpp): sleeps HEADROOM_TEST_PAUSE_BEFORE_COMMIT_MS
// milliseconds, at most 600000, when it is set.
void pause_for_tests() {
  const char* v = std::getenv("HEADROOM_TEST_PAUSE_BEFORE_COMMIT_MS");
  if (!v || !*v) return;
  char* end = nullptr;
  const long ms = std::strtol(v, &end, 10);
  if (*end || ms <= 0) return;
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(ms, 600000L)));
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
  // Engaged when the signal handler's table is full (make_temporary); released last, once every temporary is
  // renamed or removed.
  std::optional<cleanup_signals_held> held;
  std::vector<temporary> temps;
  auto drop_temps = [&](std::size_t from) {
    for (std::size_t i = 0; i < temps.size(); ++i) release(temps[i], i >= from);
    temps.clear();
  };
  try {
    for (const auto& p : pending_) {
      if (p.path == "-") continue;
      temps.push_back(make_temporary(p.path, held));
      if (const int err = fill(temps.back(), p.write))
        throw output_error(in_quotes(p.path) + ": writing failed (" + std::strerror(err) + ")");
    }
    if (!temps.empty()) pause_for_tests();
  } catch (...) {
    drop_temps(0);
    throw;
  }
  // Every temporary is complete: put them in place, with the cleanup signals held so that one finds every
  // target replaced or none, then write standard output.
  {
    const cleanup_signals_held renaming;
    std::size_t next = 0;
    std::string written;
    for (const auto& p : pending_) {
      if (p.path == "-") continue;
      auto& t = temps[next];
      if (const int err = put_in_place(t, overwrite_)) {
        drop_temps(next);
        throw output_error(in_quotes(p.path) + ": putting it in place failed (" +
                           (err == EEXIST ? std::string("it appeared meanwhile; refusing to overwrite it, "
                                                        "--force to replace")
                                          : std::string(std::strerror(err))) +
                           ")" + (written.empty() ? "" : " (already written: " + written + ")"));
      }
      unpublish(t.slot);
      written += (written.empty() ? "" : ", ") + in_quotes(p.path);
      ++next;
    }
    drop_temps(temps.size());
  }
  held.reset();
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

void remove_temporaries_on_signals() {
  for (const int sig : cleanup_signals) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0) continue;
    if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;  // ignored, or handled: kept
    struct sigaction sa {};
    sa.sa_handler = on_cleanup_signal;
    ::sigemptyset(&sa.sa_mask);
    for (const int other : cleanup_signals) ::sigaddset(&sa.sa_mask, other);
    ::sigaction(sig, &sa, nullptr);
  }
}

void write_new_file(const std::string& path, const std::string& text, bool overwrite,
                    std::ostream* standard_output) {
  output_set s(overwrite, standard_output);
  s.add(path, text);
  s.commit();
}

}  // namespace headroom::probes
