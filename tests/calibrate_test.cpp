// calibrate_test.cpp: the reserve fit recovers planted coefficients, refuses what it cannot fit, round-trips
// its file (and reads the older one) and feeds the planner (observe_test.cpp tests observations, the domain
// and the activation factor) (compare_test.cpp and report_test.cpp test the other calibrate/ parts).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "calibrate/calibration.hpp"
#include "calibrate/compare.hpp"
#include "calibrate/fit.hpp"
#include "calibrate/html_report.hpp"
#include "calibrate_support.hpp"
#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "probes/allocators/caching_allocator.hpp"
#include "probes/devices/sim_device.hpp"
#include "probes/trace/replay.hpp"
#include "test_support.hpp"

namespace headroom::calibrate {
namespace {

using probes::measurement_record;

using namespace test_records;

TEST(Calibrate, FitRecoversPlantedCoefficients) {
  const double fixed = 1.7 * gib, frag = 0.08, tok = 4096;
  const calibration c = fit(planted_set(fixed, frag, tok));
  EXPECT_NEAR(c.terms[0].value, fixed, fixed * 1e-6);
  EXPECT_NEAR(c.terms[1].value, frag, frag * 1e-6);
  EXPECT_NEAR(c.terms[2].value, tok, tok * 1e-4);
  for (int t = 0; t < term_count; ++t) EXPECT_TRUE(c.terms[t].fitted);
  EXPECT_LT(std::fabs(c.worst_residual), 4.0);  // bytes: rounding of the planted footprints only
  EXPECT_LT(c.margin, 4.0);
}

// An overheads record pins the fixed term by itself; sim records alone leave it to the documented prior.
TEST(Calibrate, OverheadsPinTheFixedTermAndSimRecordsCannot) {
  std::vector<measurement_record> sims = planted_set(0, 0.05, 0, true);
  const calibration s = fit(sims);
  EXPECT_FALSE(s.terms[0].fitted);
  EXPECT_NE(s.terms[0].why.find("not observed"), std::string::npos);
  EXPECT_NEAR(s.terms[1].value, 0.05, 1e-6);
  measurement_record o;
  o.origin = "overheads.json";
  o.kind = "overheads";
  o.backend = "cuda";
  o.measured = true;
  o.fixed_overhead_bytes = 900 * mib;
  sims.push_back(o);
  const calibration with = fit(sims);
  EXPECT_TRUE(with.terms[0].fitted);
  EXPECT_NEAR(with.terms[0].value, 900.0 * mib, 1.0);
  ASSERT_TRUE(with.fixed_overheads);
  EXPECT_EQ(*with.fixed_overheads, 900 * mib);
}

// A calibration that leaves every record exactly on its fit has no band, and says why: as many records as
// fitted terms (or an exact fit with more); a standard error or a residual gives one.
TEST(Calibrate, NoSpreadSaysWhy) {
  calibration c;
  c.records.resize(2);
  c.terms[1].fitted = c.terms[2].fitted = true;
  EXPECT_EQ(no_spread_reason(c), "2 records fit 2 terms: no spread (give more records than terms)");
  EXPECT_EQ(reserve_uncertainty(c, 1'000'000'000, 4096, 0), 0.0);
  c.records.resize(3);
  EXPECT_EQ(no_spread_reason(c), "every record is fitted exactly: no spread");
  c.worst_residual = -1e8;
  EXPECT_EQ(no_spread_reason(c), "");
  c.worst_residual = 0;
  c.terms[1].stderr_ = 0.01;
  EXPECT_EQ(no_spread_reason(c), "");
  EXPECT_GT(reserve_uncertainty(c, 1'000'000'000, 4096, 0), 0.0);
}

TEST(Calibrate, RefusesDegenerateInputs) {
  // (One record for three observed terms fits the fixed term alone: calibrate_strength_test.cpp.)
  // (Three records of one case are fitted, the terms they cannot tell apart pinned: calibrate_strength_test.cpp.)
  // A snapshot without its run's case says nothing about the reserve.
  measurement_record snap;
  snap.origin = "snap.json";
  snap.kind = "snapshot";
  snap.backend = "pytorch-snapshot";
  EXPECT_THROW(fit({snap}), bad_input);
  EXPECT_FALSE(nnls({}, {}));
}

// Every failure of the fit names the records it was given; one with no non-negative answer names those
// measured below what their case holds, with the shortfall.
TEST(Calibrate, FailuresNameTheRecords) {
  auto recs = planted_set(gib, 0.1, 10);
  auto message = [](const std::vector<measurement_record>& rs) {
    try {
      fit(rs);
    } catch (const bad_input& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string e;
  // Sim records of four models (no context column) whose reserved peaks are 1 GiB below the model's held
  // bytes: every subset's least squares is negative.
  std::vector<measurement_record> below;
  const auto sims = planted_set(gib, 0.1, 10, true);
  for (int i : {0, 2, 3, 5}) {
    auto r = sims[static_cast<std::size_t>(i)];
    r.peak_reserved = r.persistent + r.transient + r.activations - gib;
    below.push_back(r);
  }
  e = message(below);
  EXPECT_NE(e.find("no non-negative solution"), std::string::npos) << e;
  EXPECT_NE(e.find(below[0].origin + " (1024 MiB below)"), std::string::npos) << e;
  EXPECT_NE(e.find(below[1].origin + " (1024 MiB below)"), std::string::npos) << e;
}

TEST(Calibrate, FileRoundTripsAndFeedsThePlanner) {
  const calibration c = fit(planted_set(2 * gib, 0.1, 1000));
  const calibration back = calibration_from_json(nlohmann::json::parse(to_json(c).dump()), "cal.json");
  for (int t = 0; t < term_count; ++t) EXPECT_DOUBLE_EQ(back.terms[t].value, c.terms[t].value);
  EXPECT_DOUBLE_EQ(back.margin, c.margin);
  EXPECT_EQ(back.records.size(), c.records.size());
  // The planner with it: the reserve is the fitted terms for the case.
  problem p = test::preset_problem("gpt3-1.3b");
  p.device.reserve = reserve_of(back, "cal.json");
  layout l;
  l.gpus = 8;
  l.zero = 3;
  l.recompute = recompute_mode::selective;
  const breakdown bd = estimate(p, l);
  const auto& w = bd.worst_stage();
  const double churn =
      static_cast<double>(w.transient + w.activations + std::max(w.working_set, w.output_phase));
  EXPECT_NEAR(static_cast<double>(w.reserve), 2.0 * gib + c.margin + 0.1 * churn + 1000.0 * 2048, 1e4);
  // Refusals: another schema, absurd terms.
  auto j = to_json(c);
  j["schema"] = "headroom.calibration/2";
  EXPECT_THROW(calibration_from_json(j, "x"), bad_input);
  j = to_json(c);
  j["terms"]["fragmentation"]["value"] = -1;
  EXPECT_THROW(calibration_from_json(j, "x"), bad_input);
  // Mismatches are named.
  calibration named = c;
  named.gpu = "NVIDIA H200";
  EXPECT_EQ(mismatches(named, {"NVIDIA H200", "", "", ""}).size(), 0u);
  const auto m = mismatches(named, {"NVIDIA B200", "", "", ""});
  ASSERT_EQ(m.size(), 1u);
  EXPECT_NE(m[0].find("NVIDIA B200"), std::string::npos);
}

// A headroom.calibration/1 file (before the domain and the activation factor) still reads: no domain, which
// outside_domain names in one line, and no activation factor.
TEST(Calibrate, FileWithoutDomainStillReads) {
  std::ifstream in(std::string(HEADROOM_TEST_DATA) + "/calibration_h200_example.json");
  const calibration c = calibration_from_json(nlohmann::json::parse(in), "calibration_h200_example.json");
  EXPECT_FALSE(c.domain.stated);
  EXPECT_FALSE(c.activation.fitted);
  EXPECT_EQ(reserve_of(c, "x").activation_extra, 0.0);
  EXPECT_EQ(c.terms[0].value, 1073741824.0);  // as the file states it
  const auto lines = outside_domain(c, test::preset_problem("gpt3-1.3b"),
                                    test::make_layout(8, 1, recompute_mode::none), {"NVIDIA H200", "", "", ""});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("states no domain"), std::string::npos);
  EXPECT_FALSE(fixed_is_prior(c));  // the file says its fixed term was fitted
}

}  // namespace
}  // namespace headroom::calibrate
