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
#include "report_plan.hpp"
#include "report_snapshot.hpp"
#include "report_svg.hpp"

namespace headroom::calibrate {

namespace {

// Returns what the record measured as one figure with its kind, when it has one: device used at the peak
// less what other processes held (CUDA probes), the reserved peak (snapshots: measured; sim: emulated),
// an observation's figure (device used, reserved or allocated peak, as its row gives it).
std::optional<std::pair<double, std::string>> footprint(const probes::measurement_record& r) {
  if (r.kind == "probe" && r.device_used_at_peak)
    return std::pair{static_cast<double>(*r.device_used_at_peak - r.used_before_context.value_or(0)),
                     std::string("measured device used at the peak")};
  if (r.kind == "probe" || r.kind == "snapshot")
    return std::pair{static_cast<double>(r.peak_reserved),
                     std::string(r.measured ? "measured reserved peak" : "emulated reserved peak")};
  if (r.kind == "observation") {
    if (r.figure == "device_used" && r.device_used_at_peak)
      return std::pair{static_cast<double>(*r.device_used_at_peak),
                       std::string("measured device used (observed)")};
    if (r.figure == "reserved_peak")
      return std::pair{static_cast<double>(r.peak_reserved),
                       std::string("measured reserved peak (observed)")};
    if (r.figure == "allocated_peak")
      return std::pair{static_cast<double>(r.peak_allocated),
                       std::string("measured allocated peak (observed)")};
  }
  return std::nullopt;
}

// Returns the command line to show for record `r` (its environment's, "" when none): for an observation,
// the plan of its run ("headroom plan " and the row's flags) rather than the observe run that converted it.
std::string command_of(const probes::measurement_record& r, const std::string& stated) {
  if (r.kind != "observation") return stated;
  const auto o = r.raw.find("observation");
  if (o == r.raw.end() || !o->is_object()) return stated;
  const auto flags = o->find("problem_flags");
  if (flags != o->end() && flags->is_string() && !flags->get<std::string>().empty())
    return "headroom plan " + flags->get<std::string>();
  return stated;
}

// Returns where an observation's figure came from ("observed: mb1, row 1 (reserved_peak); SOURCE"), ""
// for other records.
std::string observed_from(const probes::measurement_record& r) {
  const auto o = r.raw.find("observation");
  if (r.kind != "observation" || o == r.raw.end() || !o->is_object()) return "";
  auto str = [&](const char* k) {
    const auto v = o->find(k);
    return v != o->end() && v->is_string() ? printable(v->get<std::string>(), 200) : std::string();
  };
  std::string s = "observed: " + str("run");
  if (const auto row = o->find("row"); row != o->end() && row->is_number_integer())
    s += ", row " + std::to_string(row->get<std::int64_t>());
  s += " (" + r.figure + ")";  // the figure itself is in the verdict column, in its unit
  if (!str("source").empty()) s += "; " + str("source");
  return s;
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

// Returns the record's verdict in a few words (figures in GiB, as every verdict in the table).
std::string record_verdict(const probes::measurement_record& r, const nlohmann::json* replay) {
  const auto fp = footprint(r);
  std::string v;
  if (r.kind == "overheads")
    v = "fixed overheads measured: " +
        report::gib_text(static_cast<double>(r.fixed_overhead_bytes.value_or(0)), 2);
  else if (r.out_of_memory)
    v = r.kind == "snapshot"
            ? "ran out of memory during the capture (measured)"
            : std::string("ran out of memory (") + (r.measured ? "measured" : "emulated") + ")";
  else if (fp && r.inputs && (r.kind == "probe" || r.kind == "observation"))
    v = (r.kind == "probe" ? "ran: " : "") + fp->second + " " + report::gib_text(fp->first, 2) + " of " +
        report::gib_text(static_cast<double>(r.inputs->device.capacity), 1);
  else if (fp)
    v = "ran: " + fp->second + " " + report::gib_text(fp->first, 2);
  if (replay) {
    const std::string rv = report::replay_verdict(*replay);
    if (!rv.empty()) v += "; replayed: " + rv;
  }
  return v;
}

// Returns the row of record `r`'s case: the totals `headroom plan` prints for it today (with the
// calibration's reserve and fixed overheads when there is one, as `plan --calibration` takes them), at the
// stage it measured, and what it measured; nullopt when it has no case or the planner refuses it (`why`).
std::optional<report::bar_row> record_bar(const probes::measurement_record& r,
                                          const std::optional<calibration>& cal, std::string& why) {
  if (!r.inputs || !r.where || r.kind == "overheads") return std::nullopt;
  problem p = *r.inputs;
  if (cal && weakness(*cal).empty()) {  // a fit too weak to use is not used, as in plan (strength.hpp)
    p.device.reserve = reserve_of(*cal, "");
    if (cal->fixed_overheads) p.device.fixed_overheads = *cal->fixed_overheads;
  }
  try {
    const breakdown b = estimate(p, *r.where);
    const auto at =
        std::find_if(b.stages.begin(), b.stages.end(), [&](const auto& s) { return s.stage == r.stage; });
    const stage_breakdown& w = at != b.stages.end() ? *at : b.worst_stage();
    report::bar_row row;
    row.name = report::short_name(r.origin);
    row.detail = r.kind + (r.figure.empty() ? "" : " " + r.figure) + " (" +
                 (r.measured ? "measured" : "emulated") + "), " + axes_string(*r.where) + ", stage " +
                 std::to_string(w.stage);
    row.state = w.state;
    row.activations = w.activations;
    row.reserve = w.reserve;
    row.total = w.total;
    row.workspaces = w.allocator_workspaces;
    row.peak_extra = std::max(w.working_set, w.output_phase);
    row.fixed_overheads = w.fixed_overheads;
    row.peak_total = w.peak_total;
    row.capacity = w.capacity;
    if (const auto fp = footprint(r); fp && !r.out_of_memory) {
      row.measured = fp->first;
      row.what_measured = fp->second;
    }
    return row;
  } catch (const std::exception& e) {
    why = report::short_name(r.origin) + ": " + e.what();
    return std::nullopt;
  }
}

// The plans' and the records' totals with what was measured beside them, on one scale.
std::string totals_section(const std::vector<report::plan_view>& plans,
                           const std::vector<probes::measurement_record>& recs,
                           const std::optional<calibration>& cal) {
  std::vector<report::bar_row> rows;
  std::vector<std::string> refused;
  for (const auto& v : plans) rows.push_back(report::plan_bar(v));
  std::size_t measured = 0, beyond = 0;
  for (const auto& r : recs) {
    std::string why;
    auto row = record_bar(r, cal, why);
    if (!why.empty()) refused.push_back(why);
    if (!row) continue;
    if (rows.size() == max_bars) {
      ++beyond;
      continue;
    }
    measured += row->measured ? 1 : 0;
    rows.push_back(std::move(*row));
  }
  if (rows.empty()) return "";
  std::ostringstream h;
  h << "<h2>Predicted totals against the capacity, with what was measured</h2>\n<p class='note'>Each row is "
       "one "
       "case on one scale (GiB per GPU): the two totals <code>headroom plan</code> prints for it, the "
       "reference "
       "total (state + activations + reserve) and the step peak + fixed overheads; the larger decides. Plans "
       "are drawn as they were written; a record's case is predicted by this planner, with "
    << (cal && weakness(*cal).empty() ? "the calibration's reserve"
        : cal ? "the reserve the record states (the calibration is too weak to use, as plan would say)"
              : "the reserve the record states (the default: uncalibrated)")
    << ", at the stage it measured. The black bar beneath is what the record measured on a GPU or emulated ("
    << measured << " of " << rows.size() - plans.size() << " records have one).</p>\n"
    << report::bars_svg(rows) << "\n";
  if (beyond)
    h << "<p class='note'>" << beyond << " more records with a case are not drawn (a chart draws " << max_bars
      << ").</p>\n";
  for (const auto& w : refused) h << "<p class='note'>Not drawn: " << report::esc(w) << "</p>\n";
  return h.str();
}

// The calibration's terms, each in its unit (the unit column), with their standard errors.
std::string calibration_terms(const calibration& c) {
  std::ostringstream h;
  h << "<table><tr><th>term</th><th>value</th><th>std. error</th><th>unit</th><th>how</th></tr>\n";
  auto term = [&](const std::string& name, const std::string& v, const std::string& e,
                  const std::string& unit, const std::string& why) {
    h << "<tr><td class='l'>" << report::esc(name) << "</td><td>" << v << "</td><td>" << e
      << "</td><td class='l'>" << report::esc(unit) << "</td><td class='l'>" << report::esc(why)
      << "</td></tr>\n";
  };
  const double g = static_cast<double>(gib);
  for (int t = 0; t < term_count; ++t) {
    const auto& f = c.terms[t];
    if (t == 0) term(term_name(t), fixed(f.value / g, 3), fixed(f.stderr_ / g, 3), "GiB", f.why);
    if (t == 1) term(term_name(t), fixed(f.value, 4), fixed(f.stderr_, 4), "bytes per churning byte", f.why);
    if (t == 2) term(term_name(t), fixed(f.value, 1), fixed(f.stderr_, 1), "bytes per token", f.why);
  }
  term("activation factor - 1", fixed(c.activation.value, 4), fixed(c.activation.stderr_, 4),
       "bytes per ledger activation byte",
       c.activation.why +
           (c.activation_implementation.empty() ? "" : " (fitted on " + c.activation_implementation + ")"));
  term("margin", fixed(c.margin / g, 3), "", "GiB", c.margin_rule);
  if (c.fixed_overheads)
    term("fixed overheads", fixed(static_cast<double>(*c.fixed_overheads) / g, 3), "", "GiB",
         "context, cuBLAS and NCCL measured by an overheads record");
  h << "</table>\n";
  return h.str();
}

// The calibration: its terms with units, its domain (what it was fitted on), its margin.
std::string calibration_section(const calibration& c) {
  std::ostringstream h;
  h << "<h2>Calibration</h2>\n";
  const std::string weak = weakness(c);
  h << "<p><b>Verdict</b>: "
    << (weak.empty() ? std::string("usable (calibrate/strength.hpp's rule)")
                     : "too weak to use: " + report::esc(weak) +
                           "; <code>plan --calibration</code> keeps the default reserve with it")
    << ".</p>\n"
    << calibration_terms(c);
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
    h << "; churning bytes " << report::gib_text(churn_lo, 2) << " to " << report::gib_text(churn_hi, 2)
      << "; tokens per micro-batch " << fixed(tok_lo, 0) << " to " << fixed(tok_hi, 0);
  h << ".</p>\n";
  return h.str();
}

// Returns the reserve predicted for observation `o` as the fit predicts it (calibration.cpp): the terms
// times their inputs plus the activation factor's share (none for an allocated peak); without a
// calibration, the reserve the record states. Bytes.
double predicted_reserve(const observation& o, const std::optional<calibration>& cal,
                         const reserve_model& own) {
  const bool allocated = o.kind == "observation" && o.figure == "allocated_peak";
  const double terms[term_count] = {cal ? cal->terms[0].value : static_cast<double>(own.fixed),
                                    cal ? cal->terms[1].value : own.fragmentation,
                                    cal ? cal->terms[2].value : own.per_token};
  double p = allocated ? 0 : (cal ? cal->activation.value : own.activation_extra) * o.activations;
  for (std::size_t t = 0; t < term_count && t < o.x.size(); ++t) p += o.x[t] * terms[t];
  return p;
}

// The residuals of the reserve: the plot, labelled in text, and the table (one unit a column).
std::string residual_section(const std::vector<probes::measurement_record>& cases,
                             const std::vector<observation>& obs, bool calibrated) {
  if (cases.empty()) return "";
  std::ostringstream h;
  h << "<h2>Residuals of the reserve</h2>\n<p class='note'>Per record: the reserve it had to cover (what it "
       "measured or emulated less the model terms) against the reserve predicted by "
    << (calibrated ? "the calibration (its fitted terms, without the margin)"
                   : "the default reserve (uncalibrated)")
    << "; above the line the prediction was short. Each point is labelled with its number in the "
       "table.</p>\n";
  std::vector<report::residual_point> pts;
  std::vector<double> needed, predicted, residual;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    pts.push_back({report::short_name(cases[i].origin), obs[i].predicted, obs[i].y});
    needed.push_back(obs[i].y);
    predicted.push_back(obs[i].predicted);
    residual.push_back(obs[i].residual);
  }
  const auto un = report::unit_for(needed), up = report::unit_for(predicted), ur = report::unit_for(residual);
  h << "<div class='pair'><div>" << report::residual_svg(pts) << "</div><div>\n";
  h << "<table><tr><th>#</th><th>record</th><th>kind</th><th>reserve needed (" << un.name
    << ")</th><th>predicted (" << up.name << ")</th><th>residual (" << ur.name
    << ")</th><th>residual %</th></tr>\n";
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& o = obs[i];
    h << "<tr><td>" << i + 1 << "</td><td class='l' title='" << report::esc(o.origin) << "'>"
      << report::esc(report::short_name(o.origin)) << "</td><td class='l'>"
      << report::esc(o.kind + " " + (o.figure.empty() ? o.backend : o.figure))
      << (o.measured ? "" : " (emulated)") << "</td><td>" << report::in_unit(o.y, un) << "</td><td>"
      << report::in_unit(o.predicted, up) << "</td><td>" << report::in_unit(o.residual, ur) << "</td><td>"
      << (o.y != 0 ? fixed(100.0 * o.residual / std::fabs(o.y), 1) : std::string("-")) << "</td></tr>\n";
  }
  h << "</table></div></div>\n";
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

// The page's style: it uses the window's width (charts scale with it through their viewBox; the residual
// plot and its table side by side where there is room), and a print view (A4 landscape, black text, no
// break inside a chart, a row or a plan) for the PDF a team attaches.
const char* page_style =
    "<style>body{font-family:sans-serif;margin:1.5em 2em;max-width:1800px;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
    "text-align:right;vertical-align:top}th{background:#f4f4f4;text-align:left}td.l{text-align:left}"
    "td:first-child,th:first-child{text-align:left}.note{color:#555;font-size:90%}h2{margin-top:1.6em;"
    "border-bottom:1px solid #ddd}code{font-size:85%;word-break:break-all}.sw{display:inline-block;"
    "width:12px;height:12px;margin-right:6px;vertical-align:middle}ol.stack{margin:.3em 0;font-size:90%;"
    "text-align:left}section.rec{border:1px solid #ddd;padding:0 1em;margin:1em 0}"
    "svg.chart{display:block;width:100%;height:auto}svg.plot{max-width:760px}.pair{display:flex;flex-wrap:"
    "wrap;gap:1.5em;"
    "align-items:flex-start}.pair>div{flex:1 1 600px;min-width:0}.verdict{font-size:115%}"
    ".verdict.fits{color:#1a7f37}.verdict.tight{color:#9a6700}.verdict.nofit{color:#b00020}"
    "@media print{@page{size:A4 landscape;margin:10mm}body{margin:0;max-width:none;font-size:9pt;color:#000}"
    ".note{color:#333}.pair{flex-wrap:nowrap}h1,h2,h3,h4{break-after:avoid}svg,tr,section.plan,.pair>div{"
    "break-inside:avoid}"
    "*{-webkit-print-color-adjust:exact;print-color-adjust:exact}code{word-break:break-all}"
    "section.rec{border-color:#999}}</style>";

// Returns the measured and emulated records' residuals: each record that can say something about the reserve
// with its observation (the reserve predicted as the fit predicts it); `skipped` gets why the others cannot.
std::pair<std::vector<probes::measurement_record>, std::vector<observation>> residuals_of(
    const std::vector<probes::measurement_record>& records, const std::optional<calibration>& cal,
    std::vector<std::string>& skipped) {
  std::vector<probes::measurement_record> cases;
  std::vector<observation> obs;
  for (const auto& r : records) {
    if (r.kind == "overheads") continue;  // in the fit's fixed term; no case to draw
    try {
      observation o = observe(r);
      o.predicted = predicted_reserve(o, cal, r.inputs->device.reserve);
      o.residual = o.y - o.predicted;
      cases.push_back(r);
      obs.push_back(o);
    } catch (const std::exception& e) {
      if (r.kind != "snapshot") skipped.push_back(std::string("no residual: ") + e.what());
    }
  }
  return {cases, obs};
}

// The table of every plan and record: its kind, its verdict, the command line that made it.
std::string records_table(const std::vector<report::plan_view>& plans,
                          const std::vector<probes::measurement_record>& records,
                          const report_extras& extras) {
  std::ostringstream h;
  auto command = [](const std::string& cmd, const std::string& note) {
    return (cmd.empty() ? std::string("<span class='note'>not recorded</span>")
                        : "<code>" + report::esc(printable(cmd, 2000)) + "</code>") +
           (note.empty() ? "" : "<br><span class='note'>" + report::esc(note) + "</span>");
  };
  h << "<h2>Records</h2>\n<table><tr><th>record</th><th>kind</th><th>verdict</th><th>command "
       "line</th></tr>\n";
  for (const auto& v : plans)
    h << "<tr><td class='l' title='" << report::esc(v.origin) << "'>"
      << report::esc(report::short_name(v.origin)) << "</td><td class='l'>plan (predicted)</td><td class='l'>"
      << report::esc(report::plan_verdict(v)) << "</td><td class='l'>" << command("", "") << "</td></tr>\n";
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    const std::string cmd = command_of(r, i < extras.command_lines.size() ? extras.command_lines[i] : "");
    h << "<tr><td class='l' title='" << report::esc(r.origin) << "'>"
      << report::esc(report::short_name(r.origin)) << "</td><td class='l'>"
      << report::esc(r.kind + " (" + r.backend + ", " + (r.measured ? "measured" : "emulated") + ")")
      << "</td><td class='l'>"
      << report::esc(record_verdict(r, r.kind == "snapshot" ? replay_of(r, extras) : nullptr))
      << "</td><td class='l'>" << command(cmd, observed_from(r)) << "</td></tr>\n";
  }
  h << "</table>\n";
  return h.str();
}

}  // namespace

std::string html_report(const std::vector<probes::measurement_record>& records,
                        const std::optional<calibration>& cal, const std::string& title,
                        const report_extras& extras) {
  std::vector<report::plan_view> plans;
  for (const auto& [origin, j] : extras.plans) plans.push_back(report::parse_plan(j, origin));
  std::vector<std::string> skipped;
  const auto [cases, obs] = residuals_of(records, cal, skipped);
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>" << report::esc(title)
    << "</title>" << page_style << "</head><body>\n<h1>" << report::esc(title)
    << "</h1>\n<p class='note'>Plans, model terms "
    << "and reserves are predicted by the analytic model; footprints are measured on a GPU (CUDA probes, "
       "PyTorch snapshots, observed runs) or emulated (sim probes), as each row says.</p>\n";
  if (!plans.empty()) {
    h << "<h2>The plan" << (plans.size() > 1 ? "s" : "") << "</h2>\n";
    for (const auto& v : plans) h << report::plan_html(v);
  }
  h << records_table(plans, records, extras) << totals_section(plans, records, cal);
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
