// fuzz_regression_test.cpp: every fuzz target (fuzz/fuzz_targets.hpp) replays every committed crash input
// (tests/data/fuzz-regressions/TARGET/) and the whole seed corpus (fuzz/corpus/*/: its own folder, where it
// has one, and every other target's), so a fixed finding stays fixed on every build, with or without
// clang. A violated invariant aborts the target, failing this test.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_targets.hpp"

namespace headroom::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputs_of(const fs::path& dir) {
  std::vector<fs::path> files;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file() && e.path().extension() != ".md") files.push_back(e.path());
  return files;
}

class FuzzRegression : public ::testing::TestWithParam<std::string> {};

TEST_P(FuzzRegression, SeedCorpusAndCommittedInputsPass) {
  const std::string target = GetParam();
  const fs::path regressions = fs::path(HEADROOM_TEST_DATA) / "fuzz-regressions" / target;
  const fs::path corpus = fs::path(HEADROOM_FUZZ_CORPUS);
  std::vector<fs::path> files = inputs_of(regressions);
  for (const auto& f : inputs_of(corpus / target)) files.push_back(f);
  // Every target has inputs of its own (committed crash inputs or its seed folder): none would make this
  // test assert nothing about it.
  ASSERT_FALSE(files.empty()) << "no inputs in " << regressions << " or " << corpus / target;
  for (const auto& folder : fs::directory_iterator(corpus))
    if (folder.is_directory() && folder.path().filename() != target)
      for (const auto& f : inputs_of(folder.path())) files.push_back(f);
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(bytes.empty());
    EXPECT_EQ(fuzz_one(target, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzRegression, ::testing::ValuesIn(fuzz_target_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace headroom::fuzz
