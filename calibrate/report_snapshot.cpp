// report_snapshot.cpp: the report's snapshot part (report_snapshot.hpp).
#include "report_snapshot.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>
#include <vector>

#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/units.hpp"
#include "report_svg.hpp"

namespace headroom::calibrate::report {

namespace {

using nlohmann::json;

// The most a view may hold (probes/snapshots/snapshot_record.hpp writes fewer): a record over these was
// not written by headroom and is refused before anything is drawn from it.
constexpr std::size_t most_columns = 4000, most_frames = 64, most_largest = 100, most_stack = 32,
                      most_segments = 5000;

// Colours of the stacked frames (matplotlib's tab10 and two more); the last frame ("other") is grey.
constexpr const char* frame_fill[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                      "#e377c2", "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a"};

struct view_column {
  std::int64_t first = 0, end = 0, requested = 0, reserved = 0;
};
struct view_block {
  std::uint64_t address = 0;
  std::int64_t bytes = 0;
  std::string frame;
  std::vector<std::string> stack;
};
struct view_segment {
  std::uint64_t address = 0;
  std::int64_t bytes = 0, live = 0, blocks = 0;
};
struct view {
  std::int64_t events = 0, device = 0, peak_event = 0, peak_requested = 0, peak_reserved = 0;
  std::vector<view_column> columns;
  std::vector<std::string> frames;
  std::vector<std::vector<std::int64_t>> stacks;
  std::vector<view_block> largest;
  std::vector<view_segment> segments;
  std::int64_t segment_count = 0, segment_bytes = 0;
  std::string reserved_from, segments_from;
};

// Returns j[key], checked: present and of the kind `ok` accepts, else bad_input naming it.
const json& need(const json& j, const char* key, const std::string& where,
                 bool (json::*ok)() const noexcept) {
  const auto it = j.is_object() ? j.find(key) : j.end();
  if (it == j.end() || !((*it).*ok)()) throw bad_input(where + "." + key, "missing or of the wrong type");
  return *it;
}

// Returns `j` as a count or a byte figure: an integer in [0, most].
std::int64_t need_count(const json& j, const std::string& where,
                        std::int64_t most = probes::max_record_bytes) {
  if (!j.is_number_integer() ||
      (j.is_number_unsigned() && j.get<std::uint64_t>() > static_cast<std::uint64_t>(most)))
    throw bad_input(where, "expected a non-negative integer");
  const auto v = j.get<std::int64_t>();
  if (v < 0 || v > most) throw bad_input(where, "expected an integer in [0, " + std::to_string(most) + "]");
  return v;
}

std::uint64_t need_address(const json& j, const std::string& where) {
  if (!j.is_number_unsigned() && !(j.is_number_integer() && j.get<std::int64_t>() >= 0))
    throw bad_input(where, "expected an address (a non-negative integer)");
  return j.get<std::uint64_t>();
}

std::string need_text(const json& j, const std::string& where) {
  if (!j.is_string()) throw bad_input(where, "expected a string");
  return printable(j.get<std::string>(), 300);
}

const json& need_array(const json& j, const char* key, const std::string& w, std::size_t most) {
  const json& a = need(j, key, w, &json::is_array);
  if (a.size() > most)
    throw bad_input(w + "." + key,
                    std::to_string(a.size()) + " entries; a record holds at most " + std::to_string(most));
  return a;
}

// Returns the checked view of record `r`.
view parse_view(const json& j, const std::string& origin) {
  const std::string w = origin + ": snapshot_view";
  view v;
  v.events = need_count(need(j, "events", w, &json::is_number), w + ".events", std::int64_t{1} << 40);
  v.device = need_count(need(j, "device", w, &json::is_number), w + ".device", 1 << 16);
  for (const auto& c : need_array(j, "columns", w, most_columns)) {
    if (!c.is_array() || c.size() != 4)
      throw bad_input(w + ".columns", "a column is [first, end, requested, reserved]");
    view_column x{need_count(c[0], w + ".columns"), need_count(c[1], w + ".columns"),
                  need_count(c[2], w + ".columns"), need_count(c[3], w + ".columns")};
    const std::int64_t at = v.columns.empty() ? 0 : v.columns.back().end;
    if (x.first < at || x.end <= x.first || x.end > v.events)
      throw bad_input(w + ".columns", "out of order or outside the events");
    v.columns.push_back(x);
  }
  for (const auto& f : need_array(j, "frames", w, most_frames))
    v.frames.push_back(need_text(f, w + ".frames"));
  const json& stacks = need_array(j, "stacks", w, most_columns);
  if (stacks.size() != v.columns.size() || (v.frames.empty() && !v.columns.empty()))
    throw bad_input(w + ".stacks", "one stack per column, each with one figure per frame");
  for (const auto& s : stacks) {
    if (!s.is_array() || s.size() != v.frames.size()) throw bad_input(w + ".stacks", "one figure per frame");
    std::vector<std::int64_t> row;
    for (const auto& b : s) row.push_back(need_count(b, w + ".stacks"));
    v.stacks.push_back(std::move(row));
  }
  const json& peak = need(j, "peak", w, &json::is_object);
  v.peak_event = need_count(need(peak, "event", w + ".peak", &json::is_number), w + ".peak.event", v.events);
  v.peak_requested =
      need_count(need(peak, "requested", w + ".peak", &json::is_number), w + ".peak.requested");
  v.peak_reserved = need_count(need(peak, "reserved", w + ".peak", &json::is_number), w + ".peak.reserved");
  for (const auto& b : need_array(j, "largest_at_peak", w, most_largest)) {
    const std::string bw = w + ".largest_at_peak";
    view_block x{need_address(need(b, "address", bw, &json::is_number), bw + ".address"),
                 need_count(need(b, "bytes", bw, &json::is_number), bw + ".bytes"),
                 need_text(need(b, "frame", bw, &json::is_string), bw + ".frame"),
                 {}};
    for (const auto& f : need_array(b, "stack", bw, most_stack))
      x.stack.push_back(need_text(f, bw + ".stack"));
    v.largest.push_back(std::move(x));
  }
  const json& segs = need(j, "segments_at_peak", w, &json::is_object);
  const std::string sw = w + ".segments_at_peak";
  v.segment_count = need_count(need(segs, "count", sw, &json::is_number), sw + ".count");
  v.segment_bytes = need_count(need(segs, "bytes", sw, &json::is_number), sw + ".bytes");
  for (const auto& g : need_array(segs, "list", sw, most_segments))
    v.segments.push_back({need_address(need(g, "address", sw, &json::is_number), sw + ".address"),
                          need_count(need(g, "bytes", sw, &json::is_number), sw + ".bytes"),
                          need_count(need(g, "live_bytes", sw, &json::is_number), sw + ".live_bytes"),
                          need_count(need(g, "live_blocks", sw, &json::is_number), sw + ".live_blocks")});
  v.reserved_from = need_text(need(j, "reserved_from", w, &json::is_string), w + ".reserved_from");
  v.segments_from = need_text(need(j, "segments_from", w, &json::is_string), w + ".segments_from");
  return v;
}

std::string snap_hex(std::uint64_t a) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(a));
  return b;
}

std::string snap_px(double x) {
  return fixed(x, 1);
}

// The timeline: the live allocations stacked by top frame, the requested and reserved curves, the peak.
std::string timeline_svg(const view& v) {
  const double W = 1000, H = 360, l = 64, r = 16, t = 14, b = 40;
  std::int64_t top = 1;
  for (const auto& c : v.columns) top = std::max({top, c.requested, c.reserved});
  const bool in_gib = top >= 2 * gib;
  const double unit = static_cast<double>(in_gib ? gib : mib);
  const double ymax = static_cast<double>(top) * 1.05 / unit;
  auto X = [&](std::int64_t e) {
    return l +
           (W - l - r) * static_cast<double>(e) / static_cast<double>(std::max<std::int64_t>(1, v.events));
  };
  auto Y = [&](double bytes) { return t + (H - t - b) * (1 - bytes / unit / ymax); };
  std::ostringstream s;
  s << "<svg class='chart' xmlns='http://www.w3.org/2000/svg' viewBox='0 0 " << W << " " << H << "' width='"
    << W << "' height='" << H
    << "' font-family='sans-serif' font-size='11' role='img' aria-label='memory timeline'>\n"
    << "<rect width='100%' height='100%' fill='white'/>\n";
  double step = ymax / 6;
  for (double m : {1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0})
    if (ymax / m <= 8) {
      step = m;
      break;
    }
  for (double g = 0; g <= ymax; g += step)
    s << "<line x1='" << l << "' x2='" << W - r << "' y1='" << snap_px(Y(g * unit)) << "' y2='"
      << snap_px(Y(g * unit)) << "' stroke='#e4e4e4'/><text x='" << l - 4 << "' y='"
      << snap_px(Y(g * unit) + 4) << "' text-anchor='end'>" << trim(g, 1) << "</text>\n";
  s << "<text x='12' y='" << (t + H - b) / 2 << "' transform='rotate(-90 12 " << (t + H - b) / 2
    << ")' text-anchor='middle'>" << (in_gib ? "GiB" : "MiB") << "</text><text x='" << (l + W - r) / 2
    << "' y='" << H - 8 << "' text-anchor='middle'>event (" << v.events << " in all)</text>\n";
  // Stacked areas, first frame at the bottom: each a polygon over the columns' cumulative bytes.
  std::vector<double> below(v.columns.size(), 0);
  for (std::size_t f = 0; f < v.frames.size(); ++f) {
    std::int64_t most = 0;
    std::ostringstream pts;
    for (std::size_t c = 0; c < v.columns.size(); ++c) {
      const double upto = below[c] + static_cast<double>(v.stacks[c][f]);
      most = std::max(most, v.stacks[c][f]);
      pts << snap_px(X(v.columns[c].first)) << "," << snap_px(Y(upto)) << " " << snap_px(X(v.columns[c].end))
          << "," << snap_px(Y(upto)) << " ";
    }
    for (std::size_t c = v.columns.size(); c-- > 0;)
      pts << snap_px(X(v.columns[c].end)) << "," << snap_px(Y(below[c])) << " "
          << snap_px(X(v.columns[c].first)) << "," << snap_px(Y(below[c])) << " ";
    for (std::size_t c = 0; c < v.columns.size(); ++c) below[c] += static_cast<double>(v.stacks[c][f]);
    if (most == 0) continue;
    const bool other = f + 1 == v.frames.size();
    s << "<polygon points='" << pts.str() << "' fill='" << (other ? "#c7c7c7" : frame_fill[f % 12])
      << "' fill-opacity='0.85'><title>" << esc(v.frames[f]) << ": at most "
      << bytes_text(static_cast<double>(most)) << " live</title></polygon>\n";
  }
  auto line = [&](bool reserved, const char* colour, const char* name) {
    s << "<polyline fill='none' stroke='" << colour << "' stroke-width='" << (reserved ? 2 : 1)
      << "' points='";
    for (const auto& c : v.columns) {
      const double y = Y(static_cast<double>(reserved ? c.reserved : c.requested));
      s << snap_px(X(c.first)) << "," << snap_px(y) << " " << snap_px(X(c.end)) << "," << snap_px(y) << " ";
    }
    s << "'><title>" << name << "</title></polyline>\n";
  };
  line(true, "#c0392b", "reserved (segments)");
  line(false, "#111", "allocated (the requested bytes of live blocks)");
  const double px_peak = X(v.peak_event);
  s << "<line x1='" << snap_px(px_peak) << "' x2='" << snap_px(px_peak) << "' y1='" << t << "' y2='" << H - b
    << "' stroke='#111' stroke-dasharray='3,3'><title>peak allocated "
    << bytes_text(static_cast<double>(v.peak_requested)) << " at event " << v.peak_event << "; reserved then "
    << bytes_text(static_cast<double>(v.peak_reserved)) << "</title></line>\n<text x='"
    << snap_px(std::min(px_peak + 4, W - 200)) << "' y='" << t + 10 << "'>peak "
    << bytes_text(static_cast<double>(v.peak_requested)) << " at event " << v.peak_event << "</text>\n</svg>";
  return s.str();
}

// The legend: each frame's colour and its bytes at the peak.
std::string legend_html(const view& v) {
  std::size_t at = 0;
  for (std::size_t c = 0; c < v.columns.size(); ++c)
    if (v.columns[c].first <= v.peak_event && v.peak_event < v.columns[c].end) at = c;
  std::vector<double> live;
  for (std::size_t f = 0; f < v.frames.size(); ++f)
    live.push_back(v.stacks.empty() ? 0.0 : static_cast<double>(v.stacks[at][f]));
  const byte_unit u = unit_for(live);
  std::ostringstream s;
  s << "<table class='legend'><tr><th>top user frame</th><th>live at the peak (" << u.name << ")</th></tr>\n";
  for (std::size_t f = 0; f < v.frames.size(); ++f) {
    const double b = live[f];
    s << "<tr><td><span class='sw' style='background:"
      << (f + 1 == v.frames.size() ? "#c7c7c7" : frame_fill[f % 12]) << "'></span>" << esc(v.frames[f])
      << "</td><td>" << in_unit(b, u) << "</td></tr>\n";
  }
  s << "</table>\n";
  return s.str();
}

// The segments at the peak, laid out in rows, each as wide as its bytes, filled as far as its live bytes.
std::string segments_svg(const view& v) {
  const double W = 1000, rowh = 26;
  double total = 0;
  for (const auto& g : v.segments) total += static_cast<double>(g.bytes);
  const double k = total > 0 ? 4 * (W - 4) / total : 0;  // about four rows
  std::ostringstream body;
  double x = 0, y = 0;
  for (const auto& g : v.segments) {
    const double w = std::max(3.0, static_cast<double>(g.bytes) * k);
    if (x + w > W && x > 0) {
      x = 0;
      y += rowh;
    }
    const double fill =
        g.bytes > 0 ? std::min(1.0, static_cast<double>(g.live) / static_cast<double>(g.bytes)) : 0;
    body << "<g><title>segment " << snap_hex(g.address) << ": " << bytes_text(static_cast<double>(g.bytes))
         << ", " << bytes_text(static_cast<double>(g.live)) << " live in " << g.blocks
         << " blocks</title><rect x='" << snap_px(x + 1) << "' y='" << snap_px(y + 1) << "' width='"
         << snap_px(std::min(w, W) - 2) << "' height='" << rowh - 4
         << "' fill='#f3f3f3' stroke='#888'/><rect x='" << snap_px(x + 1) << "' y='" << snap_px(y + 1)
         << "' width='" << snap_px((std::min(w, W) - 2) * fill) << "' height='" << rowh - 4
         << "' fill='#4c72b0'/></g>\n";
    x += std::min(w, W);
  }
  std::ostringstream s;
  s << "<svg class='chart' xmlns='http://www.w3.org/2000/svg' viewBox='0 0 " << W << " " << snap_px(y + rowh)
    << "' width='" << W << "' height='" << snap_px(y + rowh)
    << "' role='img' aria-label='segments at the peak'>\n"
    << body.str() << "</svg>";
  return s.str();
}

}  // namespace

std::string snapshot_view_html(const probes::measurement_record& r) {
  const view v = parse_view(r.snapshot_view, r.origin);
  std::ostringstream h;
  h << "<h4>Memory timeline (device " << v.device << ")</h4>\n";
  if (v.columns.empty()) {
    h << "<p>The trace has no events: nothing to draw over time.</p>\n";
  } else {
    h << "<p class='note'>Live allocations stacked by the top user frame that allocated them, as PyTorch's "
         "memory_viz \"Active Memory Timeline\" shows them; the black line is the allocated (requested) "
         "bytes, the red one the reserved bytes, from "
      << esc(v.reserved_from) << ". " << v.columns.size() << " columns, each the largest of its events, so "
      << "the peak is exact. Hover for detail.</p>\n"
      << timeline_svg(v) << "\n"
      << legend_html(v);
  }
  h << "<h4>Largest allocations at the peak (event " << v.peak_event << ", "
    << bytes_text(static_cast<double>(v.peak_requested)) << " allocated)</h4>\n";
  if (v.largest.empty()) {
    h << "<p>No allocation was alive at the peak.</p>\n";
  } else {
    std::vector<double> sizes;
    for (const auto& b : v.largest) sizes.push_back(static_cast<double>(b.bytes));
    const byte_unit u = unit_for(sizes);
    h << "<table><tr><th>#</th><th>size (" << u.name
      << ")</th><th>address</th><th>allocated by (open for the "
         "stack)</th></tr>\n";
    for (std::size_t i = 0; i < v.largest.size(); ++i) {
      const auto& b = v.largest[i];
      h << "<tr><td>" << i + 1 << "</td><td>" << in_unit(sizes[i], u) << "</td><td>" << snap_hex(b.address)
        << "</td><td class='l'>";
      if (b.stack.empty()) {
        h << esc(b.frame);
      } else {
        h << "<details><summary>" << esc(b.frame) << "</summary><ol class='stack'>";
        for (const auto& f : b.stack) h << "<li>" << esc(f) << "</li>";
        h << "</ol></details>";
      }
      h << "</td></tr>\n";
    }
    h << "</table>\n";
  }
  h << "<h4>Segments at the peak</h4>\n<p class='note'>" << v.segment_count << " segments, "
    << bytes_text(static_cast<double>(v.segment_bytes)) << " reserved (" << esc(v.segments_from)
    << "); each box is a segment, as wide as its bytes, blue as far as its live bytes";
  if (v.segments.size() < static_cast<std::size_t>(v.segment_count))
    h << "; the largest " << v.segments.size() << " are drawn";
  h << ".</p>\n";
  if (!v.segments.empty()) h << segments_svg(v) << "\n";
  return h.str();
}

std::string replay_verdict(const json& rep) {
  if (!rep.is_object()) return "";
  const auto emu = rep.find("emulated");
  if (emu != rep.end() && emu->is_object()) {
    const auto oom = emu->find("oom");
    if (oom != emu->end() && oom->is_object() && oom->contains("event") &&
        (*oom)["event"].is_number_integer())
      return "the emulation ran out of memory at snapshot event " +
             std::to_string((*oom)["event"].get<std::int64_t>());
  }
  const auto cmp = rep.find("comparison");
  if (cmp == rep.end() || !cmp->is_object()) return "";
  if (!cmp->value("compared", false)) return "emulated under other settings than recorded: not compared";
  if (cmp->value("agrees", false)) return "agrees with the real allocator: every segment and block address";
  const auto at = cmp->find("diverged_at");
  std::string why;
  if (const auto d = cmp->find("divergence"); d != cmp->end() && d->is_string())
    why = printable(d->get<std::string>(), 200);
  if (at != cmp->end() && at->is_number_integer())
    return "diverges from the real allocator at snapshot event " + std::to_string(at->get<std::int64_t>()) +
           (why.empty() ? "" : ": " + why);
  return why.empty() ? "differs from the real allocator" : why;
}

namespace {

// Returns obj[key] when it is a byte count or a count a record may hold ([0, max_record_bytes]), else nullopt.
std::optional<std::int64_t> checked_count(const json& obj, const char* key) {
  const auto v = obj.is_object() ? obj.find(key) : obj.end();
  if (v == obj.end() || !v->is_number_integer() || v->get<std::int64_t>() < 0 ||
      v->get<std::int64_t>() > probes::max_record_bytes)
    return std::nullopt;
  return v->get<std::int64_t>();
}

// Returns the what-if rows a report shows (objects, the first 64).
std::vector<const json*> what_if_rows(const json& rep) {
  std::vector<const json*> rows;
  const auto wi = rep.is_object() ? rep.find("what_if") : rep.end();
  if (wi != rep.end() && wi->is_array())
    for (const auto& row : *wi)
      if (row.is_object() && rows.size() < 64) rows.push_back(&row);
  return rows;
}

}  // namespace

std::string replay_html(const json& rep) {
  auto block = [&](const char* name) { return rep.is_object() && rep.contains(name) ? rep[name] : json(); };
  const json real = block("real"), emu = block("emulated");
  const auto rows = what_if_rows(rep);
  // One unit for every byte figure of both tables (GiB or MiB, from the largest).
  std::vector<double> all;
  for (const auto* o : {&real, &emu})
    for (const char* k : {"peak_reserved", "peak_allocated"})
      if (const auto v = checked_count(*o, k)) all.push_back(static_cast<double>(*v));
  for (const auto* row : rows)
    for (const char* k : {"peak_reserved", "least_capacity"})
      if (const auto v = checked_count(*row, k)) all.push_back(static_cast<double>(*v));
  const byte_unit u = unit_for(all);
  auto figure = [&](const json& obj, const char* key, bool bytes, const char* none) -> std::string {
    const auto v = checked_count(obj, key);
    if (!v) return none;
    return bytes ? in_unit(static_cast<double>(*v), u) : std::to_string(*v);
  };
  std::ostringstream h;
  h << "<table><tr><th></th><th>real (PyTorch, measured)</th><th>emulated (headroom)</th></tr>\n"
    << "<tr><td>reserved peak (" << u.name << ")</td><td>"
    << figure(real, "peak_reserved", true, "not recorded") << "</td><td>"
    << figure(emu, "peak_reserved", true, "not recorded") << "</td></tr>\n<tr><td>segments created</td><td>"
    << figure(real, "segments_created", false, "not recorded") << "</td><td>"
    << figure(emu, "segments_created", false, "not recorded") << "</td></tr>\n<tr><td>allocated peak ("
    << u.name << ")</td><td></td><td>" << figure(emu, "peak_allocated", true, "not recorded")
    << "</td></tr>\n</table>\n<p><b>Outcome:</b> " << esc(replay_verdict(rep)) << "</p>\n";
  if (!rows.empty()) {
    h << "<p>What if (the same sequence under other allocator settings, "
         "emulated):</p>\n<table><tr><th>setting"
         "</th><th>reserved peak ("
      << u.name << ")</th><th>segments mapped</th><th>least capacity that runs (" << u.name
      << ")</th><th>start</th></tr>\n";
    for (const auto* row : rows) {
      auto text = [&](const char* k) {
        const auto v = row->find(k);
        return v != row->end() && v->is_string() ? esc(printable(v->get<std::string>(), 120)) : std::string();
      };
      const auto least = row->find("least_capacity");
      h << "<tr><td class='l'>" << text("setting") << "</td><td>" << figure(*row, "peak_reserved", true, "")
        << "</td><td>" << figure(*row, "maps", false, "") << "</td><td>"
        << (least != row->end() && least->is_null() ? std::string("out of memory at the capacity")
                                                    : figure(*row, "least_capacity", true, ""))
        << "</td><td>" << text("start") << "</td></tr>\n";
    }
    h << "</table>\n";
  }
  return h.str();
}

}  // namespace headroom::calibrate::report
