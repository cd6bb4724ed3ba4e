// report_svg.cpp: the report's escaping, figures and charts (report_svg.hpp).
#include "report_svg.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "planner/format.hpp"
#include "planner/units.hpp"

namespace headroom::calibrate::report {

namespace {

// Returns `x` with one decimal, for SVG coordinates (never an exponent).
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

// Returns `s` cut to `most` characters with "..." (a chart's column has a fixed width; the tables keep
// the whole name).
std::string cut(const std::string& s, std::size_t most) {
  return s.size() <= most ? s : s.substr(0, most - 3) + "...";
}

double as_gib(double bytes) {
  return bytes / static_cast<double>(gib);
}

// The bars' geometry, in chart pixels (the viewBox; the page scales it to its width).
constexpr double chart_w = 1400, title_x = 8, bar_x0 = 330, bar_x1 = 1050, axis_h = 34, row_h = 74;
// The stacked parts: the reference total's (state, activations, reserve) and the step peak's (state,
// activations, workspaces, working set / output phase, fixed overheads), with their colours.
constexpr const char* fill_state = "#4c72b0";
constexpr const char* fill_activations = "#55a868";
constexpr const char* fill_reserve = "#dd8452";
constexpr const char* fill_workspaces = "#8c8c8c";
constexpr const char* fill_peak_extra = "#8172b2";
constexpr const char* fill_fixed = "#937860";

// Returns the x where a label of `chars` characters starts: `after` plus a gap, moved past the capacity
// line at `cap_x` (when there is one) rather than across it.
double label_x(double after, std::size_t chars, std::optional<double> cap_x) {
  double x = after + 6;
  const double w = label_width(chars);
  if (cap_x && x - label_clearance < *cap_x && *cap_x < x + w + label_clearance)
    x = *cap_x + label_clearance + 2;
  return x;
}

// Writes one stacked bar of `parts` (bytes, colour, name) from bar_x0 at `y`, `h` high; returns its end x.
double stacked(std::ostringstream& s, const std::vector<std::pair<std::int64_t, const char*>>& parts,
               const std::vector<const char*>& names, double k, double y, double h) {
  double x = bar_x0;
  for (std::size_t p = 0; p < parts.size(); ++p) {
    const double v = static_cast<double>(std::max<std::int64_t>(0, parts[p].first));
    if (v <= 0) continue;
    s << "<rect x='" << px(x) << "' y='" << px(y) << "' width='" << px(v * k) << "' height='" << h
      << "' fill='" << parts[p].second << "'><title>" << names[p] << ": " << gib_text(v, 2)
      << " (predicted)</title></rect>\n";
    x += v * k;
  }
  return x;
}

void text_at(std::ostringstream& s, double x, double y, const std::string& text, const char* extra = "") {
  s << "<text x='" << px(x) << "' y='" << px(y) << "'" << extra << ">" << esc(text) << "</text>\n";
}

// Writes row `b` at the top `y` on scale `k` (pixels per byte); the capacity line when `cap_on`.
void bar_row_svg(std::ostringstream& s, const bar_row& b, double y, double k, bool cap_on) {
  text_at(s, title_x, y + 14, cut(b.name, 44), " font-weight='bold' font-size='12'");
  text_at(s, title_x, y + 30, cut(b.detail, 50), " fill='#444'");
  const double cap = static_cast<double>(b.capacity);
  std::optional<double> cap_x;
  if (b.capacity > 0 && cap_on) cap_x = bar_x0 + cap * k;
  if (b.capacity > 0)
    text_at(s, title_x, y + 46,
            "capacity " + gib_text(cap, 1) +
                (cap_on ? std::string(" (dashed)")
                        : " (beyond the scale; " +
                              fixed(100 * static_cast<double>(std::max(b.total, b.peak_total)) / cap, 1) +
                              "% of it used)"),
            " fill='#444'");
  const bool peak_decides = b.peak_total > b.total;
  const double t_end =
      stacked(s, {{b.state, fill_state}, {b.activations, fill_activations}, {b.reserve, fill_reserve}},
              {"state", "activations", "reserve"}, k, y + 5, 16);
  const std::string t_label =
      gib_text(static_cast<double>(b.total), 1) + " total" + (peak_decides ? "" : " (decides)");
  text_at(s, label_x(t_end, t_label.size(), cap_x), y + 17, t_label);
  const double p_end =
      stacked(s,
              {{b.state, fill_state},
               {b.activations, fill_activations},
               {b.workspaces, fill_workspaces},
               {b.peak_extra, fill_peak_extra},
               {b.fixed_overheads, fill_fixed}},
              {"state", "activations", "library workspaces", "working set / output phase", "fixed overheads"},
              k, y + 25, 16);
  const std::string p_label = gib_text(static_cast<double>(b.peak_total), 1) +
                              " step peak + fixed overheads" + (peak_decides ? " (decides)" : "");
  text_at(s, label_x(p_end, p_label.size(), cap_x), y + 37, p_label);
  if (b.measured) {
    const double m_end = bar_x0 + std::max(0.0, *b.measured) * k;
    s << "<rect x='" << px(bar_x0) << "' y='" << px(y + 46) << "' width='" << px(m_end - bar_x0)
      << "' height='12' fill='#222'><title>" << esc(b.what_measured) << ": " << gib_text(*b.measured, 2)
      << "</title></rect>\n";
    const std::string m_label = gib_text(*b.measured, 2) + " " + b.what_measured;
    text_at(s, label_x(m_end, m_label.size(), cap_x), y + 56, m_label);
  }
  if (cap_x)
    s << "<line class='capacity' x1='" << px(*cap_x) << "' x2='" << px(*cap_x) << "' y1='" << px(y + 1)
      << "' y2='" << px(y + 61)
      << "' stroke='#c0392b' stroke-width='2' stroke-dasharray='5,3'><title>capacity " << gib_text(cap, 1)
      << "</title></line>\n";
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

std::string gib_text(double bytes, int decimals) {
  return std::isfinite(bytes) ? fixed(as_gib(bytes), decimals) + " GiB" : "?";
}

std::string short_name(const std::string& path) {
  return path.substr(path.rfind('/') + 1);
}

byte_unit unit_for(const std::vector<double>& figures) {
  double most = 0;
  for (double f : figures)
    if (std::isfinite(f)) most = std::max(most, std::fabs(f));
  if (most >= static_cast<double>(gib)) return {"GiB", static_cast<double>(gib), 2};
  if (most >= static_cast<double>(mib)) return {"MiB", static_cast<double>(mib), 1};
  return {"KiB", static_cast<double>(kib), 1};
}

std::string in_unit(double bytes, const byte_unit& u) {
  return std::isfinite(bytes) ? fixed(bytes / u.bytes, u.decimals) : "?";
}

double label_width(std::size_t chars) {
  // Sans-serif at 11 px: digits are 0.556 em and most letters narrower; 0.62 em bounds a label's mean.
  return 6.8 * static_cast<double>(chars);
}

std::string bars_svg(const std::vector<bar_row>& rows) {
  double most = 1;
  for (const auto& b : rows)
    most = std::max(
        {most, static_cast<double>(b.total), static_cast<double>(b.peak_total), b.measured.value_or(0)});
  // A capacity joins the scale unless it would squeeze every bar to a sliver (a 7 GiB step on a 192 GiB
  // card); the row then names it and the share used.
  std::vector<bool> cap_on;
  double extent = most;
  for (const auto& b : rows) {
    cap_on.push_back(b.capacity > 0 && static_cast<double>(b.capacity) <= 4 * most);
    if (cap_on.back()) extent = std::max(extent, static_cast<double>(b.capacity));
  }
  extent *= 1.02;
  const double k = (bar_x1 - bar_x0) / extent;
  const double h = axis_h + row_h * static_cast<double>(rows.size()) + 30;
  std::ostringstream s;
  s << "<svg class='chart' xmlns='http://www.w3.org/2000/svg' viewBox='0 0 " << chart_w << " " << px(h)
    << "' width='" << chart_w << "' height='" << px(h)
    << "' font-family='sans-serif' font-size='11' role='img' aria-label='predicted totals against the "
       "capacity, with what was measured'>\n";
  const double step = nice_step(as_gib(extent), 8);
  text_at(s, bar_x0 - 8, 16, "GiB per GPU (one scale)", " text-anchor='end' font-weight='bold'");
  for (double g = 0; g <= as_gib(extent) + 1e-9; g += step) {
    const double x = bar_x0 + g * static_cast<double>(gib) * k;
    s << "<line x1='" << px(x) << "' x2='" << px(x) << "' y1='22' y2='" << px(h - 30)
      << "' stroke='#e6e6e6'/>\n";
    text_at(s, x, 16, trim(g, 2), " text-anchor='middle'");
  }
  for (std::size_t i = 0; i < rows.size(); ++i)
    bar_row_svg(s, rows[i], axis_h + row_h * static_cast<double>(i), k, cap_on[i]);
  const std::pair<const char*, const char*> legend[] = {{fill_state, "state"},
                                                        {fill_activations, "activations"},
                                                        {fill_reserve, "reserve"},
                                                        {fill_workspaces, "workspaces"},
                                                        {fill_peak_extra, "working set / output phase"},
                                                        {fill_fixed, "fixed overheads"},
                                                        {"#222", "measured / emulated"}};
  double lx = title_x;
  const double ly = h - 10;
  for (const auto& [fill, name] : legend) {
    s << "<rect x='" << px(lx) << "' y='" << px(ly - 10) << "' width='12' height='12' fill='" << fill
      << "'/>";
    text_at(s, lx + 16, ly, name);
    lx += 16 + label_width(std::string(name).size()) + 12;
  }
  s << "<line x1='" << px(lx) << "' x2='" << px(lx + 14) << "' y1='" << px(ly - 4) << "' y2='" << px(ly - 4)
    << "' stroke='#c0392b' stroke-width='2' stroke-dasharray='5,3'/>";
  text_at(s, lx + 18, ly, "capacity");
  s << "</svg>";
  return s.str();
}

std::string residual_svg(const std::vector<residual_point>& points) {
  const double W = 640, H = 320, l = 56, r = 12, t = 12, b = 40;
  double xmax = 0, ymin = 0, ymax = 0;
  for (const auto& p : points) {
    xmax = std::max(xmax, as_gib(p.predicted));
    const double res = as_gib(p.needed - p.predicted);
    ymin = std::min(ymin, res);
    ymax = std::max(ymax, res);
  }
  xmax = std::max(xmax * 1.08, 0.1);
  const double pad = std::max(0.05, (ymax - ymin) * 0.12);
  ymin -= pad;
  ymax += pad;
  auto X = [&](double g) { return l + (W - l - r) * g / xmax; };
  auto Y = [&](double g) { return t + (H - t - b) * (ymax - g) / (ymax - ymin); };
  std::ostringstream s;
  s << "<svg class='chart plot' xmlns='http://www.w3.org/2000/svg' viewBox='0 0 " << W << " " << H
    << "' width='" << W << "' height='" << H
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
  // Each label goes where it overlaps no label placed before it and no point: right, left, above, below.
  struct box {
    double x0, y0, x1, y1;
  };
  std::vector<box> taken;
  for (const auto& p : points)
    taken.push_back({X(as_gib(p.predicted)) - 5, Y(as_gib(p.needed - p.predicted)) - 5,
                     X(as_gib(p.predicted)) + 5, Y(as_gib(p.needed - p.predicted)) + 5});
  const bool named = points.size() <= 15;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto& p = points[i];
    const double res = p.needed - p.predicted;
    const double cx = X(as_gib(p.predicted)), cy = Y(as_gib(res));
    s << "<circle cx='" << px(cx) << "' cy='" << px(cy) << "' r='5' fill='"
      << (res > 0 ? "#c44e52" : "#4c72b0") << "' fill-opacity='0.8'><title>" << esc(p.name) << ": predicted "
      << gib_text(p.predicted, 2) << ", needed " << gib_text(p.needed, 2) << ", residual " << gib_text(res, 2)
      << "</title></circle>\n";
    const std::string label =
        std::to_string(i + 1) +
        (named ? " " + cut(p.name, 28) + " " + (res >= 0 ? "+" : "") + fixed(as_gib(res), 2) : std::string());
    const double w = label_width(label.size());
    const std::pair<double, double> at[] = {
        {cx + 8, cy + 4}, {cx - 8 - w, cy + 4}, {cx - w / 2, cy - 9}, {cx - w / 2, cy + 18}};
    std::pair<double, double> pick = at[0];
    for (const auto& [x, y] : at) {
      const box c{x, y - 10, x + w, y + 2};
      const bool inside = c.x0 >= l && c.x1 <= W - r && c.y0 >= t && c.y1 <= H - b;
      const bool clear = std::none_of(taken.begin(), taken.end(), [&](const box& o) {
        return c.x0 < o.x1 && o.x0 < c.x1 && c.y0 < o.y1 && o.y0 < c.y1;
      });
      if (inside && clear) {
        pick = {x, y};
        break;
      }
    }
    taken.push_back({pick.first, pick.second - 10, pick.first + w, pick.second + 2});
    s << "<text class='point-label' x='" << px(pick.first) << "' y='" << px(pick.second) << "'>" << esc(label)
      << "</text>\n";
  }
  s << "</svg>";
  return s.str();
}

}  // namespace headroom::calibrate::report
