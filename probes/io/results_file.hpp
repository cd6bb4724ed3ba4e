// results_file.hpp: writing result files so that a reader never sees half of one, nothing is silently
// overwritten, and a command that fails leaves none of its outputs behind: each text goes to a temporary
// file beside its target, and the temporaries are renamed over their targets only once all are complete.
#pragma once

#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace headroom::probes {

// An output that could not be written: the machine's problem (disk full, permissions), not the input's.
class output_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Checks that `path` may be written: throws bad_input("output", ...) when it exists and `overwrite` is
// false, or exists and is not a regular file (a directory or device is never replaced). "-" (standard
// output) always may.
void check_output_target(const std::string& path, bool overwrite);

// The outputs of one command, written all or nothing. "-" means the stream the caller gives as standard
// output (the CLI's std::cout), for every output option alike; at most one output may be "-", and no two may
// name the same file. Without a stream, "-" is refused.
class output_set {
 public:
  using writer = std::function<void(std::ostream&)>;

  explicit output_set(bool overwrite, std::ostream* standard_output = nullptr)
      : overwrite_(overwrite), standard_output_(standard_output) {}

  // Checks `path` now (see check_output_target; also a second "-" or a repeated file) so that a refused
  // target is reported before any work is done. An empty path is no output and is ignored.
  void expect(const std::string& path);
  // Queues `path` to receive what `w` writes (streamed: no copy of a large output is held in memory).
  void add(const std::string& path, writer w);
  void add(const std::string& path, std::string text);
  // True when one of the expected outputs is standard output (the command's table then stays silent).
  bool to_stdout() const;
  // Writes every queued output. Throws output_error naming the file and the cause when one cannot be
  // written; no temporary is left behind and no target has been replaced unless every temporary was
  // complete (a rename that fails after others succeeded names the files already written).
  void commit();

 private:
  struct pending {
    std::string path;
    writer write;
  };
  bool overwrite_;
  std::ostream* standard_output_;
  std::vector<std::string> expected_;
  std::vector<pending> pending_;
};

// Writes `text` to `path` atomically: an output_set of one ("-": `standard_output`, when given).
void write_new_file(const std::string& path, const std::string& text, bool overwrite,
                    std::ostream* standard_output = nullptr);

}  // namespace headroom::probes
