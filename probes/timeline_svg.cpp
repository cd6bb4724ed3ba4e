// timeline_svg.cpp: the memory timeline drawing (see timeline_svg.hpp). Long traces are reduced to at most
// 1200 columns, each keeping the largest value of its events, so no peak is lost.
#include "timeline_svg.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "planner/format.hpp"
#include "planner/units.hpp"

namespace headroom::probes {

namespace {
std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else
      o += c;
  }
  return o;
}
}  // namespace

std::string timeline_svg(const step_trace& t, const replay_result& r, std::int64_t capacity,
                         const std::string& title) {
  const double W = 1100, H = 470, left = 70, right = 150, top = 46, bottom = 50;
  const double pw = W - left - right, ph = H - top - bottom;
  const std::size_t n = r.timeline.size();
  const std::size_t cols = std::max<std::size_t>(1, std::min<std::size_t>(n, 1200));
  std::int64_t ymax = capacity;
  for (const auto& p : r.timeline) ymax = std::max(ymax, p.reserved);
  const double ygib = std::max(1.0, std::ceil(to_gib(ymax) * 1.05));
  auto x_of = [&](double event) { return left + pw * event / std::max<double>(1, static_cast<double>(n)); };
  auto y_of = [&](double gib_value) { return top + ph * (1 - gib_value / ygib); };

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  // The title wraps at "; " so long layouts and allocator descriptions stay on the page.
  const auto cut = title.find("; ");
  o << "<text x=\"" << left << "\" y=\"16\" font-size=\"13\">" << escape(title.substr(0, cut)) << "</text>\n";
  if (cut != std::string::npos)
    o << "<text x=\"" << left << "\" y=\"32\" font-size=\"11\" fill=\"#444444\">"
      << escape(title.substr(cut + 2)) << "</text>\n";
  // Phases, shaded as runs of events.
  const char* fill[] = {"#eeeeee", "#e3efff", "#fff1d6", "#ffe3e3", "#e6f6e6"};
  std::size_t start = 0;
  for (std::size_t i = 1; i <= n; ++i) {
    if (i < n && t.events[i].when == t.events[start].when) continue;
    const auto ph_idx = static_cast<int>(t.events[start].when);
    o << "<rect x=\"" << x_of(static_cast<double>(start)) << "\" y=\"" << top << "\" width=\""
      << std::max(0.5, x_of(static_cast<double>(i)) - x_of(static_cast<double>(start))) << "\" height=\""
      << ph << "\" fill=\"" << fill[ph_idx] << "\"/>\n";
    start = i;
  }
  // Axes and grid.
  const double step = ygib <= 10 ? 1 : ygib <= 50 ? 5 : ygib <= 200 ? 20 : ygib <= 1000 ? 100 : 500;
  for (double g = 0; g <= ygib + 1e-9; g += step) {
    o << "<line x1=\"" << left << "\" x2=\"" << left + pw << "\" y1=\"" << y_of(g) << "\" y2=\"" << y_of(g)
      << "\" stroke=\"#cccccc\" stroke-width=\"0.5\"/>\n";
    o << "<text x=\"" << left - 6 << "\" y=\"" << y_of(g) + 4 << "\" text-anchor=\"end\">" << trim(g, 1)
      << "</text>\n";
  }
  o << "<text x=\"16\" y=\"" << top + ph / 2 << "\" transform=\"rotate(-90 16 " << top + ph / 2
    << ")\" text-anchor=\"middle\">GiB</text>\n";
  o << "<text x=\"" << left + pw / 2 << "\" y=\"" << H - 12 << "\" text-anchor=\"middle\">event (" << n
    << " in all)</text>\n";
  // Series, reduced to the maximum of each column.
  auto series = [&](auto get, const char* colour, const char* name, int row, double width) {
    o << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"" << width << "\" points=\"";
    for (std::size_t c = 0; c < cols && n > 0; ++c) {
      const std::size_t a = c * n / cols, b = std::max(a + 1, (c + 1) * n / cols);
      std::int64_t v = 0;
      for (std::size_t i = a; i < b; ++i) v = std::max(v, get(r.timeline[i]));
      o << x_of(static_cast<double>(a)) << "," << y_of(to_gib(v)) << " " << x_of(static_cast<double>(b))
        << "," << y_of(to_gib(v)) << " ";
    }
    o << "\"/>\n";
    o << "<line x1=\"" << left + pw + 12 << "\" x2=\"" << left + pw + 32 << "\" y1=\"" << top + 10 + row * 18
      << "\" y2=\"" << top + 10 + row * 18 << "\" stroke=\"" << colour << "\" stroke-width=\"2\"/>\n";
    o << "<text x=\"" << left + pw + 36 << "\" y=\"" << top + 14 + row * 18 << "\">" << name << "</text>\n";
  };
  // Drawn widest first: requested usually sits just under allocated, which sits under reserved.
  series([](const replay_point& p) { return p.reserved; }, "#c0392b", "reserved", 0, 3.0);
  series([](const replay_point& p) { return p.allocated; }, "#e67e22", "allocated", 1, 2.0);
  series([](const replay_point& p) { return p.requested; }, "#2e6fd8", "requested", 2, 1.0);
  o << "<line x1=\"" << left << "\" x2=\"" << left + pw << "\" y1=\"" << y_of(to_gib(capacity)) << "\" y2=\""
    << y_of(to_gib(capacity)) << "\" stroke=\"black\" stroke-dasharray=\"6,4\"/>\n";
  o << "<text x=\"" << left + 6 << "\" y=\"" << y_of(to_gib(capacity)) - 5 << "\">capacity "
    << gib_str(capacity) << " GiB</text>\n";
  const char* names[] = {"state", "forward", "output", "backward", "optimizer"};
  for (int i = 0; i < 5; ++i) {
    o << "<rect x=\"" << left + pw + 12 << "\" y=\"" << top + 70 + i * 18
      << "\" width=\"20\" height=\"12\" fill=\"" << fill[i] << "\" stroke=\"#999999\"/>\n";
    o << "<text x=\"" << left + pw + 36 << "\" y=\"" << top + 80 + i * 18 << "\">" << names[i] << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace headroom::probes
