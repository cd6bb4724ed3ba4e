// calibrate_strength_test.cpp: what the fit does with records that cannot tell two terms apart (a
// micro-batch sweep: the later term keeps its prior, the earlier carries both, and the record that would
// separate them is named), the column test behind it (calibrate/fit.hpp dependent_columns), and the verdict
// on a fit too weak to use (calibrate/strength.hpp weakness).
#include <gtest/gtest.h>

#include <cmath>

#include "calibrate/calibration.hpp"
#include "calibrate/fit.hpp"
#include "calibrate_support.hpp"

namespace headroom::calibrate {
namespace {

using namespace test_records;

// Returns the churn (planner/stage_terms.hpp: transient + activations + the larger of the working set and the
// output phase) and the tokens of a record, from its own fields, not through the fit.
std::pair<double, double> churn_and_tokens(const measurement_record& r) {
  return {static_cast<double>(r.transient + r.activations + std::max(r.working_set, r.output_phase)),
          static_cast<double>(r.inputs->training.seq * r.inputs->training.micro_batch)};
}

// Three CUDA runs of llama3-8b, ZeRO-3 on 8 GPUs, full recompute, seq 8192, micro-batch 1, 2 and 4, whose
// footprints obey a planted reserve.
std::vector<measurement_record> micro_batch_sweep(double fixed, double frag, double tok) {
  layout l;
  l.gpus = 8;
  l.zero = 3;
  l.recompute = recompute_mode::full;
  std::vector<measurement_record> out;
  for (std::int64_t mb : {1, 2, 4}) out.push_back(planted("llama3-8b", l, 8192, fixed, frag, tok, true, mb));
  return out;
}

TEST(DependentColumns, NamesTheLaterColumnAndTheEarlierItFollows) {
  // Independent columns: none is dependent.
  EXPECT_EQ(dependent_columns({{1, 2, 0}, {1, 5, 1}, {1, 1, 7}}), (std::vector<int>{-1, -1, -1}));
  // The third is three times the second: it is named, with the second.
  EXPECT_EQ(dependent_columns({{1, 2, 6}, {1, 5, 15}, {1, 1, 3}}), (std::vector<int>{-1, -1, 1}));
  // No pair is proportional, but the third is the sum of the first two (an affine churn): still dependent.
  const std::vector<std::vector<double>> affine = {{1, 2, 3}, {1, 5, 6}, {1, 9, 10}};
  const auto d = dependent_columns(affine);
  EXPECT_EQ(d[0], -1);
  EXPECT_EQ(d[1], -1);
  EXPECT_EQ(d[2], 1);  // the third lies closer to the second (cos 0.998) than to the first
  // An all-zero column has nothing to tell apart; a column 3% off the other's direction is independent, one
  // 0.003% off is not.
  EXPECT_EQ(dependent_columns({{0, 1, 1}, {0, 2, 2.15}, {0, 3, 3}}), (std::vector<int>{-1, -1, -1}));
  EXPECT_EQ(dependent_columns({{0, 1, 1}, {0, 2, 2.0001}, {0, 3, 3}}), (std::vector<int>{-1, -1, 1}));
}

// The sweep: churn and tokens grow together, so per_token keeps its prior (0) and fragmentation
// carries both; a planted fragmentation-only reserve is recovered exactly, with nothing refused.
TEST(CalibrateSweep, MicroBatchSweepPinsPerTokenAndRecoversTheRest) {
  const auto recs = micro_batch_sweep(1.5 * gib, 0.12, 0);
  // The degenerate case: the churn grows by the same bytes per token from micro-batch 1 to 2 as from 2 to 4,
  // so (1, churn, tokens) has rank 2 and only two of the three terms can be fitted.
  const auto [c1, t1] = churn_and_tokens(recs[0]);
  const auto [c2, t2] = churn_and_tokens(recs[1]);
  const auto [c4, t4] = churn_and_tokens(recs[2]);
  ASSERT_NEAR((c2 - c1) / (t2 - t1), (c4 - c2) / (t4 - t2), 1e-4 * (c4 - c2) / (t4 - t2));
  const calibration c = fit(recs);
  EXPECT_TRUE(c.terms[2].pinned);
  EXPECT_FALSE(c.terms[2].fitted);
  EXPECT_EQ(c.terms[2].value, 0);
  EXPECT_NE(c.terms[2].why.find("cannot tell it from fragmentation"), std::string::npos) << c.terms[2].why;
  EXPECT_NE(c.terms[2].why.find("another recompute mode than full, or of a model of another width"), std::string::npos) << c.terms[2].why;
  EXPECT_NEAR(c.terms[0].value, 1.5 * gib, 0.001 * gib);
  EXPECT_NEAR(c.terms[1].value, 0.12, 1e-4);
  EXPECT_FALSE(c.terms[0].pinned || c.terms[1].pinned);
  EXPECT_EQ(weakness(c), "");
}

// A reserve planted on the per-token term: the sweep cannot say so, fragmentation carries it, and the
// records are still predicted to within a few per cent of what they needed (the terms move together here).
TEST(CalibrateSweep, APerTokenReserveIsCarriedByFragmentation) {
  const auto recs = micro_batch_sweep(1.5 * gib, 0, 300'000);
  const calibration c = fit(recs);
  EXPECT_TRUE(c.terms[2].pinned);
  EXPECT_GT(c.terms[1].value, 0);
  for (const auto& o : c.records) EXPECT_LT(std::fabs(o.residual), 0.03 * o.y) << o.origin;
}

// Three records of one case: only the fixed term can be fitted; the others are pinned, naming a record of
// another size as what would separate them, and the fixed term is the reserve the case needed.
TEST(CalibrateSweep, OneCaseThreeTimesFitsTheFixedTermOnly) {
  const auto recs = planted_set(gib, 0.1, 10);
  const calibration c = fit({recs[0], recs[0], recs[0]});
  EXPECT_TRUE(c.terms[1].pinned);
  EXPECT_TRUE(c.terms[2].pinned);
  EXPECT_NE(c.terms[1].why.find("cannot tell it from fixed"), std::string::npos) << c.terms[1].why;
  // One record alone: the same, exactly (no spread).
  const calibration one = fit({recs[0]});
  EXPECT_TRUE(one.terms[1].pinned && one.terms[2].pinned);
  EXPECT_NEAR(one.terms[0].value, one.records[0].y, 1.0);
  EXPECT_NE(c.terms[1].why.find("a run of another size (micro-batch or sequence length)"), std::string::npos);
  EXPECT_NEAR(c.terms[0].value, c.records[0].y, 1.0);
}

// The file keeps which terms were pinned; a file written before 1.4 reads as none pinned.
TEST(CalibrateSweep, PinnedRoundTrips) {
  const calibration c = fit(micro_batch_sweep(gib, 0.1, 0));
  auto j = nlohmann::json::parse(to_json(c).dump());
  EXPECT_TRUE(calibration_from_json(j, "cal.json").terms[2].pinned);
  j["terms"]["per_token"].erase("pinned");
  EXPECT_FALSE(calibration_from_json(j, "cal.json").terms[2].pinned);
}

// The verdict: a loose term that carries a record's reserve, or a record missed by a quarter of its reserve
// (and half a GiB), makes the fit too weak to use; a loose term that carries nothing, or a small miss, not.
TEST(CalibrateStrength, WeakFitsAreNamed) {
  calibration c;
  observation o;
  o.origin = "runs/a.json";
  o.x = {0, 0, 0};
  o.y = 4.0 * gib;
  o.activations = 4.0 * gib;
  c.records = {o};
  c.activation = {0.58, 0.57, true, false, ""};  // the factor: 0.58 +- 0.57
  std::string w = weakness(c);
  EXPECT_NE(w.find("the activations term 0.58 +- 0.57 (98% of its value"), std::string::npos) << w;
  c.records[0].activations = 0.1 * gib;  // 0.058 GiB of a 4 GiB reserve: under a tenth, harmless
  EXPECT_EQ(weakness(c), "");
  c.records[0].residual = 1.5 * gib;  // 37.5% of the 4 GiB it needed
  w = weakness(c);
  EXPECT_NE(w.find("the fit misses runs/a.json by 1.50 GiB (+38% of the reserve it needed)"), std::string::npos)
      << w;
  c.records[0].residual = -0.4 * gib;  // under the 0.5 GiB floor
  EXPECT_EQ(weakness(c), "");
  c.records[0].y = 0.8 * gib;
  c.records[0].residual = -0.6 * gib;  // 75%, and above the floor
  EXPECT_NE(weakness(c).find("by -0.60 GiB (-75%"), std::string::npos) << weakness(c);
}

// A fit on planted records is recovered exactly: usable.
TEST(CalibrateStrength, PlantedFitIsUsable) {
  EXPECT_EQ(weakness(fit(planted_set(1.7 * gib, 0.08, 4096))), "");
}

}  // namespace
}  // namespace headroom::calibrate
