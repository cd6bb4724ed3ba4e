// cli_outputs_test.cpp: runs the built `headroom` binary on hostile or careless input: outputs and printing:
// file identity, standard output failures, '-' as one document, long names, record directories, exit 2 as
// one line, sanitised strings.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_support.hpp"

namespace {

namespace fs = std::filesystem;

const std::string replay_1_3b = "probe replay --preset gpt3-1.3b --gpus 8 --zero 1 --recompute none --gpu-mem 80 ";

// Returns a directory of four sim records (made once per process; calibrate needs more records than terms).
const std::string& record_dir() {
  static const std::string dir = [] {
    const std::string d = fresh_dir("records");
    const char* cases[] = {"--preset gpt3-1.3b --gpus 8 --zero 1 --recompute none",
                           "--preset gpt3-2.7b --gpus 8 --zero 2 --recompute full",
                           "--preset gpt3-6.7b --gpus 16 --tp 2 --zero 1 --recompute selective",
                           "--preset llama2-7b --gpus 8 --zero 3 --recompute full --seq 2048"};
    int i = 0;
    for (const char* c : cases) {
      const auto r = run(std::string("probe replay ") + c + " --gpu-mem 80 --json " + d + "/r" +
                         std::to_string(i++) + ".json");
      EXPECT_EQ(r.status, 0) << c << r.err;
    }
    return d;
  }();
  return dir;
}

// Copies the record directory to a fresh one named `name`, returned.
std::string copy_of_records(const std::string& name) {
  const std::string d = fresh_dir(name);
  fs::copy(record_dir(), d, fs::copy_options::recursive);
  return d;
}

// True when `text` is one JSON document.
bool parses(const std::string& text) {
  return !nlohmann::json::parse(text, nullptr, false).is_discarded();
}

// Runs `headroom ARGS` with standard output sent where `redirect` says ("/dev/full", "&-"); returns the exit
// status and stderr.
result run_stdout(const std::string& args, const std::string& redirect) {
  const std::string err =
      ::testing::TempDir() + "/headroom_cli_stdout_" + std::to_string(::getpid()) + ".err";
  const std::string cmd = std::string(HEADROOM_BIN) + " " + args + " >" + redirect + " 2>" + err;
  const int raw = std::system(cmd.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, "", slurp(err)};
}

// The house rule for exit 2 (and any error): one line on stderr, under 280 characters, nothing on stdout.
void expect_one_error_line(const result& r, int status, const std::string& names) {
  EXPECT_EQ(r.status, status) << r.out << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_LE(r.err.size(), 281u) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find(names), std::string::npos) << r.err;
}

// Item 5: two outputs naming one file in other spellings are refused before anything is written.
TEST(CliOutputs, TwoSpellingsOfOneFileAreOneFile) {
  const std::string d = fresh_dir("spellings");
  auto r = run(replay_1_3b + "--json " + d + "/out.json --timeline " + d + "/./out.json");
  expect_one_error_line(r, 2, "name one file");
  EXPECT_FALSE(fs::exists(d + "/out.json"));
  fs::create_directories(d + "/sub");
  r = run(replay_1_3b + "--json " + d + "/x.json --timeline " + d + "/sub/../x.json");
  expect_one_error_line(r, 2, "name one file");
  EXPECT_FALSE(fs::exists(d + "/x.json"));
  // Absolute against relative, run from the directory.
  r = run_with("cd " + d + " &&", replay_1_3b + "--json " + d + "/y.json --timeline y.json");
  expect_one_error_line(r, 2, "name one file");
  EXPECT_FALSE(fs::exists(d + "/y.json"));
  // With --force, an existing file and a hard link to it: the file keeps what it held.
  std::ofstream(d + "/a.json") << "old";
  fs::create_hard_link(d + "/a.json", d + "/b.json");
  r = run(replay_1_3b + "--force --json " + d + "/a.json --timeline " + d + "/b.json");
  expect_one_error_line(r, 2, "name one file");
  EXPECT_EQ(slurp(d + "/a.json"), "old");
  // snapshot's --json and --trace alike.
  const std::string snap = data + "/snapshots/NiuHuangxiaozi__forward_memory_snapshot_100.pickle";
  r = run("snapshot " + snap + " --json " + d + "/o --trace " + d + "/./o");
  expect_one_error_line(r, 2, "name one file");
  EXPECT_FALSE(fs::exists(d + "/o"));
  // Two different files are still two outputs.
  r = run(replay_1_3b + "--json " + d + "/rec.json --timeline " + d + "/sub/../t.svg");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(slurp(d + "/t.svg").rfind("<svg", 0), 0u);
  EXPECT_TRUE(parses(slurp(d + "/rec.json")));
}

// Item 8: a failed write to standard output is an output failure, for every command that prints.
TEST(CliOutputs, StandardOutputFailureIsExitSeven) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this machine";
  const std::string cases[] = {g + "--gpus 32 --json",
                               g + "--gpus 32",
                               g + "--gpus 8 --suggest --top 3",
                               "presets",
                               "recipes",
                               "validate --json",
                               "validate",
                               replay_1_3b + "--json -",
                               "compare " + record_dir() + " " + record_dir(),
                               "--help"};
  for (const auto& args : cases) {
    for (const std::string redirect : {"/dev/full", "&-"}) {
      const auto r = run_stdout(args, redirect);
      EXPECT_EQ(r.status, 7) << args << " >" << redirect << ": " << r.err;
      EXPECT_EQ(lines(r.err), 1) << args << " >" << redirect << ": " << r.err;
      EXPECT_NE(r.err.find("standard output"), std::string::npos) << r.err;
    }
  }
  // A closed standard output never lends its descriptor to an output file.
  const std::string d = fresh_dir("closed_stdout");
  const auto r = run_stdout(replay_1_3b + "--json " + d + "/r.json", "&-");
  EXPECT_EQ(r.status, 7) << r.err;
  EXPECT_TRUE(parses(slurp(d + "/r.json")));
}

// Item 9: with '-', the document alone is standard output; the summary goes to stderr.
TEST(CliOutputs, DashIsOneDocument) {
  auto r = run("calibrate " + record_dir() + " -o -");
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j;
  EXPECT_NO_THROW(j = nlohmann::json::parse(r.out)) << r.out;
  EXPECT_TRUE(schema_is(j, "headroom.calibration/1"));
  EXPECT_NE(r.err.find("headroom calibrate: 4 records"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("residuals"), std::string::npos) << r.err;
  r = run("report " + record_dir() + " -o -");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("<!DOCTYPE html>", 0), 0u);
  ASSERT_GE(r.out.size(), 15u);
  EXPECT_EQ(r.out.substr(r.out.size() - 15), "</body></html>\n");
  EXPECT_NE(r.err.find("headroom report: 4 records"), std::string::npos) << r.err;
  // To a file, the summary stays on standard output.
  const std::string d = fresh_dir("dash");
  r = run("calibrate " + record_dir() + " -o " + d + "/cal.json");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("headroom calibrate: 4 records"), std::string::npos) << r.out;
  EXPECT_TRUE(r.err.empty()) << r.err;
}

// Item 10: any name the user may legally give works; a failure's line keeps its cause.
TEST(CliOutputs, LongLegalFileNames) {
  const std::string d = fresh_dir("long_names");
  const std::string name250 = std::string(245, 'n') + ".json", name255 = std::string(250, 'm') + ".json";
  auto r = run(replay_1_3b + "--json " + d + "/" + name250);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(parses(slurp(d + "/" + name250)));
  r = run("calibrate " + record_dir() + " -o " + d + "/" + name255);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(parses(slurp(d + "/" + name255)));
  int files = 0;
  for (const auto& e : fs::directory_iterator(d)) files += e.is_regular_file();
  EXPECT_EQ(files, 2);  // no temporary left
  // A directory that is not there: the line is cut in the middle of the path, the cause stays.
  r = run(replay_1_3b + "--json " + d + "/missing/" + name250);
  expect_one_error_line(r, 7, "No such file or directory");
  // A name over the limit: refused with the reason.
  r = run(replay_1_3b + "--json " + d + "/" + std::string(300, 'x'));
  expect_one_error_line(r, 7, "longer than");
}

// Item 11: a record directory that cannot be walked is bad input naming the path, for every reader of
// record sets.
TEST(CliOutputs, RecordDirectoryWalkErrors) {
  const std::string d = copy_of_records("walk_loop");
  fs::create_symlink(d + "/loop_b", d + "/loop_a");
  fs::create_symlink(d + "/loop_a", d + "/loop_b");
  const std::string out = d + "/../walk_out";
  fs::remove(out);
  for (const std::string& args :
       {"calibrate " + d + " -o " + out, "compare " + d + " " + record_dir(), "report " + d + " -o " + out}) {
    const auto r = run(args);
    expect_one_error_line(r, 2, "loop_");
    EXPECT_FALSE(fs::exists(out));
  }
  // A loop named as a record file, given directly.
  auto r = run("compare " + d + "/loop_a " + record_dir());
  expect_one_error_line(r, 2, "loop_a");
  // An unreadable subdirectory (root reads everything, so only as another user).
  if (::geteuid() != 0) {
    const std::string u = copy_of_records("walk_unreadable");
    fs::create_directories(u + "/locked");
    ::chmod((u + "/locked").c_str(), 0);
    r = run("calibrate " + u + " -o " + out);
    expect_one_error_line(r, 2, "locked");
    ::chmod((u + "/locked").c_str(), 0755);
  }
}

// Item 12: exit 2 is one line on stderr and nothing else, whatever compare is given.
TEST(CliOutputs, CompareBadInputIsOneLine) {
  auto r = run("compare nope1 nope2");
  expect_one_error_line(r, 2, "nope1");
  const std::string d = fresh_dir("compare_bad");
  ASSERT_EQ(::mkfifo((d + "/fifo.json").c_str(), 0600), 0);
  r = run_with("timeout 30", "compare " + d + "/fifo.json " + record_dir());
  expect_one_error_line(r, 2, "fifo.json");
  // A *.json that is not a measurement record, alone or in a directory of records.
  const std::string mixed = copy_of_records("compare_mixed");
  fs::copy_file(data + "/calibration_h200_example.json", mixed + "/cal.json");
  r = run("compare " + data + "/calibration_h200_example.json " + record_dir());
  expect_one_error_line(r, 2, "calibration_h200_example.json");
  r = run("compare " + record_dir() + " " + mixed);
  expect_one_error_line(r, 2, "cal.json");
  // A long path: the line is cut in the middle and keeps the cause.
  r = run("compare " + d + "/" + std::string(200, 'p') + "/" + std::string(200, 'q') + ".json " +
          record_dir());
  expect_one_error_line(r, 2, "no such file or directory");
}

// Returns a copy of the example calibration whose GPU is hostile: an ESC, a forged line, 5,000 characters.
std::string hostile_calibration(const std::string& dir) {
  auto j = nlohmann::json::parse(slurp(data + "/calibration_h200_example.json"));
  j["holds_for"]["gpu"] = "H200\x1b[2J\nheadroom: fits " + std::string(5000, 'z');
  const std::string path = dir + "/hostile_cal.json";
  std::ofstream(path) << j.dump();
  return path;
}

// Item 13: what a command writes to stderr is sanitised, and a warning does not join an error.
TEST(CliOutputs, WarningsAreSanitisedAndNeverJoinAnError) {
  const std::string d = fresh_dir("hostile_cal");
  const std::string cal = hostile_calibration(d);
  auto r = run(g + "--gpus 32 --zero 3 --calibration " + cal + " --calibration-gpu 'NVIDIA B200'");
  EXPECT_TRUE(r.status == 0 || r.status == 3) << r.err;
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
  std::size_t longest = 0, start = 0;
  for (std::size_t nl; (nl = r.err.find('\n', start)) != std::string::npos; start = nl + 1)
    longest = std::max(longest, nl - start);
  EXPECT_LE(longest, 280u) << r.err;
  // The same warning, then bad input: the error line alone.
  r = run(g + "--gpus 32 --zero 3 --calibration " + cal + " --calibration-gpu 'NVIDIA B200' --mfu 5");
  expect_one_error_line(r, 2, "mfu");
}

// Item 13: strings from records and packs reach stdout sanitised; the HTML report escapes them; JSON
// outputs keep them exactly.
TEST(CliOutputs, StringsFromFilesAreSanitisedOnStdout) {
  const std::string d = copy_of_records("hostile_records");
  const std::string hostile = "<script>alert(1)</script>\x1b[31m\nREGRESSION forged";
  auto j = nlohmann::json::parse(slurp(d + "/r0.json"));
  j["inputs"]["model"]["name"] = hostile;
  std::ofstream(d + "/r0.json") << j.dump();
  auto r = run("compare " + record_dir() + " " + d);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\nREGRESSION forged"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("only in the new set"), std::string::npos) << r.out;
  r = run("report " + d + " -o -");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("<script"), std::string::npos);
  // A validation pack with a hostile id: the text is sanitised, the JSON carries the id exactly.
  auto pack = nlohmann::json::parse(slurp(data + "/../../presets/validation/published.json"));
  ASSERT_FALSE(pack["rows"].empty());
  pack["rows"][0]["id"] = "row\x1b[2J\nagrees   forged";
  std::ofstream(d + "/../pack.json") << pack.dump();
  r = run("validate --pack " + d + "/../pack.json");
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\nagrees   forged"), std::string::npos) << r.out;
  r = run("validate --json --pack " + d + "/../pack.json");
  EXPECT_NE(r.out.find("row\\u001b[2J\\nagrees   forged"), std::string::npos) << r.out;
}

// Item 13: a model name with NUL, newline or ESC reaches the plan's table sanitised.
TEST(CliOutputs, ModelNamesAreSanitisedInTables) {
  const std::string d = fresh_dir("hostile_model");
  auto m = nlohmann::json::parse(slurp(data + "/../../presets/gpt3-175b.json"));
  m["name"] = std::string("gpt\0x", 5) + "\x1b[2J\nheadroom: fits";
  std::ofstream(d + "/m.json") << m.dump();
  for (const std::string mode : {"--gpus 32", "--gpus 32 --suggest --top 2", "--min-gpus --top 1"}) {
    const auto r = run("plan --model " + d + "/m.json " + mode);
    ASSERT_TRUE(r.status == 0 || r.status == 3) << mode << ": " << r.err;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << mode;
    EXPECT_EQ(r.out.find('\0'), std::string::npos) << mode;
    EXPECT_EQ(r.out.find("\nheadroom: fits"), std::string::npos) << mode;
    EXPECT_NE(r.out.find("gpt\\x00x\\x1b[2J\\nheadroom: fits"), std::string::npos) << mode << r.out;
  }
}

}  // namespace
