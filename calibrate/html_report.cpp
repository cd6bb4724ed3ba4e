// html_report.cpp: the self-contained HTML report (see html_report.hpp). The charts are drawn by
// report_svg.cpp and report_snapshot.cpp; this file chooses the sections and writes the tables.
#include "html_report.hpp"

#include <algorithm>
#include <sstream>

#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "planner/format.hpp"
#include "planner/stage_terms.hpp"
#include "planner/units.hpp"
#include "probes/records/timeline.hpp"
#include "report_snapshot.hpp"
#include "report_svg.hpp"

namespace headroom::calibrate {

namespace {

// The record's predicted terms as the planner states them (planner/stage_terms.hpp).
stage_terms model_terms(const probes::measurement_record& r) {
  return {r.persistent, r.transient, r.activations, r.working_set, r.output_phase};
}

// The reserve the report predicts with: the calibration's terms, else the record's own (the default).
reserve_model reserve_for(const probes::measurement_record& r, const std::optional<calibration>& cal) {
  return cal ? reserve_of(*cal, "") : r.inputs->device.reserve;
}

// Returns what the record measured as one figure with its kind, when it has one: device used at the peak
// less what other processes held (CUDA probes), the reserved peak (snapshots: measured; sim: emulated).
std::optional<std::pair<double, std::string>> footprint(const probes::measurement_record& r) {
  if (r.kind == "probe" && r.device_used_at_peak)
    return std::pair{static_cast<double>(*r.device_used_at_peak - r.used_before_context.value_or(0)),
                     std::string("measured device used at the peak")};
  if (r.kind == "probe" || r.kind == "snapshot")
    return std::pair{static_cast<double>(r.peak_reserved),
                     std::string(r.measured ? "measured reserved peak" : "emulated reserved peak")};
  return std::nullopt;
}

// The `probe snapshot` record of the same source as snapshot record `r`, or null: the same path, else
// the same file name.
const nlohmann::json* replay_of(const probes::measurement_record& r, const report_extras& x) {
  const auto src = r.raw.find("source");
  if (src == r.raw.end() || !src->is_string()) return nullptr;
  const std::string s = src->get<std::string>();
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& [origin, j] : x.replays) {
      const auto o = j.find("source");
      if (o == j.end() || !o->is_string()) continue;
      const std::string t = o->get<std::string>();
      if (pass == 0 ? t == s : report::short_name(t) == report::short_name(s)) return &j;
    }
  return nullptr;
}

// Returns the record's verdict in a few words.
std::string record_verdict(const probes::measurement_record& r, const nlohmann::json* replay) {
  const auto fp = footprint(r);
  std::string v;
  if (r.kind == "overheads")
    v = "fixed overheads measured: " +
        report::bytes_text(static_cast<double>(r.fixed_overhead_bytes.value_or(0)));
  else if (r.out_of_memory)
    v = r.kind == "snapshot"
            ? "ran out of memory during the capture (measured)"
            : std::string("ran out of memory (") + (r.measured ? "measured" : "emulated") + ")";
  else if (fp && r.inputs && r.kind == "probe")
    v = "ran: " + fp->second + " " + report::bytes_text(fp->first) + " of " +
        report::bytes_text(static_cast<double>(r.inputs->device.capacity));
  else if (fp)
    v = "ran: " + fp->second + " " + report::bytes_text(fp->first);
  if (replay) {
    const std::string rv = report::replay_verdict(*replay);
    if (!rv.empty()) v += "; replayed: " + rv;
  }
  return v;
}

// The plan's stages of every record with a case, each on its own scale.
std::string stages_section(const std::vector<probes::measurement_record>& recs,
                           const std::optional<calibration>& cal) {
  std::vector<report::stage_bar> bars;
  for (const auto& r : recs) {
    if (!r.inputs || !r.where || r.kind == "overheads") continue;
    const stage_terms t = model_terms(r);
    const reserve_model res = reserve_for(r, cal);
    const std::int64_t reserve = res.bytes(t.churn(), reserve_tokens(*r.inputs, *r.where), t.activations);
    report::stage_bar b;
    b.name = report::short_name(r.origin) + " (" + axes_string(*r.where) + ")";
    b.state = t.state();
    b.activations = t.activations;
    b.peak_extra = t.peak_extra();
    b.fixed = std::min(res.fixed, reserve);
    b.reserve_rest = reserve - b.fixed;
    b.capacity = r.inputs->device.capacity;
    if (const auto fp = footprint(r)) {
      b.measured = fp->first;
      b.what_measured = fp->second;
    }
    bars.push_back(std::move(b));
  }
  if (bars.empty()) return "";
  return "<h2>The plan's stages against the capacity</h2>\n<p class='note'>Predicted by the analytic model "
         "for each record's case (worst stage): the step peak (state, activations, the larger of the "
         "backward working set and the output phase) and the reserve (" +
         report::esc(cal ? "the calibration's terms" : "the default reserve (uncalibrated)") +
         "), against the capacity (dashed, or named at the row's end when it lies far beyond the bar); the "
         "black bar is what the record measured or emulated. Each "
         "row has its own scale. Hover for the figures.</p>\n" +
         report::stage_bars_svg(bars) + "\n";
}

// The calibration: its terms with units, its domain (what it was fitted on), its margin.
std::string calibration_section(const calibration& c) {
  std::ostringstream h;
  h << "<h2>Calibration</h2>\n<table><tr><th>term</th><th>value</th><th>std. error</th><th>how</th></tr>\n";
  for (int t = 0; t < term_count; ++t) {
    const auto& f = c.terms[t];
    std::string v, e;
    if (t == 0) {
      v = report::bytes_text(f.value);
      e = report::bytes_text(f.stderr_);
    } else if (t == 1) {
      v = fixed(f.value, 4) + " bytes per churning byte";
      e = fixed(f.stderr_, 4);
    } else {
      v = fixed(f.value, 1) + " bytes per token";
      e = fixed(f.stderr_, 1);
    }
    h << "<tr><td class='l'>" << term_name(t) << "</td><td>" << v << "</td><td>" << e << "</td><td class='l'>"
      << report::esc(f.why) << "</td></tr>\n";
  }
  h << "<tr><td class='l'>margin</td><td>" << report::bytes_text(c.margin) << "</td><td></td><td class='l'>"
    << report::esc(c.margin_rule) << "</td></tr>\n";
  if (c.fixed_overheads)
    h << "<tr><td class='l'>fixed overheads</td><td>"
      << report::bytes_text(static_cast<double>(*c.fixed_overheads))
      << "</td><td></td><td class='l'>context, cuBLAS and NCCL measured by an overheads record</td></tr>\n";
  h << "</table>\n";
  // The domain: where the fit holds, from what it was fitted on.
  auto stated = [](const std::string& s) { return s.empty() ? std::string("not stated") : report::esc(s); };
  std::size_t measured = 0, emulated = 0;
  double churn_lo = 0, churn_hi = 0, tok_lo = 0, tok_hi = 0;
  for (std::size_t i = 0; i < c.records.size(); ++i) {
    const auto& o = c.records[i];
    (o.measured ? measured : emulated) += 1;
    if (o.x.size() < 3) continue;
    churn_lo = i ? std::min(churn_lo, o.x[1]) : o.x[1];
    churn_hi = std::max(churn_hi, o.x[1]);
    tok_lo = i ? std::min(tok_lo, o.x[2]) : o.x[2];
    tok_hi = std::max(tok_hi, o.x[2]);
  }
  h << "<p><b>Domain</b> (what it was fitted on; outside it the fit is an extrapolation): GPU "
    << stated(c.gpu) << ", driver " << stated(c.driver) << ", CUDA " << stated(c.cuda_runtime)
    << ", allocator " << stated(c.allocator) << "; " << c.records.size() << " records (" << measured
    << " measured, " << emulated << " emulated)";
  if (!c.records.empty())
    h << "; churning bytes " << report::bytes_text(churn_lo) << " to " << report::bytes_text(churn_hi)
      << "; tokens per "
      << "micro-batch " << fixed(tok_lo, 0) << " to " << fixed(tok_hi, 0);
  h << ".</p>\n";
  return h.str();
}

// The residuals of the reserve: the plot and the table.
std::string residual_section(const std::vector<probes::measurement_record>& cases,
                             const std::vector<observation>& obs, bool calibrated) {
  if (cases.empty()) return "";
  std::ostringstream h;
  h << "<h2>Residuals of the reserve</h2>\n<p class='note'>Per record: the reserve it had to cover (what it "
       "measured or emulated less the model terms) against the reserve predicted by "
    << (calibrated ? "the calibration" : "the default reserve (uncalibrated)")
    << "; above the line the prediction was short.</p>\n";
  std::vector<report::residual_point> pts;
  for (std::size_t i = 0; i < cases.size(); ++i)
    pts.push_back({report::short_name(cases[i].origin), obs[i].predicted, obs[i].y});
  h << report::residual_svg(pts) << "\n";
  h << "<table><tr><th>record</th><th>kind</th><th>reserve needed</th><th>predicted</th><th>residual</th>"
       "<th>residual %</th></tr>\n";
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& o = obs[i];
    h << "<tr><td class='l' title='" << report::esc(o.origin) << "'>"
      << report::esc(report::short_name(o.origin)) << "</td><td>" << report::esc(o.kind + " " + o.backend)
      << (o.measured ? "" : " (emulated)") << "</td><td>" << report::bytes_text(o.y) << "</td><td>"
      << report::bytes_text(o.predicted) << "</td><td>" << report::bytes_text(o.residual) << "</td><td>"
      << (o.y != 0 ? fixed(100.0 * o.residual / std::fabs(o.y), 1) : std::string("-")) << "</td></tr>\n";
  }
  h << "</table>\n";
  return h.str();
}

// Each snapshot record's section (its verdict, its view, its replay beside it), and the replays whose
// snapshot record is not in the set; counts the timelines drawn and those left out (max_timelines).
std::string snapshots_section(const std::vector<probes::measurement_record>& records,
                              const report_extras& extras, std::size_t& drawn, std::size_t& undrawn) {
  std::vector<const nlohmann::json*> shown_replays;
  std::ostringstream snaps;
  for (const auto& r : records) {
    if (r.kind != "snapshot") continue;
    const nlohmann::json* rep = replay_of(r, extras);
    snaps << "<section class='rec'><h3 title='" << report::esc(r.origin) << "'>"
          << report::esc(report::short_name(r.origin)) << " (measured by PyTorch)</h3>\n<p><b>Verdict:</b> "
          << report::esc(record_verdict(r, rep)) << "</p>\n";
    if (r.snapshot_view.is_null()) {
      snaps << "<p>No memory timeline: the record carries no snapshot_view (written before this report, or "
               "by another tool); rewrite it with <code>headroom snapshot FILE --json</code>.</p>\n";
    } else if (drawn == max_timelines) {
      ++undrawn;
    } else {
      try {
        snaps << report::snapshot_view_html(r);
        ++drawn;
      } catch (const std::exception& e) {
        snaps << "<p>Not drawn: " << report::esc(e.what()) << "</p>\n";
      }
    }
    if (rep) {
      snaps << "<h4>Real beside emulated ("
            << report::esc(report::short_name(std::find_if(extras.replays.begin(), extras.replays.end(),
                                                           [&](const auto& p) { return &p.second == rep; })
                                                  ->first))
            << ")</h4>\n"
            << report::replay_html(*rep);
      shown_replays.push_back(rep);
    }
    snaps << "</section>\n";
  }
  for (const auto& [origin, j] : extras.replays) {
    if (std::find(shown_replays.begin(), shown_replays.end(), &j) != shown_replays.end()) continue;
    snaps << "<section class='rec'><h3 title='" << report::esc(origin) << "'>"
          << report::esc(report::short_name(origin))
          << " (a snapshot replay; its snapshot record is not in the set)</h3>\n"
          << report::replay_html(j) << "</section>\n";
  }
  return snaps.str().empty() ? "" : "<h2>Measured snapshots</h2>\n" + snaps.str();
}

// Each probe record's timeline as the record carries it; counts as snapshots_section does.
std::string timelines_section(const std::vector<probes::measurement_record>& records, std::size_t& drawn,
                              std::size_t& undrawn) {
  std::ostringstream tl;
  std::size_t without = 0;
  for (const auto& r : records) {
    if (r.kind != "probe" || !r.inputs) continue;
    if (!r.timeline) {
      ++without;
      continue;
    }
    if (drawn == max_timelines) {
      ++undrawn;
      continue;
    }
    tl << "<h3 title='" << report::esc(r.origin) << "'>" << report::esc(report::short_name(r.origin))
       << (r.measured ? " (measured)" : " (emulated)") << "</h3>\n"
       << records::timeline_svg(*r.timeline, r.inputs->device.capacity, report::short_name(r.origin)) << "\n";
    ++drawn;
  }
  std::ostringstream h;
  if (!tl.str().empty() || without) {
    h << "<h2>Probe timelines</h2>\n<p class='note'>Each probe record's step as its replay saw it (measured "
         "on "
         "a GPU, emulated on the simulated device).";
    if (without)
      h << " " << without << " probe records carry no timeline (written before headroom.measurement/1.5).";
    h << "</p>\n" << tl.str();
  }
  return h.str();
}

const char* page_style =
    "<style>body{font-family:sans-serif;margin:2em;max-width:1060px;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
    "text-align:right;vertical-align:top}th{background:#f4f4f4;text-align:left}td.l{text-align:left}"
    "td:first-child,th:first-child{text-align:left}.note{color:#555;font-size:90%}h2{margin-top:1.6em;"
    "border-bottom:1px solid #ddd}code{font-size:85%;word-break:break-all}.sw{display:inline-block;"
    "width:12px;height:12px;margin-right:6px;vertical-align:middle}ol.stack{margin:.3em 0;font-size:90%;"
    "text-align:left}section.rec{border:1px solid #ddd;padding:0 1em;margin:1em 0}</style>";

}  // namespace

std::string html_report(const std::vector<probes::measurement_record>& records,
                        const std::optional<calibration>& cal, const std::string& title,
                        const report_extras& extras) {
  std::vector<probes::measurement_record> cases;
  std::vector<observation> obs;
  std::vector<std::string> skipped;
  for (const auto& r : records) {
    if (r.kind == "overheads") continue;  // in the fit's fixed term; no case to draw
    try {
      observation o = observe(r);
      const reserve_model res = reserve_for(r, cal);
      o.predicted = static_cast<double>(
          res.bytes(static_cast<std::int64_t>(o.x[1]), static_cast<std::int64_t>(o.x[2]), r.activations));
      if (o.x[0] == 0) o.predicted -= static_cast<double>(res.fixed);  // no context in the footprint
      o.residual = o.y - o.predicted;
      cases.push_back(r);
      obs.push_back(o);
    } catch (const std::exception& e) {
      if (r.kind != "snapshot") skipped.push_back(std::string("no residual: ") + e.what());
    }
  }
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>" << report::esc(title)
    << "</title>" << page_style << "</head><body>\n<h1>" << report::esc(title)
    << "</h1>\n<p class='note'>Model terms and "
    << "reserves are predicted by the analytic model; footprints are measured on a GPU (CUDA probes, "
       "PyTorch snapshots) or emulated (sim probes), as each row says.</p>\n";
  h << "<h2>Records</h2>\n<table><tr><th>record</th><th>kind</th><th>verdict</th><th>command "
       "line</th></tr>\n";
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    const std::string cmd = i < extras.command_lines.size() ? extras.command_lines[i] : "";
    h << "<tr><td class='l' title='" << report::esc(r.origin) << "'>"
      << report::esc(report::short_name(r.origin)) << "</td><td class='l'>"
      << report::esc(r.kind + " (" + r.backend + ", " + (r.measured ? "measured" : "emulated") + ")")
      << "</td><td class='l'>"
      << report::esc(record_verdict(r, r.kind == "snapshot" ? replay_of(r, extras) : nullptr))
      << "</td><td class='l'>"
      << (cmd.empty() ? std::string("<span class='note'>not recorded</span>")
                      : "<code>" + report::esc(printable(cmd, 2000)) + "</code>")
      << "</td></tr>\n";
  }
  h << "</table>\n";
  h << stages_section(records, cal);
  if (cal) h << calibration_section(*cal);
  h << residual_section(cases, obs, cal.has_value());
  std::size_t drawn = 0, undrawn = 0;
  h << snapshots_section(records, extras, drawn, undrawn) << timelines_section(records, drawn, undrawn);
  if (undrawn)
    h << "<p class='note'>" << undrawn << " more records carry a timeline; a report draws the first "
      << max_timelines << " (report fewer records to see theirs).</p>\n";
  if (!skipped.empty()) {
    h << "<h2>Records without a residual</h2><ul>\n";
    for (const auto& s : skipped) h << "<li>" << report::esc(s) << "</li>\n";
    h << "</ul>\n";
  }
  h << "</body></html>\n";
  return h.str();
}

}  // namespace headroom::calibrate
