// html_report.cpp: the self-contained HTML report (see html_report.hpp).
#include "html_report.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "planner/estimate.hpp"
#include "planner/format.hpp"
#include "planner/stage_terms.hpp"
#include "planner/units.hpp"
#include "probes/records/timeline.hpp"

namespace headroom::calibrate {

namespace {

// Returns `s` as HTML text or attribute value: every string from a record goes through this, so a model
// name or a file name with markup ("<script>") is shown, never run.
std::string esc(const std::string& s) {
  std::string o;
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

// Returns bytes as GiB with two decimals, for the report's cells.
std::string gib(double b) { return fixed(b / static_cast<double>(headroom::gib), 2); }

// The record's predicted terms as the planner states them (planner/stage_terms.hpp).
stage_terms model_terms(const probes::measurement_record& r) {
  return {r.persistent, r.transient, r.activations, r.working_set, r.output_phase};
}

// One horizontal bar chart: per case, the predicted stack (model terms, reserve) over the measured bar.
std::string bars(const std::vector<probes::measurement_record>& recs, const std::vector<observation>& obs,
                 const reserve_model& reserve) {
  double most = 1;
  for (std::size_t i = 0; i < recs.size(); ++i) {
    const auto model = static_cast<double>(model_terms(recs[i]).held());
    most = std::max({most, model + obs[i].y, model + obs[i].predicted + static_cast<double>(reserve.fixed)});
  }
  const int w = 760, label = 260, row = 46;
  std::ostringstream s;
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << w + label << "' height='"
    << row * recs.size() + 30 << "' role='img' aria-label='predicted against measured, per case'>";
  for (std::size_t i = 0; i < recs.size(); ++i) {
    const auto& r = recs[i];
    const double model = static_cast<double>(model_terms(r).held());
    const double pred_res = obs[i].predicted;
    const double meas = model + obs[i].y;
    const double k = w / most;
    const int y = static_cast<int>(i) * row + 10;
    s << "<text x='0' y='" << y + 14 << "' font-size='11'>" << esc(r.origin.substr(r.origin.rfind('/') + 1))
      << "</text>";
    s << "<rect x='" << label << "' y='" << y << "' width='" << model * k << "' height='14' fill='#4c72b0'/>";
    s << "<rect x='" << label + model * k << "' y='" << y << "' width='" << std::max(0.0, pred_res) * k
      << "' height='14' fill='#dd8452'/>";
    s << "<rect x='" << label << "' y='" << y + 17 << "' width='" << std::max(0.0, meas) * k
      << "' height='14' fill='#55a868'/>";
    s << "<text x='" << label + 4 << "' y='" << y + 28 << "' font-size='10' fill='#fff'>" << gib(meas)
      << " GiB " << (r.measured ? "measured" : "emulated") << "</text>";
  }
  s << "<text x='" << label << "' y='" << row * recs.size() + 24
    << "' font-size='11'>blue: model terms (predicted); orange: reserve (predicted); green: "
       "footprint</text></svg>";
  return s.str();
}

}  // namespace

std::string html_report(const std::vector<probes::measurement_record>& records,
                        const std::optional<calibration>& cal, const std::string& title) {
  std::vector<probes::measurement_record> cases;
  std::vector<observation> obs;
  std::vector<std::string> skipped;
  for (const auto& r : records) {
    try {
      observation o = observe(r);
      if (r.kind == "overheads") {
        skipped.push_back(r.origin + ": an overheads record (in the fixed term of the fit, no case to draw)");
        continue;
      }
      // Predicted reserve for this case: the calibration's terms, else the reference case's default.
      const reserve_model res = cal ? reserve_of(*cal, "") : r.inputs->device.reserve;
      o.predicted = static_cast<double>(
          res.bytes(static_cast<std::int64_t>(o.x[1]), static_cast<std::int64_t>(o.x[2]), r.activations));
      if (o.x[0] == 0) o.predicted -= static_cast<double>(res.fixed);  // no context in the footprint
      o.residual = o.y - o.predicted;
      cases.push_back(r);
      obs.push_back(o);
    } catch (const std::exception& e) {
      skipped.push_back(e.what());
    }
  }
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>" << esc(title) << "</title>"
    << "<style>body{font-family:sans-serif;margin:2em;max-width:1100px;color:#222}table{border-collapse:"
       "collapse}"
       "td,th{border:1px solid #ccc;padding:3px "
       "8px;text-align:right}td:first-child,th:first-child{text-align:left}"
       ".note{color:#666;font-size:90%}h2{margin-top:1.6em}</style></head><body>\n";
  h << "<h1>" << esc(title)
    << "</h1>\n<p class='note'>Model terms and reserve are predicted by the analytic "
       "model; footprints are measured on a GPU (CUDA probes, PyTorch snapshots) or emulated (sim probes), "
       "as each "
       "row says.</p>\n";
  h << "<h2>Predicted against measured</h2>\n";
  if (cases.empty())
    h << "<p>No record with a case to draw.</p>\n";
  else
    h << bars(cases, obs, cal ? reserve_of(*cal, "") : cases.front().inputs->device.reserve) << "\n";
  h << "<h2>Residuals of the reserve</h2>\n<table><tr><th>record</th><th>kind</th><th>reserve needed "
       "(GiB)</th>"
       "<th>predicted (GiB)</th><th>residual (GiB)</th><th>residual %</th></tr>\n";
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& o = obs[i];
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.1f", o.y != 0 ? 100.0 * o.residual / std::fabs(o.y) : 0.0);
    h << "<tr><td>" << esc(o.origin) << "</td><td>" << esc(o.kind + " " + o.backend)
      << (o.measured ? "" : " (emulated)") << "</td><td>" << gib(o.y) << "</td><td>" << gib(o.predicted)
      << "</td><td>" << gib(o.residual) << "</td><td>" << pct << "</td></tr>\n";
  }
  h << "</table>\n";
  if (cal) {
    h << "<h2>The reserve's fitted parts</h2>\n<table><tr><th>term</th><th>value</th><th>std. "
         "error</th><th>how</th></tr>\n";
    for (int t = 0; t < term_count; ++t) {
      char v[64], e[64];
      std::snprintf(v, sizeof v, "%.6g", cal->terms[t].value);
      std::snprintf(e, sizeof e, "%.3g", cal->terms[t].stderr_);
      h << "<tr><td>" << term_name(t) << "</td><td>" << v << "</td><td>" << e << "</td><td>"
        << esc(cal->terms[t].why) << "</td></tr>\n";
    }
    h << "<tr><td>margin</td><td>" << gib(cal->margin) << " GiB</td><td></td><td>" << esc(cal->margin_rule)
      << "</td></tr></table>\n";
  }
  h << "<h2>Memory timelines</h2>\n<p class='note'>Each probe record's step as its replay saw it (the "
       "timeline the record carries: measured on a GPU, emulated on the simulated device).</p>\n";
  std::size_t drawn = 0, undrawn = 0;
  for (const auto& r : cases) {
    if (r.kind != "probe" || !r.inputs) continue;
    if (r.timeline && drawn == max_timelines) {
      ++undrawn;
      continue;
    }
    if (!r.timeline) {
      h << "<p>" << esc(r.origin) << ": no timeline (a record written before headroom.measurement/1.5)</p>\n";
      continue;
    }
    std::string svg = records::timeline_svg(*r.timeline, r.inputs->device.capacity, r.origin);
    h << "<h3>" << esc(r.origin) << (r.measured ? " (measured)" : " (emulated)") << "</h3>\n" << svg << "\n";
    ++drawn;
  }
  if (undrawn)
    h << "<p class='note'>" << undrawn << " more records carry a timeline; a report draws the first "
      << max_timelines << " (report fewer records to see theirs).</p>\n";
  if (!skipped.empty()) {
    h << "<h2>Records not drawn</h2><ul>\n";
    for (const auto& s : skipped) h << "<li>" << esc(s) << "</li>\n";
    h << "</ul>\n";
  }
  h << "</body></html>\n";
  return h.str();
}

}  // namespace headroom::calibrate
