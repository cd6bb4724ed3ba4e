// results_file_test.cpp: result files are written whole, never silently overwritten, one file is one file
// however it is spelt, and any legal name can be written.
#include "probes/io/results_file.hpp"

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

TEST(ResultsFile, OutputsOfOneCommandAreAllOrNothing) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("headroom_outset_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto files = [&] {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir)) n += e.is_regular_file();
    return n;
  };
  const std::string a = (dir / "a.json").string(), b = (dir / "b.svg").string();
  std::ofstream(b) << "old";
  {
    // A refused second target is found before anything is written (the first does not appear).
    output_set s(false);
    s.expect(a);
    EXPECT_THROW(s.expect(b), bad_input);
    EXPECT_FALSE(fs::exists(a));
  }
  {
    // A write failing on the second output leaves neither the first nor any temporary behind.
    output_set s(false);
    s.add(a, "first\n");
    s.add((dir / "missing" / "c.json").string(), "second\n");
    EXPECT_THROW(s.commit(), output_error);
    EXPECT_FALSE(fs::exists(a));
    EXPECT_EQ(files(), 1);
  }
  {
    // A target appearing between expect() and commit() is still refused, with nothing written.
    output_set s(false);
    s.expect(a);
    s.add(a, "mine\n");
    std::ofstream(a) << "theirs";
    EXPECT_THROW(s.commit(), bad_input);
    std::stringstream got;
    got << std::ifstream(a).rdbuf();
    EXPECT_EQ(got.str(), "theirs");
    fs::remove(a);
  }
  // One convention: "-" is standard output for every output, and only one output may take it.
  {
    std::ostringstream standard_output;
    output_set s(false, &standard_output);
    s.expect("-");
    EXPECT_TRUE(s.to_stdout());
    EXPECT_THROW(s.expect("-"), bad_input);
    EXPECT_THROW(s.expect(b), bad_input);  // exists, no --force
    s.add("-", "to the caller's stream\n");
    s.commit();
    EXPECT_EQ(standard_output.str(), "to the caller's stream\n");
    // Library code never writes to the process's standard output on its own: without a stream, "-" is
    // refused.
    EXPECT_THROW(output_set(false).expect("-"), bad_input);
  }
  {
    output_set s(true);
    s.expect(a);
    EXPECT_THROW(s.expect(a), bad_input);  // one file named for two outputs
    s.add(a, [](std::ostream& out) { out << "streamed " << 42 << "\n"; });
    s.add(b, "new\n");
    s.commit();
    std::stringstream ga, gb;
    ga << std::ifstream(a).rdbuf();
    gb << std::ifstream(b).rdbuf();
    EXPECT_EQ(ga.str(), "streamed 42\n");
    EXPECT_EQ(gb.str(), "new\n");
    EXPECT_EQ(files(), 2);
  }
  fs::remove_all(dir);
}

// Two outputs naming one file in other spellings are one file: refused before anything is written.
TEST(ResultsFile, OneFileUnderEverySpelling) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("headroom_same_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  const std::string a = (dir / "a.json").string();
  const std::string spellings[] = {(dir / "." / "a.json").string(), (dir / "sub" / ".." / "a.json").string(),
                                   fs::relative(a).string(), (dir / "sub" / "..//./a.json").string()};
  for (const auto& other : spellings) {
    output_set s(false);
    s.expect(a);
    EXPECT_THROW(s.expect(other), bad_input) << other;
  }
  // Existing files (--force): a hard link and a symbolic link name the first file too.
  std::ofstream(a) << "old";
  fs::create_hard_link(a, dir / "hard.json");
  fs::create_symlink(a, dir / "soft.json");
  for (const std::string& other : {(dir / "hard.json").string(), (dir / "soft.json").string()}) {
    output_set s(true);
    s.expect(a);
    EXPECT_THROW(s.expect(other), bad_input) << other;
    output_set t(true);
    t.add(a, "one\n");
    EXPECT_THROW(t.add(other, "two\n"), bad_input) << other;
  }
  std::stringstream got;
  got << std::ifstream(a).rdbuf();
  EXPECT_EQ(got.str(), "old");
  // Two files are two outputs.
  output_set s(true);
  s.add(a, "one\n");
  s.add((dir / "sub" / ".." / "b.json").string(), "two\n");
  s.commit();
  std::stringstream gb;
  gb << std::ifstream(dir / "b.json").rdbuf();
  EXPECT_EQ(gb.str(), "two\n");
  fs::remove_all(dir);
}

// The temporary has a short name of its own, so a name of NAME_MAX bytes works; a failure's message keeps
// its cause within an error line.
TEST(ResultsFile, AnyLegalNameCanBeWritten) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("headroom_names_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string longest = (dir / std::string(255, 'n')).string();
  write_new_file(longest, "x\n", false);
  std::stringstream got;
  got << std::ifstream(longest).rdbuf();
  EXPECT_EQ(got.str(), "x\n");
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  try {
    write_new_file((dir / "missing" / std::string(250, 'm')).string(), "x", false);
    ADD_FAILURE() << "wrote into a missing directory";
  } catch (const output_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("No such file or directory"), std::string::npos) << what;
    EXPECT_LT(what.size(), 240u) << what;
  }
  try {
    write_new_file((dir / std::string(256, 'l')).string(), "x", false);
    ADD_FAILURE() << "a name over NAME_MAX";
  } catch (const output_error& e) {
    EXPECT_NE(std::string(e.what()).find("longer than 255 bytes"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

// Standard output that loses what is written to it is an output failure, like any other output.
TEST(ResultsFile, StandardOutputFailureIsAnOutputError) {
  std::ostream broken(nullptr);  // every write fails
  output_set s(false, &broken);
  s.add("-", "lost\n");
  try {
    s.commit();
    ADD_FAILURE() << "a failed standard output passed";
  } catch (const output_error& e) {
    EXPECT_NE(std::string(e.what()).find("standard output"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace headroom::probes
