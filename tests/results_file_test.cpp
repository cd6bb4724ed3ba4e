// results_file_test.cpp: result files are written whole, and never silently overwritten.
#include "probes/results_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "planner/errors.hpp"

namespace headroom::probes {
namespace {

TEST(ResultsFile, WritesAtomicallyAndRefusesToOverwrite) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("headroom_results_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "m.json").string();
  fs::remove(path);
  write_new_file(path, "{\"a\": 1}\n", false);
  EXPECT_THROW(write_new_file(path, "{\"a\": 2}\n", false), bad_input);
  std::stringstream ss;
  ss << std::ifstream(path).rdbuf();
  EXPECT_EQ(ss.str(), "{\"a\": 1}\n");
  write_new_file(path, "{\"a\": 3}\n", true);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);  // no temporary left behind
  // The machine's problems are output_error naming the file and the cause; nothing is left behind.
  EXPECT_THROW(write_new_file((dir / "no" / "such" / "dir.json").string(), "x", false), output_error);
  EXPECT_THROW(write_new_file((dir / std::string(300, 'n')).string(), "x", false), output_error);
  // Only a regular file is ever replaced, even with --force: not a directory, not a device.
  fs::create_directories(dir / "sub");
  EXPECT_THROW(write_new_file((dir / "sub").string(), "x", true), bad_input);
  EXPECT_THROW(write_new_file("/dev/null", "x", true), bad_input);
  // A full disk: /dev/full refuses every write (when present).
  if (fs::exists("/dev/full")) {
    try {
      write_new_file("/dev/full", "x", true);
      ADD_FAILURE() << "replaced /dev/full";
    } catch (const bad_input&) {
    }
  }
  files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace headroom::probes
