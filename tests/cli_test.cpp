// cli_test.cpp: runs the built `headroom` binary: the reference case's commands with their exact output, exit
// statuses, JSON and CSV, and one clear error line for each kind of bad input; validate, calibrate, compare
// and report. The probe commands: cli_probe_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_support.hpp"

namespace {

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
  EXPECT_TRUE(schema_is(j, "headroom.plan/2")) << j["schema"];
  EXPECT_TRUE(j["predicted"].get<bool>());
  const auto& s = j["stages"][0];
  EXPECT_EQ(s["total_bytes"].get<std::int64_t>(), s["state_bytes"].get<std::int64_t>() +
                                                      s["activation_bytes"].get<std::int64_t>() +
                                                      s["reserve_bytes"].get<std::int64_t>());
  // The reference case's s*b*h*(34 + 80), plus the two LayerNorms' fp32 statistics (16 bytes a token).
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
  EXPECT_EQ(r.out.rfind("gpus,tp,pp,cp,dp,", 0), 0u);  // the layout and training columns first
  EXPECT_NE(r.out.find(",stage,layers,"), std::string::npos);
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

// --top 0 lists every fitting layout in --min-gpus too, tight ones included: the reference answer at 16 GPUs
// (ZeRO-3 + full recompute, 184.3 GiB, 4% headroom, tight) is among them.
TEST(Cli, MinGpusTopZeroListsEveryFittingLayout) {
  // With micro-batch and vpp fixed: the reference search (tp, pp, cp, sp, ZeRO, recompute).
  auto r = run(g + "--min-gpus --top 0 --micro-batch 1 --vpp 1");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("tp=1 pp=1 dp=16           169.8      4.5     10.0    184.3  tight"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("N = 16 (25 of 213 layouts fit)"), std::string::npos);
  int rows16 = 0;
  const auto at16 = r.out.find("smallest count in whole nodes of 8");
  std::istringstream rest(r.out.substr(at16));
  for (std::string line; std::getline(rest, line);)
    rows16 += line.find("  yes  ") != std::string::npos || line.find("  tight  ") != std::string::npos;
  EXPECT_EQ(rows16, 25);
  // Searched by default, the reference answer is still listed, with its micro-batch.
  r = run(g + "--min-gpus --top 0");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("tp=1 pp=1 dp=16 mb=1             169.8      4.5     10.0    184.3  tight"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("micro-batch searched (1, 2, 4, 8, 16; global batch 1536)"), std::string::npos);
}

// A long context where the step peak decides (README): the reference total fits 40 GB, the peak does not.
TEST(Cli, LongContextStepPeakDecides) {
  auto r =
      run("plan --preset mpt-7b --gpus 32 --seq 65536 --zero 3 --recompute full --attention flash "
          "--gpu-mem 37.25");
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.out.find("    39.4* no\n"), std::string::npos) << r.out;
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

}  // namespace

namespace {

// Writes `text` to a per-process file and returns its path.
std::string write_pack(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/headroom_pack_" + std::to_string(::getpid()) + name;
  std::ofstream(path) << text;
  return path;
}

// validate: the shipped pack row by row (each row a published figure or outcome with its citation); three
// published outcomes disagree today (docs/validation.md), and a disagreement is the exit status that says so;
// --json carries every row.
TEST(Cli, ValidateShippedPackReportsEveryRow) {
  auto r = run("validate");
  EXPECT_EQ(r.status, 6) << r.out << r.err;
  EXPECT_NE(r.out.find("90 of 93 agree"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("arXiv 2104.04473"), std::string::npos);
  auto j = run("validate --json");
  ASSERT_EQ(j.status, 6);
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_TRUE(schema_is(doc, "headroom.validate/1")) << doc["schema"];
  EXPECT_EQ(doc["rows"].size(), 93u);
  for (const auto& row : doc["rows"]) EXPECT_FALSE(row["citation"].get<std::string>().empty());
}

// Returns row `i` of the shipped pack (presets/validation/published.json), for a test to change.
nlohmann::json shipped_row(std::size_t i) {
  std::ifstream in(std::string(HEADROOM_SOURCE_DIR) + "/presets/validation/published.json");
  return nlohmann::json::parse(in)["rows"].at(i);
}

std::string pack_text(const std::vector<nlohmann::json>& rows) {
  return nlohmann::json{{"schema", "headroom.validation/2"}, {"rows", rows}}.dump();
}

// A run that trained predicted not to fit, or a published out-of-memory predicted to fit: exit 6, named.
TEST(Cli, ValidateContradictionExitsSix) {
  nlohmann::json trained = shipped_row(20);  // Narayanan 1.7B, trained on 80 GB: here on a 12 GiB card
  ASSERT_EQ(trained["kind"], "trained");
  trained["problem"]["device"]["capacity_bytes"] = std::int64_t{12} << 30;
  nlohmann::json oom = shipped_row(33);  // GPT-2 XL's published out-of-memory on 32 GB: here on 192 GiB
  ASSERT_EQ(oom["kind"], "oom");
  oom["problem"]["device"]["capacity_bytes"] = std::int64_t{192} << 30;
  auto r = run("validate --pack " + write_pack("contra.json", pack_text({trained, oom})));
  EXPECT_EQ(r.status, 6) << r.out << r.err;
  EXPECT_NE(r.out.find("a run that trained is predicted not to fit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a published out-of-memory is predicted to fit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 of 2 agree"), std::string::npos);
}

// A malformed pack is one line naming the problem, exit 2.
TEST(Cli, ValidateBadPackIsOneLine) {
  nlohmann::json kind = shipped_row(33), tp = shipped_row(33), none = shipped_row(33);
  kind["kind"] = "maybe";
  tp["layout"]["tp"] = 5;
  none.erase("problem");
  const struct {
    std::string name, text, says;
  } cases[] = {
      {"trunc.json", R"({"schema":"headroom.validation/2","rows":[)", "JSON"},
      {"schema.json", R"({"schema":"other","rows":[]})", "not a headroom.validation document"},
      {"flags.json", R"({"schema":"headroom.validation/1","rows":[]})", "no longer read"},
      {"kind.json", pack_text({kind}), "kind must be"},
      {"tp.json", pack_text({tp}), "tp*pp*cp = 5"},
      {"noproblem.json", pack_text({none}), "problem"},
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

const std::string cal = data + "/calibration_h200_example.json";

// The planner with a calibration: the fitted reserve replaces the reference 10 GiB, in the table and in the
// breakdown, term by term; another GPU warns, and --strict-calibration makes it an error.
TEST(Cli, PlanWithCalibrationPinned) {
  auto r = run(g + "--gpus 32 --zero 3 --recompute selective --calibration " + cal);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("ZeRO-3 + selective recompute    tp=1 pp=1 dp=32            88.3     76.5     18.9    "
                       "183.7  tight"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("fixed 1.00 + 0.2000 x churn 89.62 + 1000 B/token x 2048 tokens"), std::string::npos)
      << r.out;
  EXPECT_TRUE(r.err.empty()) << r.err;
  r = run(g + "--gpus 32 --zero 3 --recompute selective --calibration " + cal + " --calibration-gpu 'NVIDIA B200'");
  EXPECT_EQ(r.status, 0);
  // The warning is printed before the table, under the title with the other assumptions.
  const auto warning = r.out.find("warning: outside the calibration's domain");
  EXPECT_NE(warning, std::string::npos) << r.out;
  EXPECT_LT(warning, r.out.find("strategy "));
  EXPECT_NE(r.out.find("NVIDIA B200"), std::string::npos);
  r = run(g + "--gpus 32 --zero 3 --recompute selective --calibration " + cal +
          " --calibration-gpu 'NVIDIA B200' --strict-calibration");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1);
  r = run(g + "--gpus 32 --calibration " + cal + " --reserve 5");
  EXPECT_EQ(r.status, 2);
  r = run(g + "--gpus 32 --calibration " + data + "/golden/suggest_gpt3-175b_8.txt");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1);
}

// calibrate, compare and report through the CLI on sim records written by `probe replay --json`.
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
    auto r = run(std::string("probe replay ") + c + " --gpu-mem 80 --json " + dir + "/base/r" +
                 std::to_string(i++) + ".json");
    ASSERT_EQ(r.status, 0) << c << r.err;
  }
  auto r = run("calibrate " + dir + "/base -o " + dir + "/cal.json");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("residuals"), std::string::npos) << r.out;
  const auto calj = nlohmann::json::parse(slurp(dir + "/cal.json"));
  EXPECT_TRUE(schema_is(calj, "headroom.calibration/1")) << calj["schema"];
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
  // One record fits the first term it observes exactly, the other kept at its prior with one warning line
  // (cli_calibrate_sweep_test.cpp); a file that is not a record: one line, exit 2.
  r = run("calibrate " + dir + "/base/r0.json -o " + dir + "/one.json");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("per_token kept at its prior"), std::string::npos) << r.err;
  r = run("calibrate " + cal + " -o " + dir + "/bad.json");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
}

}  // namespace

namespace {

// Argument-level fuzzing: every numeric and path option of `plan` with adversarial values (the probe's own:
// cli_probe_test.cpp). Whatever the value: exit 0, 2 or 3 (never 1, never a signal); on exit 2 nothing on
// stdout, one stderr line under 300 characters, and no output file left behind.
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
  std::filesystem::remove(out);
  EXPECT_GT(runs, 300);
}

}  // namespace

// `plan`, `trace` and --suggest with every axis fixed agree on which layouts are valid (planner/layout.hpp:
// layout_error and schedule_error): a layout the interleaved schedule cannot run is refused by all three,
// `plan` and `trace` with one error line (exit 2), the search by evaluating nothing.
TEST(Cli, PlanTraceAndSearchAgreeOnValidLayouts) {
  struct layout_case {
    int gpus, tp, pp, vpp, micro_batch, global_batch;
    bool valid;
  };
  const layout_case cases[] = {
      {16, 1, 4, 2, 1, 24, false},  // dp 4: 6 micro-batches per step, not a multiple of pp = 4
      {16, 1, 4, 2, 1, 32, true},    {16, 1, 4, 1, 1, 24, true},  // 1F1B runs any count
      {8, 1, 2, 2, 2, 24, false},     // dp 4, micro-batch 2: 3 micro-batches, pp = 2
      {8, 1, 2, 2, 3, 24, true},      // ceil(24 / 12) = 2
      {16, 1, 3, 1, 1, 1536, false},  // pp = 3 does not divide 16 GPUs
      {16, 2, 2, 5, 1, 1536, false},  // 12 layers per stage, not divisible by vpp = 5
      {8, 2, 2, 2, 1, 64, true},
  };
  for (const auto& c : cases) {
    const std::string flags = "--preset gpt3-1.3b --gpus " + std::to_string(c.gpus) + " --tp " +
                              std::to_string(c.tp) + " --pp " + std::to_string(c.pp) + " --vpp " +
                              std::to_string(c.vpp) + " --micro-batch " + std::to_string(c.micro_batch) +
                              " --global-batch " + std::to_string(c.global_batch);
    const auto plan = run("plan " + flags);
    const auto trace = run("trace " + flags);
    const auto search =
        run("plan " + flags + " --suggest --cp 1 --zero 1 --recompute selective --sequence-parallel");
    if (c.valid) {
      EXPECT_TRUE(plan.status == 0 || plan.status == 3) << flags << "\n" << plan.err;
      EXPECT_EQ(trace.status, 0) << flags << "\n" << trace.err;
      EXPECT_NE(search.out.find("; 1 layouts evaluated"), std::string::npos) << flags << "\n" << search.out;
    } else {
      EXPECT_EQ(plan.status, 2) << flags;
      EXPECT_EQ(trace.status, 2) << flags;
      EXPECT_EQ(lines(plan.err), 1) << flags << "\n" << plan.err;
      EXPECT_TRUE(plan.out.empty()) << flags;
      EXPECT_EQ(plan.err, trace.err) << flags;  // the same rule, the same words
      EXPECT_TRUE(search.status == 2 || search.out.find("; 0 layouts evaluated") != std::string::npos)
          << flags << "\n"
          << search.out << search.err;
    }
  }
}
