// report_test.cpp: calibrate/html_report.hpp, the HTML report of a record set.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "calibrate/calibration.hpp"
#include "calibrate/html_report.hpp"
#include "calibrate_support.hpp"

namespace headroom::calibrate {
namespace {

using namespace test_records;

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
