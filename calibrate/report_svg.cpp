// report_svg.cpp: the report's escaping, figures and charts (report_svg.hpp).
#include "report_svg.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "planner/format.hpp"
#include "planner/units.hpp"

namespace headroom::calibrate::report {

namespace {

// The stage colours, in stack order (state, activations, peak extra, fixed, rest of the reserve).
constexpr const char* stage_fill[] = {"#4c72b0", "#55a868", "#8172b2", "#937860", "#dd8452"};
constexpr const char* stage_label[] = {"state", "activations", "working set / output phase", "reserve: fixed",
                                       "reserve: the rest"};

// Returns `x` with `decimals` decimals, for SVG coordinates (never an exponent).
std::string px(double x) {
  return fixed(x, 1);
}

// Returns a round step for an axis that spans `span` with about `ticks` ticks (1, 2 or 5 times a power
// of ten).
double nice_step(double span, int ticks) {
  if (!(span > 0)) return 1;
  const double raw = span / ticks;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

}  // namespace

std::string esc(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string bytes_text(double bytes) {
  const double a = std::fabs(bytes);
  if (!std::isfinite(bytes)) return "?";
  if (a >= static_cast<double>(gib)) return fixed(bytes / static_cast<double>(gib), 2) + " GiB";
  if (a >= static_cast<double>(mib)) return fixed(bytes / static_cast<double>(mib), 1) + " MiB";
  if (a >= static_cast<double>(kib)) return fixed(bytes / static_cast<double>(kib), 1) + " KiB";
  return fixed(bytes, 0) + " B";
}

std::string short_name(const std::string& path) {
  return path.substr(path.rfind('/') + 1);
}

std::string stage_bars_svg(const std::vector<stage_bar>& bars) {
  const double w = 1000, left = 10, bar_w = 740, row = 58;
  std::ostringstream s;
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << w << "' height='"
    << px(row * static_cast<double>(bars.size()) + 34)
    << "' font-family='sans-serif' font-size='12' role='img' aria-label='predicted stages against the "
       "capacity'>\n";
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const auto& b = bars[i];
    const std::int64_t parts[] = {b.state, b.activations, b.peak_extra, b.fixed, b.reserve_rest};
    double total = 0;
    for (auto p : parts) total += static_cast<double>(std::max<std::int64_t>(0, p));
    // The row's own scale: its largest figure; the capacity joins it unless it would squeeze the bar to a
    // sliver (a 7 GiB step on a 192 GiB card), where it is named at the row's end instead.
    const double own = std::max({1.0, total, b.measured.value_or(0)});
    const bool capacity_on_scale = static_cast<double>(b.capacity) <= 1.5 * own;
    const double most = (capacity_on_scale ? std::max(own, static_cast<double>(b.capacity)) : own) * 1.04;
    const double k = bar_w / most;  // this row's own scale
    const double y = static_cast<double>(i) * row + 6;
    s << "<text x='" << left << "' y='" << px(y + 12) << "' font-weight='bold'>" << esc(b.name)
      << "</text>\n";
    double x = left;
    for (int p = 0; p < 5; ++p) {
      const double v = static_cast<double>(std::max<std::int64_t>(0, parts[p]));
      if (v <= 0) continue;
      s << "<rect x='" << px(x) << "' y='" << px(y + 18) << "' width='" << px(v * k) << "' height='20' fill='"
        << stage_fill[p] << "'><title>" << stage_label[p] << ": " << bytes_text(v)
        << " (predicted)</title></rect>\n";
      x += v * k;
    }
    s << "<text x='" << px(x + 6) << "' y='" << px(y + 33) << "'>" << bytes_text(total)
      << " predicted</text>\n";
    if (b.capacity > 0 && capacity_on_scale) {
      const double cx = left + static_cast<double>(b.capacity) * k;
      s << "<line x1='" << px(cx) << "' x2='" << px(cx) << "' y1='" << px(y + 14) << "' y2='" << px(y + 52)
        << "' stroke='black' stroke-width='2' stroke-dasharray='4,2'><title>capacity "
        << bytes_text(static_cast<double>(b.capacity)) << "</title></line>\n";
      s << "<text x='" << px(cx + 4) << "' y='" << px(y + 52) << "' font-size='10'>capacity "
        << bytes_text(static_cast<double>(b.capacity)) << "</text>\n";
    } else if (b.capacity > 0) {
      s << "<text x='" << px(left + bar_w + 8) << "' y='" << px(y + 33) << "' font-size='11'>capacity "
        << bytes_text(static_cast<double>(b.capacity)) << " ("
        << fixed(100 * total / static_cast<double>(b.capacity), 1) << "% of it) &#8594;</text>\n";
    }
    if (b.measured) {
      const double mx = left + std::max(0.0, *b.measured) * k;
      s << "<rect x='" << px(left) << "' y='" << px(y + 41) << "' width='" << px(mx - left)
        << "' height='7' fill='#222'><title>" << esc(b.what_measured) << ": " << bytes_text(*b.measured)
        << "</title></rect>\n";
      s << "<text x='" << px(left + 2) << "' y='" << px(y + 57) << "' font-size='10'>" << esc(b.what_measured)
        << " " << bytes_text(*b.measured) << "</text>\n";
    }
  }
  const double ly = row * static_cast<double>(bars.size()) + 20;
  double lx = left;
  for (int p = 0; p < 5; ++p) {
    s << "<rect x='" << px(lx) << "' y='" << px(ly - 10) << "' width='12' height='12' fill='" << stage_fill[p]
      << "'/><text x='" << px(lx + 16) << "' y='" << px(ly) << "'>" << stage_label[p] << "</text>\n";
    lx += 16 + 7.0 * static_cast<double>(std::string(stage_label[p]).size()) + 14;
  }
  s << "<rect x='" << px(lx) << "' y='" << px(ly - 6) << "' width='14' height='6' fill='#222'/><text x='"
    << px(lx + 18) << "' y='" << px(ly) << "'>measured / emulated</text>\n</svg>";
  return s.str();
}

std::string residual_svg(const std::vector<residual_point>& points) {
  const double W = 760, H = 300, l = 70, r = 20, t = 16, b = 44;
  double xmax = 0, ymin = 0, ymax = 0;
  for (const auto& p : points) {
    xmax = std::max(xmax, p.predicted / static_cast<double>(gib));
    const double res = (p.needed - p.predicted) / static_cast<double>(gib);
    ymin = std::min(ymin, res);
    ymax = std::max(ymax, res);
  }
  xmax = std::max(xmax * 1.08, 0.1);
  const double pad = std::max(0.05, (ymax - ymin) * 0.1);
  ymin -= pad;
  ymax += pad;
  auto X = [&](double g) { return l + (W - l - r) * g / xmax; };
  auto Y = [&](double g) { return t + (H - t - b) * (ymax - g) / (ymax - ymin); };
  std::ostringstream s;
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' font-family='sans-serif' font-size='11' role='img' aria-label='residuals of the reserve'>\n";
  const double ys = nice_step(ymax - ymin, 6), xs = nice_step(xmax, 8);
  for (double g = std::ceil(ymin / ys) * ys; g <= ymax; g += ys)
    s << "<line x1='" << l << "' x2='" << W - r << "' y1='" << px(Y(g)) << "' y2='" << px(Y(g))
      << "' stroke='#ddd'/><text x='" << l - 4 << "' y='" << px(Y(g) + 4) << "' text-anchor='end'>"
      << trim(g, 2) << "</text>\n";
  for (double g = 0; g <= xmax; g += xs)
    s << "<text x='" << px(X(g)) << "' y='" << H - b + 14 << "' text-anchor='middle'>" << trim(g, 2)
      << "</text>\n";
  s << "<line x1='" << l << "' x2='" << W - r << "' y1='" << px(Y(0)) << "' y2='" << px(Y(0))
    << "' stroke='black'/>\n";
  s << "<text x='" << (l + W - r) / 2 << "' y='" << H - 8
    << "' text-anchor='middle'>predicted reserve (GiB)</text><text x='14' y='" << (t + H - b) / 2
    << "' transform='rotate(-90 14 " << (t + H - b) / 2
    << ")' text-anchor='middle'>residual: needed - predicted (GiB)</text>\n";
  for (const auto& p : points) {
    const double res = p.needed - p.predicted;
    s << "<circle cx='" << px(X(p.predicted / static_cast<double>(gib))) << "' cy='"
      << px(Y(res / static_cast<double>(gib))) << "' r='5' fill='" << (res > 0 ? "#c44e52" : "#4c72b0")
      << "' fill-opacity='0.8'><title>" << esc(p.name) << ": predicted " << bytes_text(p.predicted)
      << ", needed " << bytes_text(p.needed) << ", residual " << bytes_text(res) << "</title></circle>\n";
  }
  s << "</svg>";
  return s.str();
}

}  // namespace headroom::calibrate::report
