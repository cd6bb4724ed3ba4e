// report_journey_test.cpp: `headroom report` on what a new user has, through the built binary: the JSON of
// `headroom plan --json` for Qwen3-30B-A3B on 16 H100 80GB beside the records `headroom observe` wrote for a
// table of runs and the calibration `headroom calibrate` fitted on them. The page carries the plan's verdict
// and totals as the plan printed them, a measured bar per observed run, the residuals calibrate printed as
// text; a truncated file, a JSON of another kind and a second calibration are refused with one line naming
// the file and what a report reads.
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "cli_support.hpp"

namespace {

const std::string journey_plan =
    "plan --hf-config " + data +
    "/hf/qwen3-30b-a3b.json --gpus 16 --gpu-type h100-80gb --pp 2 --ep 8 --zero 1 "
    "--recompute full --attention flash --seq 4096";

// Returns the figure `headroom plan` printed on its line `what`, as printed ("41.7").
std::string journey_printed(const std::string& text, const std::string& what) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\\n {2,4}" + what + " +(-?[0-9]+\\.[0-9]) GiB"))) return "?";
  return m[1];
}

// The plan, the observed runs and their calibration, reported together.
struct journey {
  std::string dir, plan_text, calibrate_text, html;
};

journey walk() {
  journey j;
  j.dir = fresh_dir("report_journey");
  const result plan = run(journey_plan + " --json " + j.dir + "/plan.json");
  EXPECT_EQ(plan.status, 0) << plan.err;
  j.plan_text = plan.out;
  const result obs = run("observe " + data + "/observe/example-runs.csv -o " + j.dir + "/observed");
  EXPECT_EQ(obs.status, 0) << obs.err;
  const result cal = run("calibrate " + j.dir + "/observed -o " + j.dir + "/cal.json");
  EXPECT_EQ(cal.status, 0) << cal.err;
  j.calibrate_text = cal.out;
  const result rep = run("report " + j.dir + "/plan.json " + j.dir + "/observed " + j.dir + "/cal.json -o " +
                         j.dir + "/report.html");
  EXPECT_EQ(rep.status, 0) << rep.err;
  EXPECT_NE(rep.out.find("headroom report: 4 records"), std::string::npos) << rep.out;
  j.html = slurp(j.dir + "/report.html");
  return j;
}

TEST(ReportJourney, PlanObservationsAndCalibrationInOnePage) {
  const journey j = walk();
  // The plan's verdict and totals, as it printed them.
  std::smatch hm;
  ASSERT_TRUE(
      std::regex_search(j.plan_text, hm, std::regex("\\n  headroom +(-?[0-9.]+) GiB \\(([-0-9.]+%)\\)")));
  EXPECT_NE(j.html.find("<b>fits: headroom " + hm[1].str() + " GiB (" + hm[2].str() + ") of " +
                        journey_printed(j.plan_text, "capacity") + " GiB"),
            std::string::npos);
  for (const char* what : {"total", "step peak \\+ fixed overheads"}) {
    const std::string fig = journey_printed(j.plan_text, what);
    const std::string name = std::regex_replace(std::string(what), std::regex("\\\\"), "");
    const std::regex cell("<td class='l'>(<b>)?" + std::string(what) + "(</b>)?</td><td>(<b>)?" +
                          std::regex_replace(fig, std::regex("\\."), "\\.") + "(</b>)?</td>");
    EXPECT_TRUE(std::regex_search(j.html, cell)) << name << " " << fig;
  }
  EXPECT_NE(j.html.find(">" + journey_printed(j.plan_text, "total") + " GiB total"), std::string::npos);
  EXPECT_NE(j.html.find(">" + journey_printed(j.plan_text, "step peak \\+ fixed overheads") +
                        " GiB step peak + fixed overheads"),
            std::string::npos);
  // A measured bar per observed run (three rows in the table), labelled with its figure.
  std::size_t bars = 0;
  for (std::size_t at = 0;
       (at = j.html.find("fill='#222'><title>measured reserved peak", at)) != std::string::npos; ++at)
    ++bars;
  EXPECT_EQ(bars, 3u);
  for (const char* f : {">30.20 GiB measured reserved peak", ">36.90 GiB measured reserved peak",
                        ">50.10 GiB measured reserved peak"})
    EXPECT_NE(j.html.find(f), std::string::npos) << f;
  EXPECT_NE(
      j.html.find("<code>headroom plan --preset llama3-8b --gpus 8 --zero 3 --seq 8192 --micro-batch 2"),
      std::string::npos);
  // The residuals calibrate printed, as the plot's text labels (GiB, two decimals).
  const std::regex printed_res(
      "/observed/(mb[0-9])\\.json \\[observation reserved_peak\\]: needed [-0-9.]+ GiB, "
      "predicted [-0-9.]+ GiB, residual (-?[0-9.]+) GiB");
  std::size_t n = 0;
  for (std::sregex_iterator i(j.calibrate_text.begin(), j.calibrate_text.end(), printed_res), e; i != e;
       ++i, ++n) {
    std::smatch lm;
    const std::string label_re =
        "class='point-label'[^>]*>[0-9]+ " + (*i)[1].str() + "\\.json ([-+][0-9.]+)</text>";
    ASSERT_TRUE(std::regex_search(j.html, lm, std::regex(label_re))) << (*i)[1];
    EXPECT_NEAR(std::stod(lm[1]), std::stod((*i)[2]), 0.0051) << (*i)[1];
  }
  EXPECT_EQ(n, 3u) << j.calibrate_text;
  EXPECT_NE(j.html.find("activation factor - 1"), std::string::npos);
}

// Returns the refusal of `headroom report FILE -o OUT` for a file holding `text`, checked to be one line
// naming the file and what a report reads, with exit 2 and nothing written.
std::string refusal(const std::string& name, const std::string& text) {
  const std::string dir = fresh_dir("report_refusal");
  std::ofstream(dir + "/" + name) << text;
  const result r = run("report " + dir + "/" + name + " -o " + dir + "/r.html");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(name), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/r.html"));
  return r.err;
}

TEST(ReportJourney, BadInputsAreOneLineNamingTheFileAndWhatIsRead) {
  const std::string dir = fresh_dir("report_inputs");
  ASSERT_EQ(run(journey_plan + " --json " + dir + "/plan.json").status, 0);
  const std::string plan = slurp(dir + "/plan.json");
  const std::string truncated = refusal("truncated.json", plan.substr(0, plan.size() / 2));
  EXPECT_NE(truncated.find("malformed JSON"), std::string::npos) << truncated;
  EXPECT_NE(truncated.find("expected a measurement record"), std::string::npos) << truncated;
  ASSERT_EQ(run(journey_plan + " --suggest --json " + dir + "/suggest.json").status, 0);
  const std::string suggest = refusal("suggest.json", slurp(dir + "/suggest.json"));
  EXPECT_NE(suggest.find("a headroom.suggest document"), std::string::npos) << suggest;
  EXPECT_NE(suggest.find("`plan --json` of one layout"), std::string::npos) << suggest;
  const std::string other = refusal("other.json", "{\"runs\": []}");
  EXPECT_NE(other.find("not a headroom document"), std::string::npos) << other;
  auto edited = nlohmann::json::parse(plan);
  edited["stages"][0]["total_bytes"] = edited["stages"][0]["total_bytes"].get<std::int64_t>() + 1;
  const std::string e = refusal("edited.json", edited.dump());
  EXPECT_NE(e.find("total_bytes"), std::string::npos) << e;
  ASSERT_EQ(run("observe " + data + "/observe/example-runs.csv -o " + dir + "/observed").status, 0);
  ASSERT_EQ(run("calibrate " + dir + "/observed -o " + dir + "/cal.json").status, 0);
  const result two = run("report " + dir + "/plan.json " + dir + "/cal.json --calibration " + dir +
                         "/cal.json -o " + dir + "/r.html");
  EXPECT_EQ(two.status, 2);
  EXPECT_EQ(lines(two.err), 1) << two.err;
  EXPECT_NE(two.err.find("cal.json"), std::string::npos) << two.err;
  EXPECT_NE(two.err.find("given twice"), std::string::npos) << two.err;
}

}  // namespace
