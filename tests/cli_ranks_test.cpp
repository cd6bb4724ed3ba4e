// cli_ranks_test.cpp: runs the built `headroom` binary on hostile or careless input: multi-rank probes under
// launcher variables that disagree; all-or-nothing rank outputs; one short line per error (issue: reliability
// III items 1, 6, 7). The launcher's variables are set by hand (no mpirun): a world of one rank needs no MPI,
// and a larger claim meets MPI's world of one (or a build without MPI). Real multi-rank runs:
// tests/multi_rank_test.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../cli/one_line.hpp"
#include "cli_support.hpp"

namespace {

namespace fs = std::filesystem;

const std::string world_of_one = "OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_RANK=0";
const std::string replay = "probe replay --preset gpt3-125m ";

// Asserts that `r` failed with bad input: exit 2, nothing on stdout, and exactly one stderr line of at most
// 280 characters that starts "headroom: " and contains `names`.
void refused(const result& r, const std::string& names, const std::string& what) {
  EXPECT_EQ(r.status, 2) << what << "\n" << r.err;
  EXPECT_EQ(r.out, "") << what;
  EXPECT_EQ(lines(r.err), 1) << what << "\n" << r.err;
  EXPECT_LE(r.err.size(), 281u) << what;
  EXPECT_EQ(r.err.rfind("headroom: ", 0), 0u) << what << "\n" << r.err;
  EXPECT_NE(r.err.find(names), std::string::npos) << what << ": wanted '" << names << "' in\n" << r.err;
}

// Returns the paths of `dir`'s entries, sorted.
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CliRanks, AClaimedWorldThatMpiDoesNotHaveIsRefused) {
  // Item 1: without mpirun, MPI's world is one rank (or this build has no MPI): a claim of two is bad input
  // naming the variable, on rank 0 and rank 1 alike, with or without --json; no file, no table.
  const std::vector<std::pair<std::string, std::string>> claims = {
      {"OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2"},
      {"OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2"},
      {"SLURM_STEP_ID=0 SLURM_PROCID=1 SLURM_STEP_NUM_TASKS=2", "SLURM_STEP_NUM_TASKS=2"},
      {"PMI_RANK=0 PMI_SIZE=2", "PMI_SIZE=2"},
  };
  const std::string dir = fresh_dir("claims");
  for (const auto& [env, variable] : claims)
    for (const std::string& json : {std::string(), " --json " + dir + "/r.json"}) {
      const result r = run_with(env, replay + "--gpus 2" + json);
      const bool no_mpi = r.err.find("this build has no MPI") != std::string::npos;
      refused(r, no_mpi ? "this build has no MPI" : variable + ") but MPI's world has 1", env + json);
      EXPECT_TRUE(entries(dir).empty()) << env;
    }
}

TEST(CliRanks, InconsistentLauncherVariablesAreRefusedNamingThem) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=2",
       "OMPI_COMM_WORLD_RANK=2 is outside OMPI_COMM_WORLD_SIZE=2"},
      {"OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=-1",
       "OMPI_COMM_WORLD_RANK is not a non-negative integer"},
      {"OMPI_COMM_WORLD_SIZE=two OMPI_COMM_WORLD_RANK=0",
       "OMPI_COMM_WORLD_SIZE is not a non-negative integer"},
      {"OMPI_COMM_WORLD_SIZE=0 OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=0"},
      {"OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_LOCAL_RANK=1",
       "OMPI_COMM_WORLD_LOCAL_RANK=1 is outside OMPI_COMM_WORLD_SIZE=1"},
      {"OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_LOCAL_RANK=1 "
       "OMPI_COMM_WORLD_LOCAL_SIZE=1",
       "OMPI_COMM_WORLD_LOCAL_RANK=1 is outside OMPI_COMM_WORLD_LOCAL_SIZE=1"},
      {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not"},
      {"SLURM_STEP_ID=0 SLURM_PROCID=5 SLURM_STEP_NUM_TASKS=4",
       "SLURM_PROCID=5 is outside SLURM_STEP_NUM_TASKS=4"},
      {"PMI_RANK=x PMI_SIZE=2", "PMI_RANK is not a non-negative integer"},
  };
  for (const auto& [env, names] : cases) {
    refused(run_with(env, replay + "--gpus 2"), names, env);
    // Every probe subcommand reads the same variables the same way.
    refused(run_with(env, "probe max-fit micro-batch --preset gpt3-125m"), names, env + " max-fit");
  }
}

TEST(CliRanks, SingleRankSubcommandsAreRefusedOnEveryRankInOneLine) {
  // Rank 1 used to exit 2 in silence ("rank 0 says it"): with variables set by hand there may be no rank 0.
  for (const char* rank : {"0", "1"})
    refused(run_with(std::string("OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=") + rank,
                     "probe max-fit micro-batch --preset gpt3-125m"),
            "'probe max-fit' applies to a single-rank probe, not under a launcher",
            std::string("rank ") + rank);
}

TEST(CliRanks, OptionsAMultiRankProbeCannotTakeAreRefusedBeforeAnyWork) {
  // HEADROOM_TEST_RANK_FAULT=0:exit ends rank 0 with status 5 the moment it would open its device: a
  // refusal (status 2) proves no device was opened.
  const std::string env = world_of_one + " HEADROOM_TEST_RANK_FAULT=0:exit";
  refused(run_with(env, replay + "--rank-timeout -5"), "rank-timeout: must be between 0 and 86400", "-5");
  refused(run_with(env, replay + "--rank-timeout nan"), "rank-timeout: must be between 0 and 86400", "nan");
  refused(run_with(env, replay + "--stage 0"), "--stage (each rank probes its own stage)", "stage");
  refused(run_with(env, replay + "--gpus 4"), "the layout has 4 GPUs, the launcher started 1 rank", "gpus");
  // And the fault hook is live: without a refusal, rank 0 reaches its device and takes the fault.
  EXPECT_EQ(run_with(env, replay).status, 5);
}

TEST(CliRanks, AWorldOfOneWritesItsSummaryAndItsRecordAndSaysWhich) {
  const std::string dir = fresh_dir("one");
  const result r = run_with(world_of_one, replay + "--json " + dir + "/r.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(entries(dir), (std::vector<std::string>{"r.json", "r.rank0.json"}));
  EXPECT_NE(
      r.out.find("summary written to " + dir + "/r.json, the one rank record to " + dir + "/r.rank0.json\n"),
      std::string::npos)
      << r.out;
  const auto summary = nlohmann::json::parse(slurp(dir + "/r.json"));
  EXPECT_TRUE(schema_is(summary, "headroom.multi_rank/1"));
  EXPECT_EQ(summary["world_size"], 1);
  const auto record = nlohmann::json::parse(slurp(dir + "/r.rank0.json"));
  EXPECT_EQ(record["rank"]["rank"], 0);
  EXPECT_EQ(record["rank"]["world_size"], 1);
}

TEST(CliRanks, AnOutputInTheWayRefusesTheWholeRunBeforeAnyWork) {
  // Item 6: a directory where a rank's record goes: one line naming it, exit 2, no file written (not the
  // summary, not another rank's), no table and no claim of files on stdout, and no rank reached its device.
  const std::string dir = fresh_dir("in_the_way");
  fs::create_directory(dir + "/r.rank0.json");
  const std::string faulted = world_of_one + " HEADROOM_TEST_RANK_FAULT=0:exit";
  refused(run_with(faulted, replay + "--json " + dir + "/r.json"),
          "'" + dir + "/r.rank0.json' exists and is not a regular file", "directory");
  EXPECT_EQ(entries(dir), std::vector<std::string>{"r.rank0.json"});
  EXPECT_TRUE(fs::is_directory(dir + "/r.rank0.json"));
  // --force never replaces a directory either.
  refused(run_with(faulted, replay + "--force --json " + dir + "/r.json"), "is not a regular file",
          "--force");
  EXPECT_EQ(entries(dir), std::vector<std::string>{"r.rank0.json"});
  // A summary from an earlier run: kept as it was, and no rank record written beside it.
  fs::remove(dir + "/r.rank0.json");
  std::ofstream(dir + "/r.json") << "earlier\n";
  refused(run_with(faulted, replay + "--json " + dir + "/r.json"), "'" + dir + "/r.json' exists", "summary");
  EXPECT_EQ(entries(dir), std::vector<std::string>{"r.json"});
  EXPECT_EQ(slurp(dir + "/r.json"), "earlier\n");
  // With --force both are replaced, together.
  const result forced = run_with(world_of_one, replay + "--force --json " + dir + "/r.json");
  EXPECT_EQ(forced.status, 0) << forced.err;
  EXPECT_EQ(entries(dir), (std::vector<std::string>{"r.json", "r.rank0.json"}));
  EXPECT_NE(slurp(dir + "/r.json"), "earlier\n");
}

TEST(CliRanks, EveryErrorLineOfTheMultiRankPathIsOneShortLine) {
  // Item 7: a 400-character path in the way, a path with a newline, a preset name with a newline and one of
  // 1000 characters: each error is one line of at most 280 characters.
  const std::string dir = fresh_dir("long");
  std::string deep = dir;
  for (int i = 0; i < 4; ++i) deep += "/" + std::string(100, static_cast<char>('a' + i));
  fs::create_directories(deep + "/r.rank0.json");
  refused(run_with(world_of_one, replay + "--json " + deep + "/r.json"), "r.rank0.json' exists", "long path");
  const std::string nl = dir + "/a\nb";
  fs::create_directories(nl + "/r.rank0.json");
  refused(run_with(world_of_one, replay + "--json \"$(printf '" + dir + "/a\\nb')/r.json\""),
          "is not a regular file", "newline in the path");
  refused(run_with(world_of_one, "probe replay --preset \"$(printf 'a\\nb')\""), "unknown preset", "newline");
  refused(run_with(world_of_one, "probe replay --preset " + std::string(1000, 'p')), "unknown preset",
          "long");
}

// Under a launcher the rank records are outputs like any other: one that is the model file read is refused,
// even with --force, and the file is intact.
TEST(CliRanks, ARankRecordNeverOverwritesAnInput) {
  const std::string dir = fresh_dir("inputs");
  const std::string model = dir + "/r.rank0.json";
  fs::copy_file(std::string(HEADROOM_SOURCE_DIR) + "/presets/gpt3-125m.json", model);
  const auto size = fs::file_size(model);
  refused(run_with(world_of_one, "probe replay --model " + model + " --json " + dir + "/r.json --force"),
          "one of the command's inputs", "a rank record over the model file");
  EXPECT_EQ(fs::file_size(model), size);
}

TEST(CliRanks, TheOneLineRule) {
  // cli/one_line.hpp, which every stderr line of the multi-rank path goes through (and cli/main.cpp's).
  using headroom::cli::one_line;
  // Control characters are escaped, never passed on: the line stays one line.
  EXPECT_EQ(one_line("a\nb\r\tc\x7f"), "a\\nb\\r\\tc\\x7f");
  EXPECT_EQ(one_line(std::string(280, 'x')), std::string(280, 'x'));
  // A long line is cut in the middle to 280 characters, so the cause at its end stays.
  const std::string cut = one_line(std::string(400, 'x') + " the cause");
  EXPECT_LE(cut.size(), 280u);
  EXPECT_NE(cut.find("..."), std::string::npos);
  EXPECT_EQ(cut.substr(cut.size() - 9), "the cause");
  const std::string newlines = one_line(std::string(1 << 20, '\n'));
  EXPECT_LE(newlines.size(), 280u);
  EXPECT_EQ(newlines.find('\n'), std::string::npos);
  EXPECT_EQ(one_line(""), "");
  // A line too long loses its paths' folders first, so a deep checkout never cuts the cause or the fix.
  const std::string folders = "/" + std::string(150, 'd') + "/tests/data/torchtitan/";
  const std::string tail = ": activation_checkpoint.selective_ac_option: \"op\" is not modelled: " +
                           std::string(100, 'f') + " or --allow-unmodelled";
  const std::string shortened = one_line("headroom: bad input: " + folders + "a.toml" + tail);
  EXPECT_EQ(shortened, "headroom: bad input: .../a.toml" + tail);
  // A short line keeps its paths whole.
  EXPECT_EQ(one_line("headroom: bad input: /work/x/a.toml: no such file"),
            "headroom: bad input: /work/x/a.toml: no such file");
}

TEST(CliRanks, AnOutputPathThatIsNotUtf8IsWritten) {
  // The summary's inputs carry the path's bytes; JSON wants UTF-8: written with U+FFFD, not a failed dump
  // after every rank has done its work.
  const std::string dir = fresh_dir("bytes");
  const result r = run_with(world_of_one, replay + "--json \"" + dir + "/$(printf '\\377')r.json\"");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(entries(dir), (std::vector<std::string>{"\xffr.json", "\xffr.rank0.json"}));
}

}  // namespace
