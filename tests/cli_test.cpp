// cli_test.cpp: runs the built `headroom` binary: the seed's commands with their exact output, exit
// statuses, JSON and CSV, and one clear error line for each kind of bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

struct result {
  int status;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `headroom ARGS` and returns its exit status, stdout and stderr.
result run(const std::string& args) {
  // ctest runs these tests in parallel processes: the files are per process.
  const std::string base = ::testing::TempDir() + "/headroom_cli_" + std::to_string(::getpid());
  const std::string out = base + ".out", err = base + ".err";
  const std::string cmd = std::string(HEADROOM_BIN) + " " + args + " >" + out + " 2>" + err;
  const int raw = std::system(cmd.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(out), slurp(err)};
}

const std::string data = HEADROOM_TEST_DATA;
const std::string g = "plan --preset gpt3-175b ";

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(Cli, SeedSuggestOnEightGpusExactOutput) {
  auto r = run(g + "--gpus 8 --suggest");
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(r.out, slurp(data + "/golden/suggest_gpt3-175b_8.txt"));
  EXPECT_TRUE(r.err.empty());
}

TEST(Cli, SeedPlanAtThirtyTwoExactOutput) {
  auto r = run(g + "--gpus 32 --zero 3 --recompute selective");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, slurp(data + "/golden/plan_gpt3-175b_32_zero3_selective.txt"));
}

TEST(Cli, SeedMinGpusExactOutput) {
  auto r = run(g + "--min-gpus --top 3");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, slurp(data + "/golden/min_gpus_gpt3-175b.txt"));
}

TEST(Cli, SeedTableHeaderIsTheSeeds) {
  auto r = run(g + "--gpus 8 --zero 0 --recompute none");
  EXPECT_NE(
      r.out.find(
          "strategy                        axes                      state    activ  reserve    total  "
          "fits 192 GiB?\n"
          "--------------------------------------------------------------------------------------------------"
          "-------\n"
          "DDP + no recompute              tp=1 pp=1 dp=8           2607.7    256.5     10.0   2874.2  no\n"),
      std::string::npos)
      << r.out;
}

TEST(Cli, SeedFiguresComeOutOfTheBinary) {
  struct fig {
    std::string args, text;
  };
  const fig figs[] = {
      {"--gpus 1 --zero 0 --explain", "2607.7 / 192 = 13.6 GPUs of pure state"},
      {"--gpus 8 --zero 3 --explain", "2.869e9 bytes = 2.672 GiB"},
      {"--gpus 8 --zero 1",
       "ZeRO-1 + no recompute           tp=1 pp=1 dp=8            896.4    256.5     10.0   1162.9"},
      {"--gpus 8 --zero 2",
       "ZeRO-2 + no recompute           tp=1 pp=1 dp=8            611.2    256.5     10.0    877.7"},
      {"--gpus 8 --zero 3",
       "ZeRO-3 + no recompute           tp=1 pp=1 dp=8            332.8    256.5     10.0    599.3"},
      {"--gpus 16 --zero 3 --recompute full", "169.8      4.5     10.0    184.3"},
      {"--gpus 16 --zero 3 --recompute full", "7.7 GiB (4.0%)"},
      {"--gpus 16 --zero 3 --recompute selective", "169.8     76.5     10.0    256.3"},
      {"--gpus 16 --zero 3 --recompute full --pp 2", "166.4      4.5     10.0    180.9"},
      {"--gpus 32 --zero 3 --recompute full", "88.3      4.5     10.0    102.8"},
      {"--gpus 32 --zero 3 --recompute selective --tp 2", "84.9     38.3     10.0    133.1"},
      {"--gpus 32 --zero 3 --recompute selective --pp 2", "84.9     76.5     10.0    171.4"},
  };
  for (const auto& f : figs) {
    auto r = run(g + f.args);
    EXPECT_NE(r.out.find(f.text), std::string::npos) << f.args << "\n" << r.out;
  }
}

TEST(Cli, JsonCarriesEveryTermInBytes) {
  auto r = run(g + "--gpus 32 --zero 3 --recompute selective --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema"], "headroom.plan/2");
  EXPECT_TRUE(j["predicted"].get<bool>());
  const auto& s = j["stages"][0];
  EXPECT_EQ(s["total_bytes"].get<std::int64_t>(), s["state_bytes"].get<std::int64_t>() +
                                                      s["activation_bytes"].get<std::int64_t>() +
                                                      s["reserve_bytes"].get<std::int64_t>());
  // The seed's s*b*h*(34 + 80), plus the two LayerNorms' fp32 statistics (16 bytes a token).
  EXPECT_EQ(j["layer_activation_bytes"]["none"].get<std::int64_t>(), 2048LL * 12288 * 114 + 16 * 2048);
  EXPECT_EQ(j["ledger"].size(), 17u);  // Korthikanti's 15 tensors and two norm statistics

  auto sj = run(g + "--gpus 32 --suggest --json");
  auto sug = nlohmann::json::parse(sj.out);
  EXPECT_EQ(sug["fitting"][0]["layout"]["zero"], 3);
  EXPECT_EQ(sug["fitting"][0]["layout"]["recompute"], "selective");
}

TEST(Cli, CsvHasAHeaderAndARowPerStage) {
  auto r = run(g + "--gpus 16 --zero 3 --recompute full --pp 4 --csv");
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(lines(r.out), 5);
  EXPECT_EQ(r.out.rfind("stage,layers,", 0), 0u);
}

TEST(Cli, ExitStatusGatesLaunches) {
  EXPECT_EQ(run(g + "--gpus 32 --zero 3 --recompute selective").status, 0);
  EXPECT_EQ(run(g + "--gpus 8 --zero 3").status, 3);
  EXPECT_EQ(run(g + "--gpus 32 --suggest").status, 0);
  EXPECT_EQ(run("plan --preset gpt3-175b --min-gpus --max-gpus 8").status, 3);
}

TEST(Cli, HuggingFaceConfigAndModelFile) {
  auto r = run("plan --hf-config " + data + "/hf/llama2-7b.json --gpus 8 --zero 1 --recompute selective");
  EXPECT_EQ(r.status, 0) << r.err;
  r = run("plan --model " + std::string(HEADROOM_SOURCE_DIR) +
          "/presets/llama3-8b.json --gpus 8 --attention flash");
  EXPECT_EQ(r.status, 0) << r.err;
}

// Each bad input: exit 2, nothing on stdout, exactly one line on stderr naming the problem.
TEST(Cli, BadInputIsOneLineAndExitTwo) {
  struct bad {
    std::string args, says;
  };
  const bad cases[] = {
      {"plan --preset gpt5 --gpus 8", "unknown preset 'gpt5'"},
      {"plan --model " + data + "/bad/malformed.json --gpus 8", "malformed JSON"},
      {"plan --model " + data + "/bad/truncated.json --gpus 8", "malformed JSON"},
      {"plan --model " + data + "/bad/negative.json --gpus 8", "hidden"},
      {"plan --model " + data + "/bad/overflow.json --gpus 8", "overflows 64-bit"},
      {"plan --hf-config " + data + "/bad/hf_missing_field.json --gpus 8", "intermediate_size: missing"},
      {g + "--gpus 10 --tp 5", "heads (96) not divisible by tp=5"},
      {g + "--gpus 200 --pp 100", "layers (96) fewer than pp=100"},
      {g + "--gpus 8 --pp 2 --pp-layout 50,50", "sums to 100 layers, the model has 96"},
      {g + "--gpus 8 --pp 4 --pp-layout 48,48", "gives 2 stages for pp=4"},
      {g + "--gpus 8 --pp 4 --first-stage-layers 30 --last-stage-layers 31", "do not divide evenly"},
      {g + "--gpus 8 --pp 1 --first-stage-layers 30", "needs pp of at least 2"},
      {g + "--gpus 8 --pp 4 --vpp 2 --first-stage-layers 21", "vpp"},
      {g + "--gpus 8 --pp 2 --pp-layout 0,96", "every stage needs between 1 and 96 layers"},
      {g + "--gpus 8 --pp 2 --pp-layout 48,48 --first-stage-layers 40", "explicit layout excludes"},
      {g + "--gpus 8 --fixed-overheads 500", "fixed-overheads: must be smaller than gpu-mem"},
      {g + "--gpus 8 --fixed-overheads nan", "fixed-overheads"},
      {g + "--gpus 8 --zero 3 --zero3-live-params -5", "zero3-live-params"},
      {g + "--gpus 8 --loss bogus", "--loss"},
      {g + "--gpus 12 --tp 8", "does not divide 12 GPUs"},
      {g + "--gpus 0", "gpus: must be positive"},
      {g + "--gpus -8", "gpus"},
      {g + "--gpus 8 --micro-batch 0", "micro-batch: must be positive"},
      {g + "--gpus 8 --seq 1000000000", "seq: is absurd"},
      {g + "--gpus 8 --gpu-mem -1", "gpu-mem"},
      {g + "--gpus 8 --reserve 500", "reserve: must be smaller than gpu-mem"},
      {g + "--gpus 8 --zero 5", "zero"},
      {g + "--gpus 8 --recompute sometimes", "recompute"},
      {g + "--gpus eight", "gpus"},
      {g + "--gpus 99999999999", "gpus"},
      {g + "--gpus 8 --recipe bf17", "unknown recipe 'bf17'"},
      {g + "--gpus 16 --tp 16 --gpus-per-node 8", "crosses a node"},
      {"plan --gpus 8", "preset"},
      {g + "--min-gpus --csv", "--min-gpus writes a table or --json"},
      {g + "--gpus 8 --suggest --min-gpus", "choose one of --suggest and --min-gpus"},
      {"plan --preset gpt3-175b --preset llama2-7b --gpus 8", "preset"},
      {"plan --preset gpt3-175b --hf-config x.json --gpus 8", "hf-config"},
      {g, "gpus: missing"},
  };
  for (const auto& c : cases) {
    auto r = run(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << "\n" << r.out;
    EXPECT_EQ(lines(r.err), 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
  }
}

// probe and trace: files go to a directory of this process.
std::string scratch(const std::string& name) {
  const auto dir =
      std::filesystem::path(::testing::TempDir()) / ("headroom_cli_files_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto p = dir / name;
  std::filesystem::remove(p);
  return p.string();
}

const std::string z3 = "--preset gpt3-175b --gpus 32 --zero 3 --recompute selective ";

TEST(CliProbe, SimReplayMatchesThePlannerAndWritesARecord) {
  const std::string json = scratch("m.json"), svg = scratch("t.svg");
  auto r = run("probe " + z3 + "--json " + json + " --timeline " + svg);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("  peak requested, GiB                  171.11       171.11"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("CUDA context and NCCL are not modelled"), std::string::npos);
  auto j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j["schema"], "headroom.measurement/1.4");
  EXPECT_EQ(j["backend"], "sim");
  EXPECT_FALSE(j["measured"].get<bool>());
  EXPECT_EQ(j["replayed"]["peak_requested_bytes"], j["predicted"]["step_peak_bytes"]);
  EXPECT_GE(j["replayed"]["peak_reserved_bytes"].get<std::int64_t>(),
            j["replayed"]["peak_allocated_bytes"].get<std::int64_t>());
  EXPECT_TRUE(j["fixed_overheads"]["context_bytes"].is_null());
  EXPECT_NE(j["environment"]["command_line"].get<std::string>().find("--timeline"), std::string::npos);
  EXPECT_NE(slurp(svg).find("</svg>"), std::string::npos);

  // Never silently overwritten: exit 2, the file unchanged; --force replaces it.
  const std::string before = slurp(json);
  auto again = run("probe " + z3 + "--allocator raw --json " + json);
  EXPECT_EQ(again.status, 2);
  EXPECT_NE(again.err.find("refusing to overwrite"), std::string::npos);
  EXPECT_EQ(slurp(json), before);
  EXPECT_EQ(run("probe " + z3 + "--allocator raw --force --json " + json).status, 0);
  EXPECT_NE(slurp(json), before);
}

TEST(CliProbe, TraceFileReplaysToTheSamePeak) {
  const std::string trace = scratch("trace.json");
  auto t = run("trace " + z3 + "--json " + trace);
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("peak live bytes 171.11 GiB"), std::string::npos) << t.out;
  auto j = nlohmann::json::parse(slurp(trace));
  EXPECT_EQ(j["schema"], "headroom.trace/1.1");
  auto r = run("probe " + z3 + "--trace " + trace);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("171.11       171.11"), std::string::npos) << r.out;
}

TEST(CliProbe, OutOfMemoryNamesTheEventAndExitsThree) {
  auto r = run("probe --preset gpt3-175b --gpus 16 --zero 3 --recompute selective");
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.out.find("out of memory at event"), std::string::npos) << r.out;
}

TEST(CliProbe, BadInputIsOneLineAndWritesNothing) {
  const std::string bad_trace = scratch("bad_trace.json");
  {
    std::ofstream(bad_trace) << R"({"schema": "headroom.trace/1", "tensors": [{"name": "x", "bytes": 8}],
                                    "events": [["free", 0, "forward"]]})";
  }
  const std::string truncated = scratch("truncated_trace.json");
  { std::ofstream(truncated) << R"({"schema": "headroom.trace/1", "tensors": [)"; }
  const std::string out = scratch("never.json");
  struct bad {
    std::string args, says;
  };
  const bad cases[] = {
      {"probe " + z3 + "--trace " + bad_trace + " --json " + out, "which is not allocated"},
      {"probe " + z3 + "--trace " + truncated + " --json " + out, "malformed JSON"},
      {"probe " + z3 + "--max-split-size-mb 10 --json " + out, "max-split-size-mb"},
      {"probe " + z3 + "--allocator raw --expandable-segments --json " + out,
       "apply to the caching allocator"},
      {"probe " + z3 + "--granularity-mib 0 --json " + out, "granularity"},
      {"probe " + z3 + "--stage 3 --json " + out, "stage"},
      {"probe --preset gpt3-175b --gpus 40 --tp 5 --json " + out, "not divisible by tp=5"},
      {"trace " + z3 + "--vpp 2 --pp 4 --global-batch 40 --json " + out, "vpp"},
      {"probe " + z3 + "--allocator driver-pool --json " + out, "needs --backend cuda"},
      {"probe " + z3 + "--allocator driver-pool --max-split-size-mb 64 --backend cuda --json " + out,
       "apply to the caching allocator"},
      {"probe " + z3 + "--backend cuda --granularity-mib 4 --json " + out, "a GPU reports its own"},
      {"probe " + z3 + "--max-fit seq --max-fit-limit 100 --json " + out, "max-fit-limit"},
      {"probe " + z3 + "--max-fit heads --json " + out, "max-fit"},
      {"probe " + z3 + "--max-fit seq --trace " + bad_trace + " --json " + out, "no --trace"},
      {"probe " + z3 + "--overheads --bucket-mb 0 --json " + out, "bucket-mb"},
      {"probe " + z3 + "--overheads --max-fit seq --json " + out, "--overheads measures the GPU stack alone"},
  };
  for (const auto& c : cases) {
    auto r = run(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
  }
  // A layout whose state alone does not fit: the same verdict as `plan` (exit 3), and no record.
  auto r = run("probe --preset gpt3-175b --gpus 8 --zero 0 --json " + out);
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.out.find("does not fit"), std::string::npos) << r.out;
  EXPECT_EQ(run("plan --preset gpt3-175b --gpus 8 --zero 0").status, 3);
  EXPECT_FALSE(std::filesystem::exists(out));
}

// --top 0 lists every fitting layout in --min-gpus too, tight ones included: the seed's own answer at 16 GPUs
// (ZeRO-3 + full recompute, 184.3 GiB, 4% headroom, tight) is among them.
TEST(Cli, MinGpusTopZeroListsEveryFittingLayout) {
  // With micro-batch and vpp fixed: the seed's search (tp, pp, cp, sp, ZeRO, recompute).
  auto r = run(g + "--min-gpus --top 0 --micro-batch 1 --vpp 1");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("tp=1 pp=1 dp=16           169.8      4.5     10.0    184.3  tight"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("N = 16 (25 of 213 layouts fit)"), std::string::npos);
  int rows16 = 0;
  const auto at16 = r.out.find("smallest power of two");
  std::istringstream rest(r.out.substr(at16));
  for (std::string line; std::getline(rest, line);)
    rows16 += line.find("  yes  ") != std::string::npos || line.find("  tight  ") != std::string::npos;
  EXPECT_EQ(rows16, 25);
  // Searched by default, the seed's answer is still listed, with its micro-batch.
  r = run(g + "--min-gpus --top 0");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("tp=1 pp=1 dp=16 mb=1             169.8      4.5     10.0    184.3  tight"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("micro-batch searched (1, 2, 4, 8, 16; global batch 1536)"), std::string::npos);
}

// A long context where the step peak decides (README): the seed's total fits 40 GB, the peak does not.
TEST(Cli, LongContextStepPeakDecides) {
  auto r =
      run("plan --preset mpt-7b --gpus 32 --seq 65536 --zero 3 --recompute full --attention flash "
          "--gpu-mem 37.25");
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.out.find("    39.3* no\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("* total = step peak + fixed overheads"), std::string::npos);
  EXPECT_NE(r.out.find("total                                   29.8 GiB"), std::string::npos);
  EXPECT_NE(r.out.find("which decides"), std::string::npos);
  auto j = nlohmann::json::parse(run("plan --preset mpt-7b --gpus 32 --seq 65536 --zero 3 --recompute full "
                                     "--attention flash --gpu-mem 37.25 --json")
                                     .out);
  const auto& st = j["stages"][0];
  EXPECT_EQ(st["decided_by"], "step_peak");
  EXPECT_FALSE(st["fits"].get<bool>());
  EXPECT_EQ(st["peak_total_bytes"].get<std::int64_t>(),
            st["step_peak_bytes"].get<std::int64_t>() + st["fixed_overheads_bytes"].get<std::int64_t>());
  // More room outside the allocator claimed, or the unfused loss: worse, never better.
  auto unfused =
      run("plan --preset mpt-7b --gpus 32 --seq 65536 --zero 3 --recompute full --attention flash "
          "--gpu-mem 80 --loss unfused --json");
  auto fused =
      run("plan --preset mpt-7b --gpus 32 --seq 65536 --zero 3 --recompute full --attention flash "
          "--gpu-mem 80 --json");
  EXPECT_GT(nlohmann::json::parse(unfused.out)["stages"][0]["output_phase_bytes"].get<std::int64_t>(),
            nlohmann::json::parse(fused.out)["stages"][0]["output_phase_bytes"].get<std::int64_t>() * 2);
}

// Without a GPU (here, CI): one line "no CUDA device (reason)", exit 4, nothing on stdout, no file. With one
// (the device check runs this suite too) the same commands measure and exit 0.
TEST(CliProbe, CudaBackendWithoutOneSaysSo) {
  const std::string out = scratch("cuda.json");
  const std::string small = "--preset gpt3-125m --gpus 8 --zero 1 --recompute selective ";
  for (const std::string extra :
       {"", "--allocator driver-pool ", "--overheads ", "--max-fit micro-batch --max-fit-limit 4 "}) {
    std::filesystem::remove(out);
    auto r = run("probe " + small + "--backend cuda " + extra + "--json " + out);
    if (r.status == 0) {
      EXPECT_TRUE(std::filesystem::exists(out)) << extra;
      continue;
    }
    EXPECT_EQ(r.status, 4) << extra << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind("headroom: no CUDA device (", 0), 0u) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_FALSE(std::filesystem::exists(out));
  }
}

TEST(CliProbe, MaxFitOnTheSimDeviceBesideThePlanner) {
  const std::string json = scratch("maxfit.json");
  auto r = run("probe --preset gpt3-1.3b --gpus 8 --zero 3 --gpu-mem 24 --max-fit seq --json " + json);
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j["schema"], "headroom.max_fit/1");
  EXPECT_FALSE(j["measured"].get<bool>());
  EXPECT_EQ(j["axis"], "seq");
  EXPECT_EQ(j["step"], 256);
  const auto replayed = j["replayed"]["largest"].get<std::int64_t>();
  // A replay that fits has peak requested (= the planner's step peak) within the capacity.
  EXPECT_LE(replayed, j["predicted_step_peak"]["largest"].get<std::int64_t>());
  EXPECT_LE(j["predicted_verdict"]["largest"].get<std::int64_t>(), replayed);
  EXPECT_EQ(replayed % 256, 0);
  // Every trial is recorded; the largest value is one that fitted and the next step up did not.
  bool fitted = false, next_missed = false;
  for (const auto& t : j["replayed"]["trials"]) {
    if (t["value"] == replayed) fitted = t["fits"].get<bool>();
    if (t["value"] == replayed + 256) next_missed = !t["fits"].get<bool>();
  }
  EXPECT_TRUE(fitted);
  EXPECT_TRUE(next_missed);
  auto text = run("probe --preset gpt3-1.3b --gpus 8 --zero 3 --gpu-mem 24 --max-fit seq");
  EXPECT_NE(text.out.find("replayed on the sim device"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("planner, verdict"), std::string::npos);
  // Nothing fits: exit 3, and the answer says "none".
  auto none = run("probe --preset gpt3-13b --gpus 1 --gpu-mem 16 --reserve 1 --max-fit micro-batch");
  EXPECT_EQ(none.status, 3) << none.err;
  EXPECT_NE(none.out.find("none"), std::string::npos) << none.out;
}

}  // namespace

namespace {

// Writes `text` to a per-process file and returns its path.
std::string write_pack(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/headroom_pack_" + std::to_string(::getpid()) + name;
  std::ofstream(path) << text;
  return path;
}

// validate: the shipped pack agrees row by row (each row a published figure or outcome with its citation),
// exit 0; --json carries every row.
TEST(Cli, ValidateShippedPackAgrees) {
  auto r = run("validate");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("44 of 44 agree"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("arXiv 2104.04473"), std::string::npos);
  auto j = run("validate --json");
  ASSERT_EQ(j.status, 0);
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["schema"], "headroom.validate/1");
  EXPECT_EQ(doc["rows"].size(), 44u);
  for (const auto& row : doc["rows"]) EXPECT_FALSE(row["citation"].get<std::string>().empty());
}

// A run that trained predicted not to fit, or a published out-of-memory predicted to fit: exit 6, named.
TEST(Cli, ValidateContradictionExitsSix) {
  const std::string row =
      R"({"schema":"headroom.validation/1","rows":[{"id":"tiny card","kind":"trained","citation":"test",)"
      R"("published":{"gpu":"test"},"args":"--preset gpt3-175b --gpus 8 --zero 3 --gpu-mem 80"},)"
      R"({"id":"huge card","kind":"oom","citation":"test","published":{},)"
      R"("args":"--preset gpt3-125m --gpus 1 --gpu-mem 80"}]})";
  auto r = run("validate --pack " + write_pack("contra.json", row));
  EXPECT_EQ(r.status, 6) << r.out << r.err;
  EXPECT_NE(r.out.find("a run that trained is predicted not to fit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a published out-of-memory is predicted to fit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 of 2 agree"), std::string::npos);
}

// A malformed pack is one line naming the problem, exit 2.
TEST(Cli, ValidateBadPackIsOneLine) {
  const struct {
    const char *name, *text, *says;
  } cases[] = {
      {"trunc.json", R"({"schema":"headroom.validation/1","rows":[)", "JSON"},
      {"schema.json", R"({"schema":"other","rows":[]})", "not a validation pack"},
      {"kind.json",
       R"({"schema":"headroom.validation/1","rows":[{"id":"x","kind":"maybe","citation":"c",)"
       R"("args":"--preset gpt3-125m --gpus 1"}]})",
       "kind must be"},
      {"args.json",
       R"({"schema":"headroom.validation/1","rows":[{"id":"x","kind":"oom","citation":"c",)"
       R"("args":"--preset gpt3-125m --gpus 1 --tp 5"}]})",
       "tp"},
      {"noargs.json", R"({"schema":"headroom.validation/1","rows":[{"id":"x","kind":"oom","citation":"c"}]})",
       "args"},
  };
  for (const auto& c : cases) {
    auto r = run("validate --pack " + write_pack(c.name, c.text));
    EXPECT_EQ(r.status, 2) << c.name << "\n" << r.out << r.err;
    EXPECT_EQ(lines(r.err), 1) << c.name << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.name << "\n" << r.err;
  }
}

}  // namespace

namespace {

const std::string snap100 = data + "/snapshots/NiuHuangxiaozi__forward_memory_snapshot_100.pickle";

// headroom snapshot: what a real cold snapshot measured, its record and its trace.
TEST(Cli, SnapshotSummaryRecordAndTrace) {
  const std::string base = ::testing::TempDir() + "/headroom_snap_" + std::to_string(::getpid());
  std::filesystem::remove(base + ".json");
  std::filesystem::remove(base + ".trace.json");
  auto r = run("snapshot " + snap100 + " --json " + base + ".json --trace " + base + ".trace.json");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("cold: every block lands in a segment allocated inside the trace"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("peak reserved    442.00 MiB"), std::string::npos) << r.out;
  const auto rec = nlohmann::json::parse(slurp(base + ".json"));
  EXPECT_EQ(rec["schema"], "headroom.measurement/1.2");
  EXPECT_EQ(rec["backend"], "pytorch-snapshot");
  EXPECT_EQ(rec["measured"], true);
  EXPECT_EQ(rec["devices"][0]["peak_reserved"]["bytes"], 463470592);
  const auto tr = nlohmann::json::parse(slurp(base + ".trace.json"));
  EXPECT_EQ(tr["schema"], "headroom.trace/1.1");
  // Its trace names its source, not a planner case: `probe --trace` with a model refuses it.
  auto p = run("probe --preset gpt3-125m --gpus 1 --trace " + base + ".trace.json");
  EXPECT_EQ(p.status, 2) << p.out << p.err;
  EXPECT_NE(p.err.find("--snapshot"), std::string::npos) << p.err;
  // With the run's model and layout, the planner's prediction joins the record.
  std::filesystem::remove(base + ".json");
  r = run("snapshot " + snap100 + " --preset gpt3-125m --gpus 1 --json " + base + ".json");
  EXPECT_EQ(r.status, 0) << r.err;
  const auto with = nlohmann::json::parse(slurp(base + ".json"));
  EXPECT_TRUE(with.contains("predicted"));
  EXPECT_EQ(with["inputs"]["layout_spec"]["gpus"], 1);
}

// probe --snapshot: the emulation against the real allocator, and the what-if table.
TEST(Cli, ProbeSnapshotAgreesAndAsksWhatIf) {
  auto r = run("probe --snapshot " + snap100 + " --what-if");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("reserved peak                  442.00 MiB         442.00 MiB"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("agrees: every segment and every block address"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("expandable_segments:True"), std::string::npos);
  EXPECT_NE(r.out.find("least capacity that runs"), std::string::npos);
  // Too small a card: the emulation runs out of memory, exit 3.
  r = run("probe --snapshot " + snap100 + " --gpu-mem 0.25");
  EXPECT_EQ(r.status, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("OUT OF MEMORY in the emulation"), std::string::npos) << r.out;
}

// probe --snapshot --json: the replay's record, the capacity's source in it; outputs all or nothing.
TEST(Cli, ProbeSnapshotWritesItsRecord) {
  auto r = run("probe --snapshot " + snap100 + " --what-if --gpu-mem 80 --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);  // only the record on stdout
  EXPECT_EQ(j["schema"], "headroom.snapshot_replay/1");
  EXPECT_EQ(j["capacity"]["from"], "--gpu-mem");
  EXPECT_EQ(j["capacity"]["bytes"], std::int64_t{80} << 30);
  EXPECT_TRUE(j["cold"].get<bool>());
  EXPECT_TRUE(j["comparison"]["agrees"].get<bool>());
  EXPECT_TRUE(j["comparison"]["event_by_event"].get<bool>());
  EXPECT_EQ(j["real"]["peak_reserved"], 463470592);
  EXPECT_EQ(j["emulated"]["peak_reserved"], 463470592);
  EXPECT_EQ(j["what_if"].size(), 4u);
  const std::string base = ::testing::TempDir() + "/headroom_snapreplay_" + std::to_string(::getpid());
  std::filesystem::remove(base + ".json");
  r = run("probe --snapshot " + snap100 + " --json " + base + ".json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(base + ".json"))["capacity"]["from"], "unbounded");
  // The file exists now: refused before the replay, and left as it was.
  const std::string before = slurp(base + ".json");
  r = run("probe --snapshot " + snap100 + " --gpu-mem 0.25 --json " + base + ".json");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(slurp(base + ".json"), before);
  r = run("probe --snapshot " + snap100 + " --timeline " + base + ".svg");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("timeline"), std::string::npos) << r.err;
  std::filesystem::remove(base + ".json");
}

TEST(Cli, BadSnapshotIsOneLine) {
  const std::string evil = ::testing::TempDir() + "/headroom_evil_" + std::to_string(::getpid()) + ".pickle";
  std::ofstream(evil, std::ios::binary) << std::string(
      "\x80\x02"
      "cos\nsystem\n(S'echo hi'\ntR.",
      28);
  for (const std::string& args :
       {"snapshot " + evil, "probe --snapshot " + evil, "snapshot " + data + "/snapshots/README.md",
        std::string("snapshot /nonexistent.pickle"),
        "probe --snapshot " + snap100 + " --snapshot-device 4"}) {
    auto r = run(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out << r.err;
    EXPECT_EQ(lines(r.err), 1) << args << "\n" << r.err;
  }
  auto r = run("snapshot " + evil);
  EXPECT_NE(r.err.find("never loads code"), std::string::npos) << r.err;
}

}  // namespace

namespace {

const std::string cal = data + "/calibration_h200_example.json";

// The planner with a calibration: the fitted reserve replaces the seed's 10 GiB, in the table and in the
// breakdown, term by term; another GPU warns, and --strict-calibration makes it an error.
TEST(Cli, PlanWithCalibrationPinned) {
  auto r = run(g + "--gpus 32 --zero 3 --recompute selective --calibration " + cal);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("ZeRO-3 + selective recompute    tp=1 pp=1 dp=32            88.3     76.5     18.9    "
                       "183.7  tight"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("fixed 1.00 + 0.2000 x churn 89.62 + 1000.0 B x 2048 tokens"), std::string::npos)
      << r.out;
  EXPECT_TRUE(r.err.empty()) << r.err;
  r = run(g + "--gpus 32 --zero 3 --recompute selective --calibration " + cal + " --gpu 'NVIDIA B200'");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.err.find("warning"), std::string::npos);
  EXPECT_NE(r.err.find("NVIDIA B200"), std::string::npos);
  r = run(g + "--gpus 32 --zero 3 --recompute selective --calibration " + cal +
          " --gpu 'NVIDIA B200' --strict-calibration");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1);
  r = run(g + "--gpus 32 --calibration " + cal + " --reserve 5");
  EXPECT_EQ(r.status, 2);
  r = run(g + "--gpus 32 --calibration " + data + "/golden/suggest_gpt3-175b_8.txt");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1);
}

// calibrate, compare and report through the CLI on sim records written by `probe --json`.
TEST(Cli, CalibrateCompareReport) {
  const std::string dir = ::testing::TempDir() + "/headroom_cal_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/base");
  const char* cases[] = {"--preset gpt3-1.3b --gpus 8 --zero 1 --recompute none",
                         "--preset gpt3-2.7b --gpus 8 --zero 2 --recompute full",
                         "--preset gpt3-6.7b --gpus 16 --tp 2 --zero 1 --recompute selective",
                         "--preset llama2-7b --gpus 8 --zero 3 --recompute full --seq 2048"};
  int i = 0;
  for (const char* c : cases) {
    auto r = run(std::string("probe ") + c + " --gpu-mem 80 --json " + dir + "/base/r" + std::to_string(i++) +
                 ".json");
    ASSERT_EQ(r.status, 0) << c << r.err;
  }
  auto r = run("calibrate " + dir + "/base -o " + dir + "/cal.json");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("residuals"), std::string::npos) << r.out;
  const auto calj = nlohmann::json::parse(slurp(dir + "/cal.json"));
  EXPECT_EQ(calj["schema"], "headroom.calibration/1");
  EXPECT_EQ(calj["records"].size(), 4u);
  EXPECT_EQ(run(g + "--gpus 32 --zero 3 --calibration " + dir + "/cal.json").status == 0 ||
                run(g + "--gpus 32 --zero 3 --calibration " + dir + "/cal.json").status == 3,
            true);
  // A set compared with itself: nothing moved. With one planted regression: exit 6, named.
  r = run("compare " + dir + "/base " + dir + "/base");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("nothing moved"), std::string::npos);
  std::filesystem::create_directories(dir + "/new");
  for (int k = 0; k < 4; ++k) {
    auto j = nlohmann::json::parse(slurp(dir + "/base/r" + std::to_string(k) + ".json"));
    if (k == 1)
      j["replayed"]["peak_reserved_bytes"] =
          j["replayed"]["peak_reserved_bytes"].get<std::int64_t>() + (1ll << 30);
    std::ofstream(dir + "/new/r" + std::to_string(k) + ".json") << j.dump();
  }
  r = run("compare " + dir + "/base " + dir + "/new");
  EXPECT_EQ(r.status, 6) << r.out;
  EXPECT_NE(r.out.find("REGRESSION peak reserved"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 figure(s) beyond the tolerance"), std::string::npos) << r.out;
  r = run("report " + dir + "/base -o " + dir + "/report.html --calibration " + dir + "/cal.json");
  EXPECT_EQ(r.status, 0) << r.err;
  const std::string html = slurp(dir + "/report.html");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  // Too few records, or a file that is not a record: one line, exit 2.
  r = run("calibrate " + dir + "/base/r0.json -o " + dir + "/one.json");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  r = run("calibrate " + cal + " -o " + dir + "/bad.json");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
}

}  // namespace

namespace {

// Argument-level fuzzing: every numeric and path option of `plan` (and the probe's own) with adversarial
// values. Whatever the value: exit 0, 2 or 3 (never 1, never a signal); on exit 2 nothing on stdout, one
// stderr line under 300 characters, and no output file left behind.
TEST(CliProbe, OutputsAreAllOrNothingAndDashIsStdout) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("headroom_outs_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string fresh = (dir / "new.json").string(), old_svg = (dir / "old.svg").string();
  std::ofstream(old_svg) << "keep";
  // The second output is refused: the first is not created either, and the refusal comes before any work.
  auto r = run("probe --preset gpt3-125m --gpus 8 --json " + fresh + " --timeline " + old_svg);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("old.svg"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(fresh));
  // One file named for two outputs, and two outputs on standard output, are refused.
  EXPECT_EQ(run("probe --preset gpt3-125m --gpus 8 --json " + fresh + " --timeline " + fresh).status, 2);
  EXPECT_EQ(run("probe --preset gpt3-125m --gpus 8 --json - --timeline -").status, 2);
  EXPECT_FALSE(fs::exists(fresh));
  // `-` is standard output for --timeline as for --json; the file beside it is written too.
  r = run("probe --preset gpt3-125m --gpus 8 --json " + fresh + " --timeline -");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("<svg", 0), 0u) << r.out.substr(0, 80);
  EXPECT_TRUE(fs::exists(fresh));
  EXPECT_FALSE(fs::exists("-"));
  // The streamed trace is the document a reader parses back.
  r = run("trace --preset gpt3-125m --gpus 8 --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema"], "headroom.trace/1.1");
  EXPECT_GT(j["events"].size(), 100u);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 2);  // new.json and old.svg: no temporaries
  fs::remove_all(dir);
}

TEST(CliFuzz, AdversarialArgumentValues) {
  const std::string out = ::testing::TempDir() + "/headroom_argfuzz_" + std::to_string(::getpid()) + ".json";
  const std::vector<std::string> values = {
      "0",   "-1", "9223372036854775808", "1e308", "inf", "nan", "''", "abc", "'1\n2'",
      "1.5", "-0", std::string(1000, '7')};
  const std::vector<std::string> plan_opts = {"--gpus",
                                              "--tp",
                                              "--pp",
                                              "--cp",
                                              "--vpp",
                                              "--zero",
                                              "--seq",
                                              "--micro-batch",
                                              "--global-batch",
                                              "--gpu-mem",
                                              "--reserve",
                                              "--fixed-overheads",
                                              "--gpus-per-node",
                                              "--top",
                                              "--max-gpus",
                                              "--tflops",
                                              "--mfu",
                                              "--intra-node-gbs",
                                              "--inter-node-gbs",
                                              "--zero3-inflight-units",
                                              "--zero3-live-params",
                                              "--first-stage-layers",
                                              "--last-stage-layers",
                                              "--pp-layout",
                                              "--model",
                                              "--recipe",
                                              "--hf-config",
                                              "--calibration"};
  int runs = 0;
  for (const auto& opt : plan_opts)
    for (const auto& v : values) {
      const bool model = opt == "--model" || opt == "--hf-config";
      const std::string base =
          model ? "plan --gpus 8 --suggest --top 3 " : "plan --preset gpt3-125m --gpus 8 --suggest --top 3 ";
      std::filesystem::remove(out);
      const std::string args = base + opt + " " + v + " --json " + out;
      auto r = run(args);
      ++runs;
      EXPECT_TRUE(r.status == 0 || r.status == 2 || r.status == 3) << args << " -> " << r.status << "\n"
                                                                   << r.err;
      if (r.status == 2) {
        EXPECT_TRUE(r.out.empty()) << args << "\n" << r.out;
        EXPECT_EQ(lines(r.err), 1) << args << "\n" << r.err;
        EXPECT_LT(r.err.size(), 300u) << args;
        EXPECT_FALSE(std::filesystem::exists(out)) << args;
      }
    }
  const std::vector<std::string> probe_opts = {
      "--granularity-mib", "--max-split-size-mb", "--bucket-mb", "--max-fit-limit",
      "--stage",           "--snapshot",          "--trace",     "--rank-timeout"};
  for (const auto& opt : probe_opts)
    for (const auto& v : values) {
      std::filesystem::remove(out);
      const std::string args = "probe --preset gpt3-125m --gpus 8 " + opt + " " + v + " --json " + out;
      auto r = run(args);
      ++runs;
      EXPECT_TRUE(r.status == 0 || r.status == 2 || r.status == 3) << args << " -> " << r.status << "\n"
                                                                   << r.err;
      if (r.status == 2) {
        EXPECT_EQ(lines(r.err), 1) << args << "\n" << r.err;
        EXPECT_LT(r.err.size(), 300u) << args;
        EXPECT_FALSE(std::filesystem::exists(out)) << args;
      }
    }
  std::filesystem::remove(out);
  EXPECT_GT(runs, 400);
}

}  // namespace
