// results_file.hpp: writing result files so that a reader never sees half of one, nothing is silently
// overwritten, and a command that fails leaves none of its outputs behind: each text goes to a temporary
// file (a short name of its own) in its target's directory, and the temporaries are renamed over their
// targets only once all are complete. A SIGTERM, SIGINT or SIGHUP removes the temporaries before it ends the
// process (remove_temporaries_on_signals), and the renames are atomic, so a target is never half-written.
#pragma once

#include <functional>
#include <ostream>
#include <stdexcept>
#include <streambuf>
#include <string>
#include <utility>
#include <vector>

namespace headroom::probes {

// An output that could not be written: the machine's problem (disk full, permissions), not the input's.
class output_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A stream buffer over a file descriptor that keeps the errno of the first failed write, so the error
// names the real cause (a full disk, a closed descriptor) rather than whatever errno held later. Output
// files are written through one, and the CLI's standard output too (cli/main.cpp). It does not own `fd`.
class fd_writer : public std::streambuf {
 public:
  explicit fd_writer(int fd);
  // Returns the errno of the first write that failed, or 0.
  int error() const { return m_error; }

 protected:
  int_type overflow(int_type c) override;
  int sync() override;

 private:
  bool drain();
  int m_fd;
  int m_error = 0;
  char m_buf[1 << 16];
};

// Checks that `path` may be written: throws bad_input("output", ...) when it exists and `overwrite` is
// false, or exists and is not a regular file (a directory or device is never replaced). "-" (standard
// output) always may.
void check_output_target(const std::string& path, bool overwrite);

// The outputs of one command, written all or nothing. "-" means the stream the caller gives as standard
// output (the CLI's std::cout), for every output option alike; at most one output may be "-", and no two may
// name the same file, however spelt ("out.json" and "./out.json", "sub/../x", an absolute and a relative
// path, a hard or symbolic link to it). Without a stream, "-" is refused.
class output_set {
 public:
  using writer = std::function<void(std::ostream&)>;

  explicit output_set(bool overwrite, std::ostream* standard_output = nullptr)
      : overwrite_(overwrite), standard_output_(standard_output) {}

  // Names a file the command reads. An output that is the same file (same device and inode: another
  // spelling, "./x", a hard or symbolic link) is refused by expect() even with --force, naming both: with
  // --force it would destroy the input. "-", "" and a path that does not exist (nothing to destroy) are
  // ignored. Throws bad_input when an output already expected is this input.
  void input(const std::string& path);
  // Checks `path` now (see check_output_target; also a second "-" or a file already named, by identity, or
  // one of the inputs) so that a refused target is reported before any work is done. An empty path is no
  // output and is ignored.
  void expect(const std::string& path);
  // Queues `path` to receive what `w` writes (streamed: no copy of a large output is held in memory).
  void add(const std::string& path, writer w);
  void add(const std::string& path, std::string text);
  // True when one of the expected outputs is standard output (the command's table then stays silent).
  bool to_stdout() const;
  // Writes every queued output, standard output last. Throws output_error naming the file and the cause
  // when one cannot be written (standard output included: "standard output: writing failed (...)"); no
  // temporary is left behind and no target has been replaced unless every temporary was complete (a rename
  // that fails after others succeeded names the files already written). Each temporary has a name no other
  // process can take (".hr<pid>-<n>-<random>", created with O_EXCL), and each target is replaced by one
  // atomic rename, so two processes writing one target leave the whole file of one of them. Without
  // `overwrite`, a target that appears while the outputs are written is not replaced (output_error). The
  // renames run with SIGTERM, SIGINT and SIGHUP held, so such a signal finds all of them done or none.
  // Test-only: HEADROOM_TEST_PAUSE_BEFORE_COMMIT_MS (milliseconds, at most 600000) pauses between the
  // complete temporaries and the renames, so that tests/output_signals_test.cpp can signal a process that
  // holds temporaries, or two processes whose temporaries of one target coexist.
  void commit();

 private:
  struct pending {
    std::string path;
    writer write;
  };
  bool overwrite_;
  std::ostream* standard_output_;
  std::vector<std::pair<std::string, std::string>> expected_;  // (path as given, identity of its file)
  std::vector<std::pair<std::string, std::string>> inputs_;    // (path as given, "inode D:I")
  std::vector<pending> pending_;
};

// Makes SIGTERM, SIGINT and SIGHUP remove every temporary that an output_set::commit of this process holds
// (by unlinkat only, from a fixed table in static storage: nothing a signal handler may not call), then end
// the process by the signal's default action, so that its status still says which signal killed it. A
// signal ignored when the process started (nohup, a background job) stays ignored. cli/main.cpp calls it
// once, first thing. SIGKILL cannot be caught: it can leave a temporary (never a half-written target).
void remove_temporaries_on_signals();

// Writes `text` to `path` atomically: an output_set of one ("-": `standard_output`, when given).
void write_new_file(const std::string& path, const std::string& text, bool overwrite,
                    std::ostream* standard_output = nullptr);

}  // namespace headroom::probes
