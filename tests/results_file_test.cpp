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
  EXPECT_THROW(write_new_file((dir / "no" / "such" / "dir.json").string(), "x", false), bad_input);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace headroom::probes
