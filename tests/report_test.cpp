// report_test.cpp: calibrate/html_report.hpp, the HTML report of a record set: well-formed and
// self-contained, every string escaped, the snapshot view of a real PyTorch snapshot drawn with its peak
// exact, hostile views refused with a line, a 30,000-event snapshot's page under 5 MB, and the page rendered
// by a real headless browser (chromium) to a DOM with every section and a non-blank screenshot.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "calibrate/calibration.hpp"
#include "calibrate/html_report.hpp"
#include "calibrate/report_snapshot.hpp"
#include "calibrate_support.hpp"
#include "planner/errors.hpp"
#include "probes/snapshots/snapshot.hpp"
#include "probes/snapshots/snapshot_record.hpp"
#include "probes/snapshots/summary.hpp"

namespace headroom::calibrate {
namespace {

using namespace test_records;

const std::string report_data = headroom::data;

// Returns how many times `what` occurs in `s`.
std::size_t report_count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = 0; (at = s.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

// The snapshot record of a real cold snapshot (NiuHuangxiaozi's forward passes, tests/data/snapshots).
probes::measurement_record report_snapshot_record(nlohmann::json* doc = nullptr) {
  const std::string path = report_data + "/snapshots/NiuHuangxiaozi__forward_memory_snapshot_100.pickle";
  const auto s = probes::load_snapshot(path);
  const nlohmann::json j = probes::snapshot_record(s, probes::summarise(s));
  if (doc) *doc = j;
  return probes::measurement_from_json(j, path);
}

TEST(Report, IsSelfContainedAndWellFormed) {
  const auto recs = planted_set(gib, 0.1, 100);
  const std::string html = html_report(recs, fit(recs), "test report");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(report_count(html, "http://"), report_count(html, "http://www.w3.org/2000/svg"));
  for (const char* tag : {"html", "body", "table", "svg", "h1", "h2", "tr"})
    EXPECT_EQ(report_count(html, std::string("<") + tag + (std::string(tag) == "tr" ? ">" : "")),
              report_count(html, std::string("</") + tag + ">"))
        << tag;
  for (const char* section : {"Records", "Predicted totals against the capacity", "Calibration",
                              "Residuals of the reserve", "bytes per token", "Domain"})
    EXPECT_NE(html.find(section), std::string::npos) << section;
  // Readable numbers: no exponent anywhere in the page's text (1.1073e+09 was the defect).
  EXPECT_EQ(html.find("e+0"), std::string::npos);
  EXPECT_EQ(html.find("e+1"), std::string::npos);
  // No empty section: nothing about snapshots or probe timelines when no record has one.
  EXPECT_EQ(html.find("Measured snapshots"), std::string::npos);
  // Names stand in the chart's title column: each row's name is a bold text line of its own.
  EXPECT_EQ(report_count(html, "font-weight='bold' font-size='12'>"), recs.size());
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
  report_extras x;
  x.command_lines.assign(recs.size(), "headroom probe --preset '<x>'");
  const std::string html = html_report(recs, cal, "<title>'t'", x);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>bold"), std::string::npos);
  EXPECT_EQ(html.find("'x'"), std::string::npos);
  EXPECT_EQ(html.find("onload='y'"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;.json"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;bold&lt;/b&gt; &amp; &#39;quoted&#39;"), std::string::npos);
  EXPECT_EQ(report_count(html, "headroom probe --preset &#39;&lt;x&gt;&#39;"), recs.size());
}

// A real snapshot's view agrees with the summary's independent walk (probes/snapshots/summary.cpp): the
// peak requested to the byte, at the same event, its largest block; the downsampled columns keep the peak,
// the stack at the peak sums to it, and the segments at the peak are what the reserved curve says then.
TEST(Report, SnapshotViewKeepsThePeakExact) {
  nlohmann::json doc;
  const auto r = report_snapshot_record(&doc);
  const auto s = probes::load_snapshot(r.origin);
  const auto sum = probes::summarise(s);
  const auto& v = r.snapshot_view;
  ASSERT_TRUE(v.is_object());
  const auto& d = sum.devices.at(0);
  EXPECT_EQ(v["events"].get<std::size_t>(), d.events);
  EXPECT_EQ(v["peak"]["requested"].get<std::int64_t>(), d.peak_requested);
  EXPECT_EQ(v["peak"]["event"].get<std::size_t>(), d.peak_requested_event);
  EXPECT_LE(v["columns"].size(), probes::snapshot_view_limits::columns);
  std::int64_t most = 0, stacked = 0;
  for (std::size_t c = 0; c < v["columns"].size(); ++c) {
    const auto& col = v["columns"][c];
    most = std::max(most, col[2].get<std::int64_t>());
    if (col[0].get<std::size_t>() <= d.peak_requested_event &&
        d.peak_requested_event < col[1].get<std::size_t>())
      for (const auto& b : v["stacks"][c]) stacked += b.get<std::int64_t>();
  }
  EXPECT_EQ(most, d.peak_requested);
  EXPECT_EQ(stacked, d.peak_requested);
  ASSERT_FALSE(v["largest_at_peak"].empty());
  EXPECT_EQ(v["largest_at_peak"][0]["bytes"].get<std::int64_t>(), d.largest_at_peak.at(0).size);
  EXPECT_FALSE(v["largest_at_peak"][0]["stack"].empty());
  EXPECT_EQ(v["segments_at_peak"]["bytes"].get<std::int64_t>(), v["peak"]["reserved"].get<std::int64_t>());
  std::int64_t live = 0;
  for (const auto& g : v["segments_at_peak"]["list"]) live += g["live_bytes"].get<std::int64_t>();
  EXPECT_EQ(live, d.peak_requested);  // a cold trace: every live block lies in a listed segment
  const std::string html = html_report({r}, std::nullopt, "snapshot");
  for (const char* part : {"Measured snapshots", "Memory timeline", "Largest allocations at the peak",
                           "Segments at the peak", "<polygon", "<details>", "<title>"})
    EXPECT_NE(html.find(part), std::string::npos) << part;
}

// A view that headroom did not write is refused with one line naming the field, never drawn unchecked.
TEST(Report, HostileSnapshotViewsAreRefusedWithALine) {
  const auto good = report_snapshot_record();
  const std::vector<std::pair<std::string, nlohmann::json>> edits = {
      {"/events", "many"},
      {"/events", -5},
      {"/columns/0", nlohmann::json::array({1, 0, 0, 0})},
      {"/columns/1/2", -1},
      {"/columns/1/3", 1e300},
      {"/stacks/0", nlohmann::json::array({1})},
      {"/frames/0", 7},
      {"/peak/event", std::int64_t{1} << 50},
      {"/largest_at_peak/0/stack", "not a list"},
      {"/largest_at_peak/0/address", -1},
      {"/segments_at_peak/list/0/live_bytes", nullptr},
      {"/segments_at_peak", nlohmann::json::array()},
      {"/stacks", nlohmann::json::array()},
  };
  for (const auto& [at, value] : edits) {
    auto r = good;
    r.snapshot_view[nlohmann::json::json_pointer(at)] = value;
    EXPECT_THROW(report::snapshot_view_html(r), bad_input) << at;
    const std::string html = html_report({r}, std::nullopt, "hostile");
    EXPECT_NE(html.find("Not drawn: "), std::string::npos) << at;
  }
  auto huge = good;
  huge.snapshot_view["frames"] = nlohmann::json::array();
  for (int i = 0; i < 100'000; ++i) huge.snapshot_view["frames"].push_back("f");
  EXPECT_THROW(report::snapshot_view_html(huge), bad_input);
  EXPECT_NO_THROW(report::snapshot_view_html(good));
}

// A synthetic 30,000-event snapshot (a sawtooth with one planted spike): its record's view and its page
// stay small (under 5 MB; issue 20), and the spike, one event wide, is drawn at its exact height.
TEST(Report, ThirtyThousandEventSnapshotStaysSmallAndKeepsItsPeak) {
  probes::torch_snapshot s;
  s.origin = "synthetic.pickle";
  const std::int64_t seg = 4 * gib;
  const std::uint64_t base = 0x7f0000000000;
  std::vector<probes::snap_event> ev;
  ev.push_back({probes::snap_action::segment_alloc, base, seg});
  const std::int64_t spike = 3 * gib + 12345;
  for (int i = 0; ev.size() < 30'000; ++i) {
    const std::uint64_t a = base + static_cast<std::uint64_t>(i % 50) * 8 * mib;
    const std::int64_t b = ev.size() == 17'001 ? spike : (1 + i % 7) * mib;
    ev.push_back({probes::snap_action::alloc, ev.size() == 17'001 ? base + 512 * mib : a, b});
    ev.push_back({probes::snap_action::free_requested, ev.back().addr, b});
  }
  s.devices.push_back(ev);
  probes::snap_segment g;
  g.address = base;
  g.total_size = seg;
  s.segments.push_back(g);
  const auto j = probes::snapshot_record(s, probes::summarise(s));
  EXPECT_LT(j.dump().size(), std::size_t{1} << 20);
  const auto r = probes::measurement_from_json(j, "synthetic.json");
  EXPECT_EQ(r.snapshot_view["peak"]["requested"].get<std::int64_t>(), spike);
  EXPECT_EQ(r.snapshot_view["peak"]["event"].get<std::int64_t>(), 17'001);
  const std::string html = html_report({r}, std::nullopt, "30,000 events");
  EXPECT_LT(html.size(), std::size_t{5} << 20);
  EXPECT_NE(html.find("peak 3.00 GiB at event 17001"), std::string::npos);
}

// The browser, or the reason it is not there: in CI (CI or HEADROOM_CI set) a missing chromium fails.
std::string report_browser() {
  for (const char* b : {"chromium", "chromium-browser"})
    if (std::system((std::string("command -v ") + b + " >/dev/null 2>&1").c_str()) == 0) return b;
  return "";
}

// Runs headless chromium on `html` with `what` ("--dump-dom" or "--screenshot=FILE"); returns its stdout.
std::string report_render(const std::string& browser, const std::string& dir, const std::string& page,
                          const std::string& what) {
  const std::string out = dir + "/out.txt";
  const std::string cmd = "timeout 120 " + browser +
                          " --headless --no-sandbox --disable-gpu --no-first-run " +
                          "--user-data-dir=" + dir + "/profile --window-size=1200,2400 " + what + " file://" +
                          page + " >" + out + " 2>/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(out);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The report of a plan (`headroom plan --json`, tests/data/report), a probe set, a calibration, a real
// snapshot and its replay, rendered by a real browser: every section is in the DOM it built, the plan's
// verdict and totals among them, and the screenshot is not blank (far larger than a blank page's).
TEST(Report, RendersInAHeadlessBrowser) {
  const std::string browser = report_browser();
  if (browser.empty()) {
    if (std::getenv("CI") || std::getenv("HEADROOM_CI"))
      FAIL() << "no headless chromium in CI (.ci/install-deps installs Debian's chromium)";
    GTEST_SKIP() << "no headless chromium installed (apt-get install chromium): not rendered";
  }
  auto recs = planted_set(gib, 0.1, 100);
  nlohmann::json snap;
  recs.push_back(report_snapshot_record(&snap));
  report_extras x;
  x.command_lines.assign(recs.size(), "");
  x.command_lines[0] = "headroom probe --preset gpt3-1.3b --gpus 8 --json r.json";
  x.replays.push_back(
      {"replay.json",
       {{"source", snap["source"]},
        {"real", {{"peak_reserved", 100 * mib}, {"segments_created", 5}}},
        {"emulated", {{"peak_reserved", 100 * mib}, {"segments_created", 5}, {"oom", nullptr}}},
        {"comparison", {{"compared", true}, {"agrees", true}}},
        {"what_if",
         {{{"setting", "expandable_segments"},
           {"peak_reserved", 90 * mib},
           {"maps", 3},
           {"least_capacity", 92 * mib},
           {"start", "cold"}}}}}});
  const std::string plan = report_data + "/report/qwen3-30b-a3b-plan.json";
  x.plans.push_back({plan, nlohmann::json::parse(std::ifstream(plan))});
  const std::string html = html_report(recs, fit(planted_set(gib, 0.1, 100)), "browser test", x);
  const std::string dir = ::testing::TempDir() + "/headroom_report_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/r.html") << html;
  std::ofstream(dir + "/blank.html") << "<!DOCTYPE html><html><body></body></html>";
  const auto t0 = std::chrono::steady_clock::now();
  const std::string dom = report_render(browser, dir, dir + "/r.html", "--dump-dom");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "rendered " << html.size() << " bytes in " << seconds << " s\n";
  // The plan's totals as it printed them (tests/data/report/qwen3-30b-a3b-plan.txt), drawn as labels.
  std::ifstream printed_plan(report_data + "/report/qwen3-30b-a3b-plan.txt");
  const std::string plan_text((std::istreambuf_iterator<char>(printed_plan)),
                              std::istreambuf_iterator<char>());
  for (const char* line : {"total", "step peak + fixed overheads", "capacity"}) {
    const auto at = plan_text.find(std::string("  ") + line + "   ");
    ASSERT_NE(at, std::string::npos) << line;
    std::istringstream figure(plan_text.substr(at + std::string(line).size() + 2));
    std::string gib_figure;
    figure >> gib_figure;
    const std::string label =
        std::string(line) == "capacity" ? "capacity " + gib_figure + " GiB" : gib_figure + " GiB " + line;
    EXPECT_NE(html.find(label), std::string::npos) << label;
  }
  for (const char* part : {"<h1>browser test</h1>",
                           "The plan",
                           "qwen3-30b-a3b on 16 GPUs",
                           "<b>fits: headroom",
                           "Predicted totals against the capacity",
                           "Calibration",
                           "activation factor - 1",
                           "class=\"point-label\"",
                           "@media print",
                           "Residuals of the reserve",
                           "Measured snapshots",
                           "Memory timeline",
                           "Largest allocations at the peak",
                           "Segments at the peak",
                           "Real beside emulated",
                           "What if",
                           "agrees with the real allocator",
                           "<polygon",
                           "<circle",
                           "<details>",
                           "headroom probe --preset gpt3-1.3b"})
    EXPECT_NE(dom.find(part), std::string::npos) << part;
  EXPECT_EQ(dom.find("<parsererror"), std::string::npos);
  report_render(browser, dir, dir + "/r.html", "--screenshot=" + dir + "/r.png");
  report_render(browser, dir, dir + "/blank.html", "--screenshot=" + dir + "/blank.png");
  ASSERT_TRUE(std::filesystem::exists(dir + "/r.png"));
  ASSERT_TRUE(std::filesystem::exists(dir + "/blank.png"));
  const auto page = std::filesystem::file_size(dir + "/r.png"),
             blank = std::filesystem::file_size(dir + "/blank.png");
  EXPECT_GT(page, 40'000u);
  EXPECT_GT(page, 4 * blank) << "the screenshot is about as large as a blank page's";
  // HEADROOM_REPORT_SCREENSHOT=FILE keeps the screenshot to look at (docs/report.md, "The browser test").
  if (const char* keep = std::getenv("HEADROOM_REPORT_SCREENSHOT"))
    std::filesystem::copy_file(dir + "/r.png", keep, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace headroom::calibrate
