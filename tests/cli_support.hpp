// cli_support.hpp: what the CLI tests share: run the built `headroom` binary and read what it wrote.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

struct result {
  int status;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `ENV headroom ARGS` (ENV: variable assignments for the shell, or nothing) and returns its exit
// status, stdout and stderr.
inline result run_with(const std::string& env, const std::string& args) {
  // ctest runs these tests in parallel processes: the files are per process.
  const std::string base = ::testing::TempDir() + "/headroom_cli_" + std::to_string(::getpid());
  const std::string out = base + ".out", err = base + ".err";
  // Under AddressSanitizer the binary's exit-time leak scan is off: OpenMPI's MPI_Init leaks by design (as in
  // tests/multi_rank_test.sh), and the scan costs about 40 ms a run over thousands of runs. The library's
  // leaks are checked where it runs in-process: the unit tests and the fuzz targets of the same build.
  const std::string cmd = "export ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:detect_leaks=0\"; " + env + " " +
                          std::string(HEADROOM_BIN) + " " + args + " >" + out + " 2>" + err;
  const int raw = std::system(cmd.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(out), slurp(err)};
}

// Runs `headroom ARGS` and returns its exit status, stdout and stderr.
inline result run(const std::string& args) {
  return run_with("", args);
}

inline const std::string data = HEADROOM_TEST_DATA;
inline const std::string g = "plan --preset gpt3-175b ";

inline int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Returns the path of `name` in a directory of this process, removed if it was there.
inline std::string scratch(const std::string& name) {
  const auto dir =
      std::filesystem::path(::testing::TempDir()) / ("headroom_cli_files_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto p = dir / name;
  std::filesystem::remove_all(p);  // a file, or a folder a process of the same pid left in an earlier run
  return p.string();
}

// Returns a fresh, empty directory of this process named `name`.
inline std::string fresh_dir(const std::string& name) {
  const std::string d = scratch(name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// True when `doc`'s schema is `kind_major` ("headroom.measurement/1") at any minor version: a minor only adds
// fields (probes/records/schema.hpp).
template <class Json>
bool schema_is(const Json& doc, const std::string& kind_major) {
  if (!doc.contains("schema") || !doc["schema"].is_string()) return false;
  const std::string s = doc["schema"].template get<std::string>();
  return s == kind_major || s.rfind(kind_major + ".", 0) == 0;
}
