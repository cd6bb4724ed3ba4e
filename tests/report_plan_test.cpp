// report_plan_test.cpp: the report's answer (calibrate/report_plan.hpp, calibrate/report_svg.hpp): a
// `headroom plan --json` is shown with the figures the plan printed beside it (tests/data/report: the JSON and
// the text of one `headroom plan` run), every measured figure is a bar beside its prediction on the one scale
// of the chart, residuals are labelled in text, one unit a column, no label crosses a capacity line, and
// a document that is not what `plan --json` writes is refused by its field.
#include "calibrate/report_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "calibrate/calibration.hpp"
#include "calibrate/html_report.hpp"
#include "calibrate/observations.hpp"
#include "calibrate/report_svg.hpp"
#include "calibrate_support.hpp"
#include "planner/errors.hpp"
#include "planner/format.hpp"

namespace headroom::calibrate {
namespace {

using namespace test_records;

const std::string plan_data = std::string(headroom::data) + "/report/qwen3-30b-a3b-plan";

std::string plan_slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Returns the GiB figure `headroom plan` printed on its line `what` ("  total   41.7 GiB ..."), as printed.
std::string printed(const std::string& text, const std::string& what) {
  std::smatch m;
  const std::regex line("\\n {2,4}" + what + " +(-?[0-9]+\\.[0-9]) GiB");
  if (!std::regex_search(text, m, line)) return "not printed: " + what;
  return m[1];
}

// The SVG's marks, read back from the page: rectangles, texts and capacity lines, in chart pixels.
struct svg_rect {
  double x, y, w;
  std::string fill, title;
};
struct svg_text {
  double x, y;
  std::string text;
};
struct svg_line {
  double x, y1, y2;
};

// Returns the chart of totals of `html` (its <svg> element).
std::string totals_chart(const std::string& html) {
  const auto at = html.find("aria-label='predicted totals");
  if (at == std::string::npos) return "";
  const auto from = html.rfind("<svg", at);
  return html.substr(from, html.find("</svg>", at) - from);
}

std::vector<svg_rect> rects(const std::string& svg) {
  std::vector<svg_rect> out;
  const std::regex r(
      "<rect x='([-0-9.]+)' y='([-0-9.]+)' width='([-0-9.]+)' height='[0-9.]+' fill='(#[0-9a-f]+)'>"
      "<title>([^<]*)</title>");
  for (std::sregex_iterator i(svg.begin(), svg.end(), r), e; i != e; ++i)
    out.push_back({std::stod((*i)[1]), std::stod((*i)[2]), std::stod((*i)[3]), (*i)[4], (*i)[5]});
  return out;
}

std::vector<svg_text> texts(const std::string& svg) {
  std::vector<svg_text> out;
  const std::regex r("<text[^>]* x='([-0-9.]+)' y='([-0-9.]+)'[^>]*>([^<]*)</text>");
  for (std::sregex_iterator i(svg.begin(), svg.end(), r), e; i != e; ++i)
    out.push_back({std::stod((*i)[1]), std::stod((*i)[2]), (*i)[3]});
  return out;
}

std::vector<svg_line> capacity_lines(const std::string& svg) {
  std::vector<svg_line> out;
  const std::regex r("<line class='capacity' x1='([0-9.]+)' x2='[0-9.]+' y1='([0-9.]+)' y2='([0-9.]+)'");
  for (std::sregex_iterator i(svg.begin(), svg.end(), r), e; i != e; ++i)
    out.push_back({std::stod((*i)[1]), std::stod((*i)[2]), std::stod((*i)[3])});
  return out;
}

// Returns the bytes a mark's title states ("state: 4.80 GiB (predicted)" -> 4.80 GiB), or -1.
double title_bytes(const std::string& title) {
  std::smatch m;
  if (!std::regex_search(title, m, std::regex(": (-?[0-9.]+) GiB"))) return -1;
  return std::stod(m[1]) * static_cast<double>(gib);
}

// The three observed runs of docs/calibrating.md's example (tests/data/observe/example-runs.csv) as the
// records `headroom observe` writes, a device-used and an allocated-peak row beside them.
std::vector<probes::measurement_record> observed_runs() {
  const std::string csv =
      "name,problem,figure,value,unit,source\n"
      "mb1,--preset llama3-8b --gpus 8 --zero 3 --seq 8192 --micro-batch 1 --recompute "
      "full,reserved_peak,30.2,GiB,log\n"
      "mb2,--preset llama3-8b --gpus 8 --zero 3 --seq 8192 --micro-batch 2 --recompute "
      "full,reserved_peak,36.9,GiB,log\n"
      "mb4,--preset llama3-8b --gpus 8 --zero 3 --seq 8192 --micro-batch 4 --recompute "
      "full,reserved_peak,50.1,GiB,log\n"
      "smi,--preset llama3-8b --gpus 8 --zero 3 --seq 8192 --micro-batch 2 --recompute "
      "full,device_used,41200,MiB,smi\n"
      "alloc,--preset llama3-8b --gpus 8 --zero 3 --seq 8192 --micro-batch 2 --recompute "
      "full,allocated_peak,33.0,GiB,log\n";
  std::vector<probes::measurement_record> out;
  const std::int64_t mbs[] = {1, 2, 4, 2, 2};
  const auto rows = observations_from_csv(csv, "runs.csv");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    problem p = test::preset_problem("llama3-8b");
    p.training.seq = 8192;
    p.training.micro_batch = mbs[i];
    const layout l = test::make_layout(8, 3, recompute_mode::full);
    const auto j =
        nlohmann::json::parse(observation_record(rows[i], p, l, "headroom observe runs.csv -o d").dump());
    out.push_back(probes::measurement_from_json(j, "observed/" + rows[i].name + ".json"));
  }
  return out;
}

report_extras with_plan(std::size_t records) {
  report_extras x;
  x.command_lines.assign(records, "headroom observe runs.csv -o d");
  x.plans.push_back({plan_data + ".json", nlohmann::json::parse(plan_slurp(plan_data + ".json"))});
  return x;
}

// The plan's totals in the page are those `headroom plan` printed, to the printed decimal: in its table, in
// its verdict and as the labels of its bars; and its bars stack to those totals on the chart's scale.
TEST(ReportPlan, TotalsAreThePlansPrintedFigures) {
  const std::string text = plan_slurp(plan_data + ".txt");
  const std::string html = html_report({}, std::nullopt, "plan", with_plan(0));
  for (const char* what : {"state", "activations", "reserve", "total", "step peak", "fixed overheads",
                           "step peak \\+ fixed overheads", "capacity", "headroom"}) {
    const std::string gib_figure = printed(text, what);
    ASSERT_EQ(gib_figure.find("not"), std::string::npos) << gib_figure;
    const std::string name = std::regex_replace(std::string(what), std::regex("\\\\"), "");
    const std::regex cell("<tr><td class='l'>(<b>)?" + std::string(what) + "(</b>)?</td><td>(<b>)?" +
                          std::regex_replace(gib_figure, std::regex("\\."), "\\.") + "(</b>)?</td>");
    EXPECT_TRUE(std::regex_search(html, cell)) << name << " " << gib_figure;
  }
  std::smatch hm;
  ASSERT_TRUE(std::regex_search(text, hm, std::regex("headroom +(-?[0-9.]+) GiB \\(([-0-9.]+%)\\)")));
  EXPECT_NE(html.find("fits: headroom " + hm[1].str() + " GiB (" + hm[2].str() + ")"), std::string::npos);
  EXPECT_NE(html.find("<b>fits: headroom"), std::string::npos);
  const std::string svg = totals_chart(html);
  ASSERT_FALSE(svg.empty());
  const auto labels = texts(svg);
  auto labelled = [&](const std::string& s) {
    return std::any_of(labels.begin(), labels.end(),
                       [&](const svg_text& t) { return t.text.rfind(s, 0) == 0; });
  };
  EXPECT_TRUE(labelled(printed(text, "total") + " GiB total")) << svg;
  EXPECT_TRUE(labelled(printed(text, "step peak \\+ fixed overheads") + " GiB step peak + fixed overheads"));
  // The two bars on one scale: each part's width over its bytes is the same, and the bars' lengths are in
  // the ratio of the plan's two totals (from its JSON, not from the page).
  const auto j = nlohmann::json::parse(plan_slurp(plan_data + ".json"));
  const auto& w = j["stages"][j["worst_stage"].get<std::size_t>()];
  std::map<double, double> bar_px;  // bar y -> its length
  for (const auto& r : rects(svg)) bar_px[r.y] += r.w;
  ASSERT_GE(bar_px.size(), 2u);
  const double total_px = bar_px.begin()->second, peak_px = std::next(bar_px.begin())->second;
  EXPECT_NEAR(total_px / peak_px, w["total_bytes"].get<double>() / w["peak_total_bytes"].get<double>(),
              0.003);
}

// Every observation (reserved, device-used and allocated figures alike) has a measured bar beside its
// prediction, on the scale its predicted parts are drawn on; its command is its run's plan, not observe.
TEST(ReportPlan, EveryMeasuredFigureIsABarOnTheOneScale) {
  const auto recs = observed_runs();
  const std::string html = html_report(recs, std::nullopt, "observed", with_plan(recs.size()));
  const std::string svg = totals_chart(html);
  std::vector<svg_rect> measured;
  double k_lo = 1e9, k_hi = 0;
  for (const auto& r : rects(svg)) {
    if (r.fill == "#222") measured.push_back(r);
    const double b = title_bytes(r.title);
    if (b < 2.0 * static_cast<double>(gib)) continue;  // a small part's width is rounded too coarsely
    k_lo = std::min(k_lo, r.w / b);
    k_hi = std::max(k_hi, r.w / b);
  }
  ASSERT_EQ(measured.size(), recs.size());
  EXPECT_LT((k_hi - k_lo) / k_lo, 0.01) << "the bars are not on one scale";
  const char* figures[] = {"30.20 GiB measured reserved peak", "36.90 GiB measured reserved peak",
                           "50.10 GiB measured reserved peak", "40.23 GiB measured device used",
                           "33.00 GiB measured allocated peak"};
  const auto labels = texts(svg);
  for (const char* f : figures)
    EXPECT_TRUE(std::any_of(labels.begin(), labels.end(), [&](const svg_text& t) {
      return t.text.rfind(f, 0) == 0;
    })) << f;
  // Each measured bar lies under the two predicted bars of its own row (its y is 41 to 48 px below theirs).
  for (const auto& m : measured) {
    const auto rs = rects(svg);
    EXPECT_TRUE(std::any_of(rs.begin(), rs.end(),
                            [&](const svg_rect& r) { return r.fill != "#222" && m.y - r.y == 41; }));
  }
  EXPECT_NE(html.find("<code>headroom plan --preset llama3-8b --gpus 8 --zero 3 --seq 8192 --micro-batch 4"),
            std::string::npos);
  EXPECT_EQ(html.find("<code>headroom observe"), std::string::npos);
  EXPECT_NE(html.find("observed: mb4, row 3 (reserved_peak); log"), std::string::npos);
}

// The residual plot names each point in text (the printed page has no hover): its number in the table, its
// record and its residual in GiB, the residual being the fit's own (calibration.cpp), not recomputed here.
TEST(ReportPlan, ResidualsAreLabelledInText) {
  const auto recs = planted_set(gib, 0.1, 100);
  auto noisy = recs;
  noisy[0].device_used_at_peak = *noisy[0].device_used_at_peak + 700 * mib;
  const calibration c = fit(noisy);
  const std::string html = html_report(noisy, c, "residuals");
  std::vector<std::string> labels;
  const std::regex r("<text class='point-label' x='[-0-9.]+' y='[-0-9.]+'>([^<]*)</text>");
  for (std::sregex_iterator i(html.begin(), html.end(), r), e; i != e; ++i) labels.push_back((*i)[1]);
  ASSERT_EQ(labels.size(), noisy.size());
  for (std::size_t i = 0; i < noisy.size(); ++i) {
    const double res = c.records[i].residual / static_cast<double>(gib);
    const std::string want = std::to_string(i + 1) + " " + report::short_name(noisy[i].origin).substr(0, 25);
    EXPECT_EQ(labels[i].rfind(want, 0), 0u) << labels[i] << " / " << want;
    EXPECT_NE(labels[i].find((res >= 0 ? "+" : "") + fixed(res, 2)), std::string::npos)
        << labels[i] << " " << res;
  }
}

// Returns, per column of each table of `html`, the byte units its cells state (GiB, MiB, KiB).
std::vector<std::set<std::string>> column_units(const std::string& html) {
  std::vector<std::set<std::string>> out;
  const std::regex table("<table[^>]*>([\\s\\S]*?)</table>"), row("<tr>([\\s\\S]*?)</tr>"),
      cell("<t[dh][^>]*>([\\s\\S]*?)</t[dh]>"), unit("[0-9] (GiB|MiB|KiB)\\b");
  for (std::sregex_iterator t(html.begin(), html.end(), table), e; t != e; ++t) {
    std::vector<std::set<std::string>> cols;
    const std::string body = (*t)[1];
    for (std::sregex_iterator r(body.begin(), body.end(), row); r != e; ++r) {
      const std::string cells = (*r)[1];
      std::size_t c = 0;
      for (std::sregex_iterator d(cells.begin(), cells.end(), cell); d != e; ++d, ++c) {
        if (cols.size() <= c) cols.resize(c + 1);
        const std::string v = (*d)[1];
        for (std::sregex_iterator u(v.begin(), v.end(), unit); u != e; ++u) cols[c].insert((*u)[1]);
      }
    }
    out.insert(out.end(), cols.begin(), cols.end());
  }
  return out;
}

// No column of any table mixes units, whatever the figures' sizes (MiB-sized sim probes beside GiB-sized
// observations and a plan).
TEST(ReportPlan, OneUnitPerColumn) {
  auto recs = observed_runs();
  for (const auto& r : planted_set(gib, 0.1, 100)) recs.push_back(r);
  recs.push_back(simple("gpt3-125m", 300 * mib, 0.1));
  const std::string html =
      html_report(recs, fit(planted_set(gib, 0.1, 100)), "units", with_plan(recs.size()));
  for (const auto& units : column_units(html)) {
    std::string all;
    for (const auto& u : units) all += u + " ";
    EXPECT_LE(units.size(), 1u) << all;
  }
}

// No text of the chart lies across a capacity line, for a plan, for observations on another capacity and
// for labels that would fall on the line (a plan's totals left of its capacity, the label running on).
TEST(ReportPlan, LabelsNeverCrossTheCapacityLine) {
  auto recs = observed_runs();
  for (auto& r : recs) r.inputs->device.capacity = 52 * gib;  // just past the largest figure: labels reach it
  const std::string svg = totals_chart(html_report(recs, std::nullopt, "labels", with_plan(recs.size())));
  const auto lines = capacity_lines(svg);
  ASSERT_EQ(lines.size(), recs.size() + 1);
  std::size_t near = 0;
  for (const auto& t : texts(svg))
    for (const auto& l : lines) {
      if (t.y < l.y1 || t.y - 11 > l.y2) continue;  // a text spans 11 px above its baseline
      const double x1 = t.x + report::label_width(t.text.size());
      EXPECT_FALSE(t.x - report::label_clearance < l.x && l.x < x1 + report::label_clearance)
          << "'" << t.text << "' at " << t.x << " crosses the capacity line at " << l.x;
      near += std::fabs(t.x - l.x) < 20;
    }
  EXPECT_GT(near, 0u) << "no label was moved past a line: the case does not test the rule";
}

// The page uses the window's width and has a print view.
TEST(ReportPlan, UsesThePageWidthAndPrints) {
  const std::string html = html_report(observed_runs(), std::nullopt, "width", with_plan(5));
  EXPECT_NE(html.find("@media print"), std::string::npos);
  EXPECT_NE(html.find("svg.chart{display:block;width:100%"), std::string::npos);
  EXPECT_EQ(html.find("max-width:1060px"), std::string::npos);
  EXPECT_NE(totals_chart(html).find("viewBox='0 0 1400 "), std::string::npos);
}

// A plan that is not what `plan --json` writes is refused with one line naming the field.
TEST(ReportPlan, EditedOrForeignPlansAreRefusedByField) {
  const auto good = nlohmann::json::parse(plan_slurp(plan_data + ".json"));
  EXPECT_NO_THROW(report::parse_plan(good, "p.json"));
  const std::vector<std::pair<std::string, nlohmann::json>> edits = {
      {"/stages/0/total_bytes", 1},
      {"/stages/0/state_bytes", "a lot"},
      {"/stages/0/headroom_bytes", std::int64_t{1} << 50},
      {"/stages", nlohmann::json::array()},
      {"/worst_stage", 7},
      {"/fits", "yes"},
      {"/schema", "headroom.suggest/2.2"},
      {"/schema", "headroom.plan/9.0"},
      {"/layout", nullptr},
  };
  for (const auto& [at, value] : edits) {
    auto j = good;
    j[nlohmann::json::json_pointer(at)] = value;
    try {
      report::parse_plan(j, "p.json");
      ADD_FAILURE() << at << " accepted";
    } catch (const bad_input& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("p.json", 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace headroom::calibrate
