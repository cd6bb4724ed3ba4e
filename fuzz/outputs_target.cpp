// outputs_target.cpp: the outputs fuzz target. The bytes spell two paths in a scratch directory of this
// process (components ".", "..", "", names of files, of a hard link and of symbolic links) and choose the
// overwrite flag and whether a writer throws midway. Invariants of probes::output_set: expect(a) refuses
// exactly the targets check_output_target refuses, expect(b) then also exactly a path naming a's file
// (std::filesystem::equivalent when both exist, the same weakly_canonical path when neither does); after
// commit no temporary (".hr*") is left, every target holds its old content or its complete new one (old
// when a writer threw), and no file descriptor is left open.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_internal.hpp"
#include "planner/errors.hpp"
#include "probes/io/results_file.hpp"

namespace headroom::fuzz {
namespace {

namespace fs = std::filesystem;

// The scratch directory: root/w/x is where the paths start, so ".." may climb two levels and stay inside.
// Made once per process, removed when it exits; put back in its first state after any input that wrote.
class scratch {
 public:
  scratch() {
    std::string dir = (fs::temp_directory_path() / "headroom-fuzz-outputs-XXXXXX").string();
    if (!::mkdtemp(dir.data())) std::abort();
    m_root = dir;
    reset();
  }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(m_root, ec);
  }
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
  // Returns the directory paths start in.
  fs::path start() const { return m_root / "w" / "x"; }
  // Returns every directory a target can be in (what may hold a temporary).
  std::vector<fs::path> directories() const { return {m_root, m_root / "w", start(), start() / "d"}; }
  // Puts the first state back: x/a (a file), x/h (a hard link to it), x/s -> a, x/l -> d, x/d/c (a file).
  void reset() const {
    std::vector<fs::path> entries;
    for (const auto& e : fs::directory_iterator(m_root)) entries.push_back(e.path());
    for (const auto& e : entries) fs::remove_all(e);
    const fs::path x = start();
    fs::create_directories(x / "d");
    std::ofstream(x / "a") << "old a";
    std::ofstream(x / "d" / "c") << "old c";
    fs::create_hard_link(x / "a", x / "h");
    fs::create_symlink("a", x / "s");
    fs::create_directory_symlink("d", x / "l");
  }

 private:
  fs::path m_root;
};

// Returns a path under the scratch's start from the bytes: a count, then that many components.
std::string spell(byte_reader& in, const fs::path& start) {
  static constexpr const char* parts[] = {".", "..", "", "a", "b", "c", "d", "h", "s", "l", "x", "w"};
  std::string path = start.string();
  int depth = 2;  // below the scratch's root: ".." never climbs out of it
  for (int k = 0, n = in.next() % 6 + 1; k < n; ++k) {
    const std::string_view part = parts[in.next() % std::size(parts)];
    if (part == "..") {
      if (depth == 0) continue;
      --depth;
    } else if (part != "." && !part.empty()) {
      ++depth;
    }
    path += "/";
    path += part;
  }
  return path;
}

// Returns what the file at `p` holds, nullopt when it cannot be read as a file.
std::optional<std::string> content(const std::string& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return std::nullopt;
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Returns whether output_set must refuse `p` on its own (check_output_target's rule).
bool refused_alone(const std::string& p, bool overwrite) {
  std::error_code ec;
  const auto st = fs::symlink_status(p, ec);
  return !ec && fs::exists(st) && (!fs::is_regular_file(st) || !overwrite);
}

// Returns whether `a` and `b` name one file: the same file when both exist, the same resolved path when
// neither does.
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  const bool ea = fs::exists(a, ec), eb = fs::exists(b, ec);
  if (ea || eb) return ea && eb && fs::equivalent(a, b, ec);
  auto resolved = [](const std::string& p) {
    std::error_code e;
    const fs::path abs = fs::absolute(p, e);
    const fs::path c = fs::weakly_canonical(abs, e);
    return (e ? abs.lexically_normal() : c).string();
  };
  return resolved(a) == resolved(b);
}

// Returns whether output_set.expect(p) threw bad_input.
bool expect_refuses(probes::output_set& set, const std::string& p) {
  try {
    set.expect(p);
  } catch (const bad_input&) {
    return true;
  }
  return false;
}

// What a writer throws midway (nothing output_set knows).
struct writer_stopped {};

// Returns a writer of `text` that throws writer_stopped halfway through when `stop`.
probes::output_set::writer writer_of(std::string text, bool stop) {
  return [text = std::move(text), stop](std::ostream& out) {
    out.write(text.data(), static_cast<std::streamsize>(stop ? text.size() / 2 : text.size()));
    if (stop) throw writer_stopped{};
  };
}

// Returns how many file descriptors this process has open (it grows when one is leaked).
std::size_t open_fds() {
  std::error_code ec;
  std::size_t n = 0;
  for (fs::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++n;
  return n;
}

// Commits `a` and `b` through `set` and checks what is left: no temporary, every target old or new.
void commit_and_check(probes::output_set& set, const scratch& dir, const std::string& a, const std::string& b,
                      std::uint8_t flags) {
  const bool big = flags & 8;
  const std::string new_a(big ? 70000 : 16, 'A'), new_b(big ? 70000 : 16, 'B');
  const auto old_a = content(a), old_b = content(b);
  const std::size_t fds = open_fds();
  bool stopped = false, failed = false;
  try {
    set.add(a, writer_of(new_a, flags & 2));
    set.add(b, writer_of(new_b, flags & 4));
    set.commit();
  } catch (const writer_stopped&) {
    stopped = failed = true;
  } catch (const probes::output_error&) {
    failed = true;
  } catch (const bad_input&) {
    failed = true;
  }
  require(open_fds() == fds);
  for (const auto& d : dir.directories())
    for (const auto& e : fs::directory_iterator(d)) require(!e.path().filename().string().starts_with(".hr"));
  const auto now_a = content(a), now_b = content(b);
  if (!failed) require(now_a == new_a && now_b == new_b);
  if (stopped) require(now_a == old_a && now_b == old_b);
  require(now_a == old_a || now_a == new_a);
  require(now_b == old_b || now_b == new_b);
}

}  // namespace

void fuzz_outputs(std::string_view bytes) {
  static const scratch dir;
  byte_reader in(bytes);
  const std::uint8_t flags = in.next();
  const bool overwrite = flags & 1;
  const std::string a = spell(in, dir.start()), b = spell(in, dir.start());
  probes::output_set set(overwrite);
  require(expect_refuses(set, a) == refused_alone(a, overwrite));
  if (refused_alone(a, overwrite)) return;
  require(expect_refuses(set, b) == (refused_alone(b, overwrite) || same_file(a, b)));
  if (refused_alone(b, overwrite) || same_file(a, b)) return;
  commit_and_check(set, dir, a, b, flags);
  dir.reset();
}

}  // namespace headroom::fuzz
