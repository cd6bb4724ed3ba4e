// cli_calibrate_sweep_test.cpp: issue 33 item 2 through the binary: an ordinary micro-batch sweep is
// calibrated, not refused, with the term it cannot tell apart kept at its prior and the separating run named;
// a fit too weak to use gets a verdict, and `plan --calibration` then plans with the default reserve and says
// why on its reserve line (`--strict-calibration` refuses it).
#include <gtest/gtest.h>

#include "cli_support.hpp"

namespace {

// Returns the calibration file made from the observe table `csv` (tests/data/observe), and the calibrate run.
std::pair<std::string, result> calibrated(const std::string& csv) {
  const std::string dir = scratch(csv + ".records"), cal = scratch(csv + ".cal.json");
  EXPECT_EQ(run("observe " + data + "/observe/" + csv + " -o " + dir).status, 0);
  return {cal, run("calibrate " + dir + " -o " + cal)};
}

TEST(CliCalibrateSweep, MicroBatchSweepIsFittedWithATermPinned) {
  const auto [cal, r] = calibrated("device-sweep.csv");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("per_token                     0 +- 0            bytes per token  (kept at its prior, 0: "
                       "these records cannot tell it from fragmentation, which carries both; a run under "
                       "another recompute mode than full"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("headroom: warning: calibrate: per_token kept at its prior"), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.out.find("verdict: usable"), std::string::npos);
  EXPECT_NE(slurp(cal).find("\"pinned\": true"), std::string::npos);
  // Planned at one of its sizes, the calibrated reserve is the one used, with its band.
  const auto p = run("plan --hf-config " + data +
                     "/hf/qwen3-30b-a3b.json --gpus 16 --ep 8 --zero 1 --seq 4096 --micro-batch 2 --recompute full "
                     "--gpu-type h100-80gb --calibration " + cal);
  ASSERT_EQ(p.status, 0) << p.err;
  EXPECT_NE(p.out.find("  reserve     calibrated: calibration "), std::string::npos) << p.out;
  EXPECT_NE(p.out.find(" (the calibration's) "), std::string::npos) << p.out;
}

TEST(CliCalibrateSweep, WeakFitIsNamedAndNotUsed) {
  const auto [cal, r] = calibrated("example-runs.csv");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("verdict: too weak to use: the fit misses "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(+42% of the reserve it needed)"), std::string::npos) << r.out;
  const std::string plan = "plan --preset llama3-8b --gpus 8 --zero 3 --recompute full --micro-batch 2 "
                           "--gpu-type h100-80gb --calibration " + cal;
  const auto p = run(plan);
  ASSERT_EQ(p.status, 0) << p.err;
  EXPECT_NE(p.out.find("  reserve     10.0 GiB, the default reserve: calibration "), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("is too weak to use (the fit misses "), std::string::npos) << p.out;
  EXPECT_EQ(p.out.find("(the calibration's)"), std::string::npos) << "no band from a fit not used: " << p.out;
  // The default reserve's plan, to the decimal: the same table as without --calibration.
  const auto plain = run("plan --preset llama3-8b --gpus 8 --zero 3 --recompute full --micro-batch 2 "
                         "--gpu-type h100-80gb");
  const auto row = [](const std::string& out) { return out.substr(out.find("ZeRO-3 + full recompute"), 100); };
  EXPECT_EQ(row(p.out), row(plain.out));
  const auto strict = run(plan + " --strict-calibration");
  EXPECT_EQ(strict.status, 2);
  EXPECT_NE(strict.err.find("is too weak to use: the fit misses "), std::string::npos) << strict.err;
  EXPECT_NE(strict.err.find("(--strict-calibration)"), std::string::npos) << strict.err;
  EXPECT_EQ(lines(strict.err), 1);
}

}  // namespace
