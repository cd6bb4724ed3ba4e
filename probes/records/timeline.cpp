// timeline.cpp: the timeline's JSON form and its drawing (timeline.hpp).
#include "probes/records/timeline.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/units.hpp"

namespace headroom::records {

namespace {

constexpr std::array<const char*, 5> phase_names{"state", "forward", "output", "backward", "optimizer"};
constexpr std::array<const char*, 5> phase_fill{"#eeeeee", "#e3efff", "#fff1d6", "#ffe3e3", "#e6f6e6"};

std::size_t phase_index(const std::string& name) {
  for (std::size_t i = 0; i < phase_names.size(); ++i)
    if (name == phase_names[i]) return i;
  return phase_names.size();
}

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

std::int64_t need_int(const nlohmann::json& j, std::size_t i, const std::string& where) {
  if (!j.is_array() || i >= j.size() || !j[i].is_number_integer() || j[i].get<std::int64_t>() < 0)
    throw bad_input(where, "expected a non-negative integer at position " + std::to_string(i));
  return j[i].get<std::int64_t>();
}

// The SVG's frame: size, margins, the vertical scale in GiB.
struct frame {
  double W = 1100, H = 470, left = 70, right = 150, top = 46, bottom = 50;
  double pw = W - left - right, ph = H - top - bottom;
  double n = 1, ygib = 1;
  double x(double event) const { return left + pw * event / std::max<double>(1, n); }
  double y(double gib_value) const { return top + ph * (1 - gib_value / ygib); }
};

void draw_axes(std::ostringstream& o, const frame& f, std::int64_t events) {
  const double step = f.ygib <= 10 ? 1 : f.ygib <= 50 ? 5 : f.ygib <= 200 ? 20 : f.ygib <= 1000 ? 100 : 500;
  for (double g = 0; g <= f.ygib + 1e-9; g += step) {
    o << "<line x1=\"" << f.left << "\" x2=\"" << f.left + f.pw << "\" y1=\"" << f.y(g) << "\" y2=\""
      << f.y(g) << "\" stroke=\"#cccccc\" stroke-width=\"0.5\"/>\n";
    o << "<text x=\"" << f.left - 6 << "\" y=\"" << f.y(g) + 4 << "\" text-anchor=\"end\">" << trim(g, 1)
      << "</text>\n";
  }
  o << "<text x=\"16\" y=\"" << f.top + f.ph / 2 << "\" transform=\"rotate(-90 16 " << f.top + f.ph / 2
    << ")\" text-anchor=\"middle\">GiB</text>\n";
  o << "<text x=\"" << f.left + f.pw / 2 << "\" y=\"" << f.H - 12 << "\" text-anchor=\"middle\">event ("
    << events << " in all)</text>\n";
}

template <typename Get>
void draw_series(std::ostringstream& o, const frame& f, const timeline& t, Get get, const char* colour,
                 const char* name, int row, double width) {
  o << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"" << width << "\" points=\"";
  for (const auto& c : t.columns) {
    const double v = to_gib(get(c));
    o << f.x(static_cast<double>(c.first)) << "," << f.y(v) << " " << f.x(static_cast<double>(c.end)) << ","
      << f.y(v) << " ";
  }
  o << "\"/>\n";
  o << "<line x1=\"" << f.left + f.pw + 12 << "\" x2=\"" << f.left + f.pw + 32 << "\" y1=\""
    << f.top + 10 + row * 18 << "\" y2=\"" << f.top + 10 + row * 18 << "\" stroke=\"" << colour
    << "\" stroke-width=\"2\"/>\n";
  o << "<text x=\"" << f.left + f.pw + 36 << "\" y=\"" << f.top + 14 + row * 18 << "\">" << name
    << "</text>\n";
}

void draw_legend(std::ostringstream& o, const frame& f, std::int64_t capacity) {
  o << "<line x1=\"" << f.left << "\" x2=\"" << f.left + f.pw << "\" y1=\"" << f.y(to_gib(capacity))
    << "\" y2=\"" << f.y(to_gib(capacity)) << "\" stroke=\"black\" stroke-dasharray=\"6,4\"/>\n";
  o << "<text x=\"" << f.left + 6 << "\" y=\"" << f.y(to_gib(capacity)) - 5 << "\">capacity "
    << gib_str(capacity) << " GiB</text>\n";
  for (std::size_t i = 0; i < phase_names.size(); ++i) {
    o << "<rect x=\"" << f.left + f.pw + 12 << "\" y=\"" << f.top + 70 + static_cast<double>(i) * 18
      << "\" width=\"20\" height=\"12\" fill=\"" << phase_fill[i] << "\" stroke=\"#999999\"/>\n";
    o << "<text x=\"" << f.left + f.pw + 36 << "\" y=\"" << f.top + 80 + static_cast<double>(i) * 18 << "\">"
      << phase_names[i] << "</text>\n";
  }
}

}  // namespace

nlohmann::json timeline_to_json(const timeline& t) {
  nlohmann::json cols = nlohmann::json::array(), runs = nlohmann::json::array();
  for (const auto& c : t.columns) cols.push_back({c.first, c.end, c.requested, c.allocated, c.reserved});
  for (const auto& r : t.phases) runs.push_back({r.first, r.end, r.phase});
  return {{"events", t.events}, {"columns", cols}, {"phases", runs}};
}

timeline timeline_from_json(const nlohmann::json& j, const std::string& origin) {
  const std::string w = origin + ": timeline";
  if (!j.is_object() || !j.contains("events") || !j["events"].is_number_integer() || !j.contains("columns") ||
      !j["columns"].is_array() || !j.contains("phases") || !j["phases"].is_array())
    throw bad_input(w, "expected events, columns and phases");
  timeline t;
  t.events = j["events"].get<std::int64_t>();
  if (t.events < 0) throw bad_input(w, "negative events");
  std::int64_t at = 0;
  for (const auto& c : j["columns"]) {
    timeline_column x{need_int(c, 0, w), need_int(c, 1, w), need_int(c, 2, w), need_int(c, 3, w),
                      need_int(c, 4, w)};
    if (x.first < at || x.end <= x.first || x.end > t.events) throw bad_input(w, "columns out of order");
    at = x.end;
    t.columns.push_back(x);
  }
  at = 0;
  for (const auto& r : j["phases"]) {
    if (!r.is_array() || r.size() != 3 || !r[2].is_string() || phase_index(r[2].get<std::string>()) == 5)
      throw bad_input(w, "a phase run is [first, end, phase]");
    phase_run x{need_int(r, 0, w), need_int(r, 1, w), r[2].get<std::string>()};
    if (x.first < at || x.end <= x.first || x.end > t.events) throw bad_input(w, "phase runs out of order");
    at = x.end;
    t.phases.push_back(x);
  }
  return t;
}

std::string timeline_svg(const timeline& t, std::int64_t capacity, const std::string& title) {
  frame f;
  f.n = static_cast<double>(t.events);
  std::int64_t ymax = capacity;
  for (const auto& c : t.columns) ymax = std::max(ymax, c.reserved);
  f.ygib = std::max(1.0, std::ceil(to_gib(ymax) * 1.05));
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << f.W << "\" height=\"" << f.H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  // The title wraps at "; " so long layouts and allocator descriptions stay on the page.
  const auto cut = title.find("; ");
  o << "<text x=\"" << f.left << "\" y=\"16\" font-size=\"13\">" << escape(title.substr(0, cut))
    << "</text>\n";
  if (cut != std::string::npos)
    o << "<text x=\"" << f.left << "\" y=\"32\" font-size=\"11\" fill=\"#444444\">"
      << escape(title.substr(cut + 2)) << "</text>\n";
  for (const auto& r : t.phases)
    o << "<rect x=\"" << f.x(static_cast<double>(r.first)) << "\" y=\"" << f.top << "\" width=\""
      << std::max(0.5, f.x(static_cast<double>(r.end)) - f.x(static_cast<double>(r.first))) << "\" height=\""
      << f.ph << "\" fill=\"" << phase_fill[std::min<std::size_t>(phase_index(r.phase), 4)] << "\"/>\n";
  draw_axes(o, f, t.events);
  // Drawn widest first: requested usually sits just under allocated, which sits under reserved.
  draw_series(
      o, f, t, [](const timeline_column& c) { return c.reserved; }, "#c0392b", "reserved", 0, 3.0);
  draw_series(
      o, f, t, [](const timeline_column& c) { return c.allocated; }, "#e67e22", "allocated", 1, 2.0);
  draw_series(
      o, f, t, [](const timeline_column& c) { return c.requested; }, "#2e6fd8", "requested", 2, 1.0);
  draw_legend(o, f, capacity);
  o << "</svg>\n";
  return o.str();
}

}  // namespace headroom::records
