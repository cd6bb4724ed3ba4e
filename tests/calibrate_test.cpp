// calibrate_test.cpp: the reserve fit recovers planted coefficients, refuses what it cannot fit, round-trips
// its file and feeds the planner; compare flags exactly the planted regressions; the HTML report is
// well-formed (and renders in a real headless browser when one is installed).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "calibrate/calibration.hpp"
#include "calibrate/compare.hpp"
#include "calibrate/fit.hpp"
#include "calibrate/html_report.hpp"
#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "probes/allocators/caching_allocator.hpp"
#include "probes/trace/replay.hpp"
#include "probes/devices/sim_device.hpp"
#include "test_support.hpp"

namespace headroom::calibrate {
namespace {

using probes::measurement_record;

// A record of `preset` on `l` whose footprint obeys a planted reserve: fixed + frag x churn + tok x tokens.
measurement_record planted(const std::string& preset, const layout& l, std::int64_t seq, double fixed,
                           double frag, double tok, bool cuda) {
  problem p = test::preset_problem(preset);
  p.training.seq = seq;
  const breakdown b = estimate(p, l);
  const auto& w = b.worst_stage();
  measurement_record r;
  r.origin = preset + " seq " + std::to_string(seq) + " " + axes_string(l) + (cuda ? " cuda" : " sim");
  r.kind = "probe";
  r.backend = cuda ? "cuda" : "sim";
  r.measured = cuda;
  r.inputs = p;
  r.where = b.where;
  r.stage = w.stage;
  r.persistent = w.persistent;
  r.transient = w.transient;
  r.activations = w.activations;
  r.working_set = w.working_set;
  r.output_phase = w.output_phase;
  const double churn =
      static_cast<double>(w.transient + w.activations + std::max(w.working_set, w.output_phase));
  const double tokens = static_cast<double>(reserve_tokens(p, l));
  const double model = static_cast<double>(w.persistent + w.transient + w.activations);
  const double foot = model + (cuda ? fixed : 0) + frag * churn + tok * tokens;
  if (cuda) {
    r.device_used_at_peak = static_cast<std::int64_t>(std::llround(foot)) + 300 * mib;
    r.used_before_context = 300 * mib;  // what another process held: subtracted
  } else {
    r.peak_reserved = static_cast<std::int64_t>(std::llround(foot));
  }
  return r;
}

std::vector<measurement_record> planted_set(double fixed, double frag, double tok, bool all_sim = false) {
  std::vector<measurement_record> out;
  const struct {
    const char* preset;
    int gpus, zero;
    recompute_mode r;
    std::int64_t seq;
    bool cuda;
  } cases[] = {{"gpt3-1.3b", 8, 1, recompute_mode::none, 2048, true},
               {"gpt3-1.3b", 8, 3, recompute_mode::selective, 4096, true},
               {"gpt3-2.7b", 8, 2, recompute_mode::full, 1024, true},
               {"gpt3-6.7b", 16, 3, recompute_mode::full, 8192, false},
               {"llama2-7b", 8, 3, recompute_mode::selective, 2048, true},
               {"gpt3-350m", 4, 0, recompute_mode::none, 512, false}};
  for (const auto& c : cases) {
    layout l;
    l.gpus = c.gpus;
    l.zero = c.zero;
    l.recompute = c.r;
    out.push_back(planted(c.preset, l, c.seq, fixed, frag, tok, c.cuda && !all_sim));
  }
  return out;
}

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

TEST(Calibrate, RefusesDegenerateInputs) {
  // One record for three observed terms.
  auto recs = planted_set(gib, 0.1, 10);
  EXPECT_THROW(fit({recs[0]}), bad_input);
  // Two CUDA records of the same case: churn and tokens move together with the fixed column.
  try {
    fit({recs[0], recs[0], recs[0]});
    FAIL();
  } catch (const bad_input& e) {
    EXPECT_NE(std::string(e.what()).find("cannot tell these terms apart"), std::string::npos) << e.what();
  }
  // A snapshot without its run's case says nothing about the reserve.
  measurement_record snap;
  snap.origin = "snap.json";
  snap.kind = "snapshot";
  snap.backend = "pytorch-snapshot";
  EXPECT_THROW(fit({snap}), bad_input);
  EXPECT_FALSE(nnls({}, {}));
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
  EXPECT_EQ(mismatches(named, {"NVIDIA H200", "", ""}).size(), 0u);
  const auto m = mismatches(named, {"NVIDIA B200", "", ""});
  ASSERT_EQ(m.size(), 1u);
  EXPECT_NE(m[0].find("NVIDIA B200"), std::string::npos);
}

measurement_record simple(const std::string& model, std::int64_t reserved, double frag) {
  measurement_record r;
  r.kind = "probe";
  r.backend = "sim";
  r.allocator = "caching";
  r.peak_reserved = reserved;
  r.peak_allocated = reserved / 2;
  r.fragmentation = frag;
  r.raw = {{"inputs", {{"layout", "tp=1 pp=1 dp=8, ZeRO-1, recompute none"}}}};
  r.inputs = test::preset_problem(model);
  return r;
}

TEST(Compare, FlagsExactlyThePlantedRegressions) {
  std::vector<measurement_record> base = {simple("gpt3-1.3b", 40 * gib, 0.10),
                                          simple("gpt3-2.7b", 60 * gib, 0.20),
                                          simple("gpt3-6.7b", 70 * gib, 0.05)};
  auto fresh = base;
  fresh[0].peak_reserved += 5 * gib;             // regression: +12.5%
  fresh[1].peak_reserved += 32 * mib;            // moved, within 2% / 64 MiB
  fresh[2].fragmentation = 0.15;                 // regression: +10 points
  fresh.push_back(simple("llama2-7b", gib, 0));  // only in the new set
  const comparison c = compare(base, fresh, {});
  EXPECT_EQ(c.regressions, 2);
  EXPECT_EQ(c.moved.size(), 3u);
  ASSERT_EQ(c.only_new.size(), 1u);
  EXPECT_TRUE(c.only_baseline.empty());
  for (const auto& m : c.moved) {
    if (m.figure == "peak reserved" && m.key.find("gpt3-2.7b") != std::string::npos) {
      EXPECT_FALSE(m.exceeds);
    }
    if (m.figure == "peak reserved" && m.key.find("gpt3-1.3b") != std::string::npos) {
      EXPECT_TRUE(m.exceeds);
    }
    if (m.figure == "fragmentation") {
      EXPECT_TRUE(m.exceeds);
    }
  }
  EXPECT_EQ(compare(base, base, {}).moved.size(), 0u);
}

// The report as a user sees it: one well-formed, self-contained HTML file; rendered by a real headless
// browser to a non-blank screenshot when Debian's chromium is installed.
TEST(Report, IsSelfContainedAndWellFormed) {
  const auto recs = planted_set(gib, 0.1, 100);
  const std::string html = html_report(recs, fit(recs), "test report");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://") == std::string::npos ||
                html.find("http://www.w3.org/2000/svg") != std::string::npos,
            true);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  for (const char* tag : {"html", "body", "table", "svg", "h1"}) {
    std::size_t open = 0, close = 0;
    for (std::size_t at = 0; (at = html.find(std::string("<") + tag, at)) != std::string::npos; ++at) ++open;
    for (std::size_t at = 0; (at = html.find(std::string("</") + tag + ">", at)) != std::string::npos; ++at)
      ++close;
    EXPECT_EQ(open, close) << tag;
  }
  EXPECT_NE(html.find("Residuals of the reserve"), std::string::npos);
  EXPECT_NE(html.find("fragmentation"), std::string::npos);
  const char* browsers[] = {"chromium", "chromium-browser"};
  std::string browser;
  for (const char* b : browsers)
    if (std::system((std::string("command -v ") + b + " >/dev/null 2>&1").c_str()) == 0) browser = b;
  if (browser.empty())
    GTEST_SKIP() << "no headless chromium installed (apt-get install chromium): not rendered";
  const std::string dir = ::testing::TempDir() + "/headroom_report_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/r.html") << html;
  const std::string shot = dir + "/r.png";
  const std::string cmd = browser + " --headless --no-sandbox --disable-gpu --screenshot=" + shot +
                          " --window-size=1200,900 file://" + dir + "/r.html >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  ASSERT_TRUE(std::filesystem::exists(shot));
  EXPECT_GT(std::filesystem::file_size(shot), 10000u);  // a blank 1200x900 PNG compresses far below this
}

// Every string from a record or a calibration is escaped in the report: markup is shown, never run, in
// text and attribute values alike.
TEST(Report, EscapesEveryStringFromARecord) {
  auto recs = planted_set(gib, 0.1, 100);
  recs[0].origin = "<script>alert('x')</script>.json";
  recs[1].origin = "a\" onload='y'.json";
  calibration cal = fit(recs);
  cal.margin_rule = "<img src=x onerror='z'>";
  cal.terms[0].why = "<b>bold</b> & 'quoted'";
  const std::string html = html_report(recs, cal, "<title>'t'");
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_EQ(html.find("'x'"), std::string::npos);
  EXPECT_EQ(html.find("onload='y'"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;.json"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;bold&lt;/b&gt; &amp; &#39;quoted&#39;"), std::string::npos);
}

}  // namespace
}  // namespace headroom::calibrate
