// report_plan.cpp: the report's part for `headroom plan --json` (report_plan.hpp).
#include "report_plan.hpp"

#include <algorithm>
#include <sstream>

#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/problem_json.hpp"
#include "probes/records/measurement_record.hpp"
#include "probes/records/schema.hpp"

namespace headroom::calibrate::report {

namespace {

using nlohmann::json;

// The most stages, buffers and levers a plan may hold here (a plan of 100,000 pipeline stages is refused by
// plan itself long before): a document over these was not written by headroom.
constexpr std::size_t most_stages = 4096, most_buffers = 16, most_levers = 64;

const json& plan_field(const json& j, const char* key, const std::string& where) {
  const auto it = j.is_object() ? j.find(key) : j.end();
  if (it == j.end()) throw bad_input(where + "." + key, "missing (headroom plan --json writes it)");
  return *it;
}

// Returns j[key] as bytes: an integer within +-16 TiB (probes::max_record_bytes); negative only when
// `signed_ok` (a headroom).
std::int64_t plan_bytes(const json& j, const char* key, const std::string& where, bool signed_ok = false) {
  const json& v = plan_field(j, key, where);
  const std::int64_t most = probes::max_record_bytes;
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(most)))
    throw bad_input(where + "." + key, "expected a byte count (an integer)");
  const auto b = v.get<std::int64_t>();
  if (b > most || b < (signed_ok ? -most : 0))
    throw bad_input(where + "." + key, "out of range: " + std::to_string(b) + " bytes");
  return b;
}

std::string plan_text(const json& j, const char* key, const std::string& where) {
  const json& v = plan_field(j, key, where);
  if (!v.is_string()) throw bad_input(where + "." + key, "expected a string");
  return printable(v.get<std::string>(), 200);
}

bool plan_flag(const json& j, const char* key, const std::string& where) {
  const json& v = plan_field(j, key, where);
  if (!v.is_boolean()) throw bad_input(where + "." + key, "expected true or false");
  return v.get<bool>();
}

plan_stage parse_stage(const json& s, const std::string& w) {
  if (!s.is_object()) throw bad_input(w, "expected an object");
  plan_stage p;
  p.stage = plan_bytes(s, "stage", w);
  p.layers = plan_bytes(s, "layers", w);
  const json& bufs = plan_field(s, "buffers", w);
  if (!bufs.is_array() || bufs.size() > most_buffers)
    throw bad_input(w + ".buffers", "expected a list of buffers");
  for (const auto& b : bufs)
    p.buffers.emplace_back(plan_text(b, "name", w + ".buffers"), plan_bytes(b, "bytes", w + ".buffers"));
  p.persistent = plan_bytes(s, "persistent_bytes", w);
  p.transient = plan_bytes(s, "transient_bytes", w);
  p.state = plan_bytes(s, "state_bytes", w);
  p.activations = plan_bytes(s, "activation_bytes", w);
  p.reserve = plan_bytes(s, "reserve_bytes", w);
  p.total = plan_bytes(s, "total_bytes", w);
  p.working_set = plan_bytes(s, "working_set_bytes", w);
  p.output_phase = plan_bytes(s, "output_phase_bytes", w);
  p.step_peak = plan_bytes(s, "step_peak_bytes", w);
  p.fixed_overheads = plan_bytes(s, "fixed_overheads_bytes", w);
  p.peak_total = plan_bytes(s, "peak_total_bytes", w);
  p.capacity = plan_bytes(s, "capacity_bytes", w);
  p.headroom = plan_bytes(s, "headroom_bytes", w, true);
  p.fits = plan_flag(s, "fits", w);
  // The totals as the planner adds them (planner/stage_terms.hpp): a document where they do not add up was
  // edited, and drawing it would show figures no plan printed.
  auto must = [&](bool ok, const char* what, const char* rule) {
    if (!ok)
      throw bad_input(w + "." + what, std::string("is not ") + rule + " (not as headroom plan writes it)");
  };
  must(p.state == p.persistent + p.transient, "state_bytes", "persistent + transient");
  must(p.total == p.state + p.activations + p.reserve, "total_bytes", "state + activations + reserve");
  must(p.peak_total == p.step_peak + p.fixed_overheads, "peak_total_bytes", "step peak + fixed overheads");
  must(p.workspaces() >= 0, "step_peak_bytes",
       "at least state + activations + the larger of working set and output phase");
  must(p.headroom == p.capacity - std::max(p.total, p.peak_total), "headroom_bytes",
       "capacity - the larger total");
  return p;
}

// Returns a row of the totals table: the term, its GiB as the plan prints it, a note.
std::string plan_row(const std::string& what, std::int64_t bytes, const std::string& note = "",
                     bool strong = false) {
  const std::string b = strong ? "<b>" : "", e = strong ? "</b>" : "";
  return "<tr><td class='l'>" + b + esc(what) + e + "</td><td>" + b + gib_str(bytes, 1) + e +
         "</td><td class='l'>" + esc(note) + "</td></tr>\n";
}

}  // namespace

std::int64_t plan_stage::workspaces() const {
  return step_peak - state - activations - std::max(working_set, output_phase);
}

plan_view parse_plan(const json& j, const std::string& origin) {
  records::require(j, records::kind::plan, origin);
  plan_view v;
  v.origin = origin;
  const std::string w = origin + ":";
  const layout l = layout_from_json(plan_field(j, "layout", w), origin + ": layout");
  v.axes = axes_string(l);
  v.gpus = l.gpus;
  v.model = plan_text(plan_field(j, "model", w), "name", w + " model");
  v.recipe = plan_text(plan_field(j, "recipe", w), "name", w + " recipe");
  v.reserve_source = plan_text(plan_field(plan_field(j, "device", w), "reserve", w + " device"), "source",
                               w + " device.reserve");
  v.seq = plan_bytes(plan_field(j, "training", w), "seq", w + " training");
  v.micro_batch = plan_bytes(plan_field(j, "training", w), "micro_batch", w + " training");
  const json& stages = plan_field(j, "stages", w);
  if (!stages.is_array() || stages.empty() || stages.size() > most_stages)
    throw bad_input(w + " stages", "expected a list of 1 to " + std::to_string(most_stages) + " stages");
  for (std::size_t i = 0; i < stages.size(); ++i)
    v.stages.push_back(parse_stage(stages[i], w + " stages[" + std::to_string(i) + "]"));
  const std::int64_t worst = plan_bytes(j, "worst_stage", w);
  const auto at =
      std::find_if(v.stages.begin(), v.stages.end(), [&](const plan_stage& s) { return s.stage == worst; });
  if (at == v.stages.end()) throw bad_input(w + " worst_stage", "names no stage in stages");
  v.worst = static_cast<std::size_t>(at - v.stages.begin());
  v.fits = plan_flag(j, "fits", w);
  v.tight = plan_flag(j, "tight", w);
  if (v.fits != at->fits)
    throw bad_input(w + " fits", "disagrees with the worst stage's (not as headroom plan writes it)");
  if (j.contains("headroom_uncertainty_bytes"))
    v.uncertainty = plan_bytes(j, "headroom_uncertainty_bytes", w);
  if (j.contains("emulated_reserved_bytes"))
    v.emulated_reserved = plan_bytes(j, "emulated_reserved_bytes", w);
  if (const auto a = j.find("advice"); a != j.end() && a->is_object()) {
    if (const auto why = a->find("why"); why != a->end() && why->is_string())
      v.advice_why = printable(why->get<std::string>(), 600);
    if (const auto lv = a->find("levers"); lv != a->end() && lv->is_array())
      for (const auto& x : *lv)
        if (x.is_string() && v.advice_levers.size() < most_levers)
          v.advice_levers.push_back(printable(x.get<std::string>(), 600));
  }
  return v;
}

std::string plan_verdict(const plan_view& v) {
  const plan_stage& s = v.worst_stage();
  std::string text =
      v.fits ? (v.tight ? "fits, but headroom under 5% is too tight to trust" : "fits") : "does not fit";
  text += ": headroom " + gib_str(s.headroom, 1) + " GiB";
  if (v.uncertainty && *v.uncertainty > 0) text += " +- " + gib_str(*v.uncertainty, 2) + " GiB";
  text += " (" +
          fixed(100.0 * static_cast<double>(s.headroom) /
                    static_cast<double>(std::max<std::int64_t>(1, s.capacity)),
                1) +
          "%) of " + gib_str(s.capacity, 1) + " GiB, worst rank: stage " + std::to_string(s.stage) + " of " +
          std::to_string(v.stages.size());
  return text;
}

std::string plan_html(const plan_view& v) {
  const plan_stage& s = v.worst_stage();
  const bool peak_decides = s.peak_total > s.total;
  std::ostringstream h;
  h << "<section class='rec plan'><h3 title='" << esc(v.origin) << "'>" << esc(short_name(v.origin)) << ": "
    << esc(v.model) << " on " << v.gpus << " GPUs, " << esc(v.axes)
    << " (predicted by the analytic model)</h3>\n"
    << "<p class='verdict " << (v.fits ? (v.tight ? "tight" : "fits") : "nofit") << "'><b>"
    << esc(plan_verdict(v)) << "</b></p>\n<p class='note'>seq " << v.seq << ", micro-batch " << v.micro_batch
    << ", " << esc(v.recipe) << "; reserve: " << esc(v.reserve_source)
    << ". Figures as <code>headroom plan</code> printed them.</p>\n";
  h << "<div class='pair'><div><table class='totals'><tr><th>worst rank, stage " << s.stage
    << "</th><th>GiB per GPU</th><th>note</th></tr>\n";
  for (const auto& [name, bytes] : s.buffers) h << plan_row(name, bytes);
  if (s.transient) h << plan_row("ZeRO-3 gather transient", s.transient);
  h << plan_row("state", s.state) << plan_row("activations", s.activations)
    << plan_row("state + activations", s.state + s.activations)
    << plan_row("reserve", s.reserve, v.reserve_source)
    << plan_row("total", s.total,
                std::string("state + activations + reserve (the reference total)") +
                    (peak_decides ? "" : "; decides"),
                !peak_decides)
    << plan_row("backward working set, one layer", s.working_set);
  if (s.output_phase) h << plan_row("output phase", s.output_phase);
  if (s.workspaces())
    h << plan_row("library workspaces", s.workspaces(), "cuBLAS, TransformerEngine: in the allocator");
  h << plan_row("step peak", s.step_peak) << plan_row("fixed overheads", s.fixed_overheads, "context, NCCL")
    << plan_row("step peak + fixed overheads", s.peak_total, peak_decides ? "decides" : "", peak_decides)
    << plan_row("capacity", s.capacity)
    << plan_row("headroom", s.headroom,
                fixed(100.0 * static_cast<double>(s.headroom) /
                          static_cast<double>(std::max<std::int64_t>(1, s.capacity)),
                      1) +
                    "%" +
                    (v.uncertainty && *v.uncertainty > 0
                         ? "; +- " + gib_str(*v.uncertainty, 2) + " GiB (the calibration's)"
                         : ""),
                true)
    << "</table></div><div>\n";
  if (v.emulated_reserved && *v.emulated_reserved + s.fixed_overheads > std::max(s.total, s.peak_total))
    h << "<p><b>Allocator emulation:</b> the worst stage through PyTorch's caching-allocator rules reserves "
      << gib_str(*v.emulated_reserved, 1) << " GiB; with the fixed overheads "
      << gib_str(*v.emulated_reserved + s.fixed_overheads, 1) << " GiB, headroom "
      << gib_str(s.capacity - *v.emulated_reserved - s.fixed_overheads, 1) << " GiB.</p>\n";
  if (v.stages.size() > 1) {
    h << "<table "
         "class='stages'><tr><th>stage</th><th>layers</th><th>state</th><th>activations</th><th>reserve</th>"
         "<th>total</th><th>step peak + fixed overheads</th><th>headroom</th><th></th></tr>\n"
      << "<tr><th></th><th></th><th colspan='6'>GiB per GPU</th><th></th></tr>\n";
    for (const auto& t : v.stages)
      h << "<tr><td>" << t.stage << "</td><td>" << t.layers << "</td><td>" << gib_str(t.state, 1)
        << "</td><td>" << gib_str(t.activations, 1) << "</td><td>" << gib_str(t.reserve, 1) << "</td><td>"
        << gib_str(t.total, 1) << "</td><td>" << gib_str(t.peak_total, 1) << "</td><td>"
        << gib_str(t.headroom, 1) << "</td><td class='l'>" << (&t == &s ? "worst" : "") << "</td></tr>\n";
    h << "</table>\n";
  }
  if (!v.advice_why.empty() || !v.advice_levers.empty()) {
    h << "<p><b>Why it does not fit:</b> " << esc(v.advice_why) << "</p>\n<ul>";
    for (const auto& x : v.advice_levers) h << "<li>" << esc(x) << "</li>";
    h << "</ul>\n";
  }
  h << "</div></div></section>\n";
  return h.str();
}

bar_row plan_bar(const plan_view& v) {
  const plan_stage& s = v.worst_stage();
  bar_row b;
  b.name = short_name(v.origin);
  b.detail = "plan (predicted), " + v.model + ", stage " + std::to_string(s.stage) + " of " +
             std::to_string(v.stages.size());
  b.state = s.state;
  b.activations = s.activations;
  b.reserve = s.reserve;
  b.total = s.total;
  b.workspaces = s.workspaces();
  b.peak_extra = std::max(s.working_set, s.output_phase);
  b.fixed_overheads = s.fixed_overheads;
  b.peak_total = s.peak_total;
  b.capacity = s.capacity;
  return b;
}

}  // namespace headroom::calibrate::report
