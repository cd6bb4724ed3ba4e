// tables.cpp: table, JSON and CSV writers for plans, suggestions and minimum-GPU searches.
#include "tables.hpp"

#include <algorithm>
#include <cstdio>

#include "planner/explain.hpp"
#include "planner/format.hpp"
#include "planner/model_files.hpp"
#include "planner/problem_json.hpp"
#include "planner/recipe.hpp"
#include "planner/units.hpp"
#include "probes/records/envelope.hpp"

namespace headroom::cli {

namespace {
constexpr int rule_width = 105;  // the reference case's table
constexpr int cost_width = 9;

std::string pad(std::string s, std::size_t w) {
  if (s.size() < w) s.append(w - s.size(), ' ');
  return s;
}
// Returns bytes as the reference case's 8-wide GiB number column.
std::string num8(std::int64_t bytes) {
  return gib_cell(bytes, 8);
}
// The reference case's columns: strategy 32, axes 23 (wider with vpp and micro-batch), then numbers
// right-aligned in 8, 9, 9, 9.
std::string axes_cell(const std::string& a, std::size_t width) {
  return a.size() < width ? pad(a, width) : a + " ";
}
// Returns the axes of a candidate: the layout's, plus " mb=B" when the search chose the micro-batch.
std::string candidate_axes(const candidate& c, bool micro_batch_searched) {
  std::string a = axes_string(c.where);
  if (micro_batch_searched) a += " mb=" + std::to_string(c.micro_batch);
  return a;
}
// Returns a search table's axes column width: the reference case's 23, wider when a row's axes (with vpp and
// the searched micro-batch) need it.
std::size_t axes_width_of(const suggestion& s) {
  std::size_t w = 23;
  for (const auto& c : s.fitting) w = std::max(w, candidate_axes(c, s.micro_batch_searched).size() + 1);
  return w;
}
std::string pct(double fraction) {
  std::string s =
      fixed(100.0 * fraction, 1);  // built in place: "+" + s trips GCC 12's -Wrestrict (bug 105651)
  s.insert(s.begin(), '+');
  s.push_back('%');
  return s;
}
// Returns "micro-batch 1" when fixed, "micro-batch searched (1, 2, 4; global batch 1536)" when searched.
std::string micro_batch_phrase(const problem& p, const suggestion& s) {
  if (!s.micro_batch_searched) return "micro-batch " + std::to_string(p.training.micro_batch);
  std::string v;
  for (const auto& a : s.space)
    if (std::string(a.name) == "micro_batch")
      for (auto b : a.values) v += (v.empty() ? "" : ", ") + std::to_string(b);
  return "micro-batch searched (" + v + "; global batch " + std::to_string(p.training.global_batch) + ")";
}

nlohmann::json space_json(const std::vector<search_axis>& space) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& a : space) j.push_back({{"axis", a.name}, {"values", a.values}, {"fixed", a.fixed}});
  return j;
}
}  // namespace

std::string strategy_name(const layout& l) {
  const char* r = l.recompute == recompute_mode::none        ? "no recompute"
                  : l.recompute == recompute_mode::selective ? "selective recompute"
                                                             : "full recompute";
  return zero_name(l) + " + " + r;
}

void write_table_header(std::ostream& o, const problem& p, bool with_cost, std::size_t axes_width) {
  o << pad("strategy", 32) << pad("axes", axes_width) << "   state    activ  reserve    total  fits "
    << trim(to_gib(p.device.capacity), 1) << " GiB?";
  if (with_cost) o << "     cost";
  o << "\n";
}

void write_table_rule(std::ostream& o, bool with_cost, std::size_t axes_width) {
  o << std::string(rule_width + (with_cost ? cost_width : 0) + (axes_width - 23), '-') << "\n";
}

bool write_table_row(std::ostream& o, const layout& l, const stage_breakdown& w, const layout_cost* cost,
                     const std::string& axes, std::size_t axes_width) {
  std::string fits = !w.fits ? "no" : w.tight() ? "tight" : "yes";
  const std::string strategy = strategy_name(l);  // a long one (offloads) keeps a space before the axes
  o << pad(strategy, std::max<std::size_t>(32, strategy.size() + 1)) << axes_cell(axes.empty() ? axes_string(l) : axes, axes_width)
    << num8(w.state) << " " << num8(w.activations) << " " << num8(w.reserve) << " "
    << num8(w.decisive_total()) << (w.peak_decides() ? "* " : "  ");
  if (cost) {
    o << pad(fits, 15) << pct(cost->total);
  } else {
    o << fits;
  }
  o << "\n";
  return w.peak_decides();
}

void write_peak_note(std::ostream& o, bool any) {
  if (any)
    o << "* total = step peak + fixed overheads (context, cuBLAS, NCCL): larger than state + activations + "
         "reserve, it decides\n";
}

void write_recipes(std::ostream& o, bool json) {
  if (json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& name : builtin_recipes()) {
      const recipe r = load_recipe(name);
      nlohmann::json j = recipe_to_json(r);
      j["bytes_per_param"] = r.bytes_per_param();
      j["zero_stages"] = {r.lowest_zero(), r.highest_zero()};
      list.push_back(j);
    }
    o << nlohmann::json{{"tool", "headroom"}, {"tool_version", records::tool_version()}, {"recipes", list}}.dump(2) << "\n";
    return;
  }
  o << "precision recipes (--recipe NAME, or a JSON file in the same form; docs/model.md section 2)\n";
  for (const auto& name : builtin_recipes()) {
    const recipe r = load_recipe(name);
    o << "\n"
      << printable(name) << ": " << r.bytes_per_param() << " bytes per parameter, activations "
      << r.activation_bytes << " bytes per element\n";
    for (const auto& b : r.buffers) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "  %-42s %2lld B  %s\n", printable(b.name, 42).c_str(),
                    static_cast<long long>(b.bytes), describe_sharding(b).c_str());
      o << buf;
    }
    o << "  per GPU (the ZeRO stages its framework runs it with):";
    for (int z = r.lowest_zero(); z <= r.highest_zero(); ++z) {
      std::int64_t whole = 0, split = 0;
      for (const auto& b : r.buffers) (z >= b.shard_from ? split : whole) += b.bytes;
      o << (z > r.lowest_zero() ? ";" : "") << " ZeRO-" << z << " ";
      if (split == 0)
        o << whole;
      else if (whole == 0)
        o << split << "/d";
      else
        o << whole << " + " << split << "/d";
    }
    o << "\n";
  }
}

void write_presets(std::ostream& o, bool json) {
  nlohmann::json list = nlohmann::json::array();
  char line[256];
  if (!json) {
    std::snprintf(line, sizeof line, "%-18s %10s %7s %7s %6s %7s  %-6s %s\n", "preset", "parameters", "layers",
                  "hidden", "heads", "seq", "kind", "source");
    o << line;
  }
  for (const auto& name : list_presets(preset_dir())) {
    const model_spec m = load_preset(name, preset_dir());
    const std::int64_t params = count_params(m).total;
    if (json) {
      list.push_back({{"name", m.name},
                      {"params", params},
                      {"layers", m.layers},
                      {"hidden", m.hidden},
                      {"heads", m.heads},
                      {"seq", m.seq},
                      {"kind", "dense"},
                      {"source", m.source}});
      continue;
    }
    std::snprintf(line, sizeof line, "%-18s %9sB %7lld %7lld %6lld %7lld  %-6s %s\n", printable(name, 18).c_str(),
                  fixed(static_cast<double>(params) / 1e9, 2).c_str(), static_cast<long long>(m.layers),
                  static_cast<long long>(m.hidden), static_cast<long long>(m.heads), static_cast<long long>(m.seq),
                  "dense", printable(m.source, 120).c_str());
    o << line;
  }
  if (json) o << nlohmann::json{{"tool", "headroom"}, {"tool_version", records::tool_version()}, {"presets", list}}.dump(2) << "\n";
}

nlohmann::json inputs_json(const problem& p, records::kind k) {
  nlohmann::json j = records::envelope(k);
  j["predicted"] = true;
  j.update(problem_to_json(p));
  return j;
}

namespace {

nlohmann::json layout_json(const layout& l) {
  return layout_to_json(l);
}

nlohmann::json stage_json(const problem& p, const stage_breakdown& s) {
  nlohmann::json bufs = nlohmann::json::array();
  for (std::size_t i = 0; i < p.precision.buffers.size(); ++i)
    bufs.push_back({{"name", p.precision.buffers[i].name}, {"bytes", s.buffer_bytes[i]}});
  return {{"stage", s.stage},
          {"layers", s.layers},
          {"params_on_rank", s.params_on_rank},
          {"moe_layers", s.moe_layers},
          {"expert_params_on_rank", s.expert_params_on_rank},
          {"buffers", bufs},
          {"params_bytes", s.params},
          {"grads_bytes", s.grads},
          {"master_bytes", s.master},
          {"optimizer_bytes", s.optimizer},
          {"host_offload_bytes", s.host_offload},
          {"persistent_bytes", s.persistent},
          {"transient_bytes", s.transient},
          {"state_bytes", s.state},
          {"layer_activations", s.layer_activations},
          {"activation_bytes", s.activations},
          {"logits_bytes_not_added", s.logits},
          {"working_set_bytes", s.working_set},
          {"output_phase_bytes", s.output_phase},
          {"step_peak_bytes", s.step_peak},
          {"fixed_overheads_bytes", s.fixed_overheads},
          {"peak_total_bytes", s.peak_total},
          {"decided_by", s.peak_decides() ? "step_peak" : "total"},
          {"reserve_bytes", s.reserve},
          {"total_bytes", s.total},
          {"capacity_bytes", s.capacity},
          {"headroom_bytes", s.headroom},
          {"fits", s.fits}};
}

nlohmann::json cost_json(const layout_cost& c) {
  return {{"recompute", c.recompute}, {"bubble", c.bubble},         {"tp_comm", c.tp_comm},
          {"pp_comm", c.pp_comm},     {"dp_exposed", c.dp_exposed}, {"dp_bytes_per_gpu", c.dp_bytes},
          {"total", c.total}};
}

nlohmann::json candidate_json(const problem& p, const candidate& c) {
  return {{"layout", layout_json(c.where)},
          {"micro_batch", c.micro_batch},
          {"worst_stage", stage_json(p, c.worst)},
          {"cost", cost_json(c.cost)},
          {"tight", c.tight}};
}

const char* stage_csv_header =
    "stage,layers,params_on_rank,params_bytes,grads_bytes,master_bytes,optimizer_bytes,host_offload_bytes,"
    "transient_bytes,state_bytes,layer_activations,activation_bytes,logits_bytes_not_added,reserve_bytes,"
    "total_bytes,capacity_bytes,headroom_bytes,fits,working_set_bytes,output_phase_bytes,step_peak_bytes,"
    "fixed_overheads_bytes,peak_total_bytes,decided_by";

void stage_csv(std::ostream& o, const stage_breakdown& s) {
  o << s.stage << ',' << s.layers << ',' << s.params_on_rank << ',' << s.params << ',' << s.grads << ','
    << s.master << ',' << s.optimizer << ',' << s.host_offload << ',' << s.transient << ',' << s.state << ','
    << s.layer_activations << ',' << s.activations << ',' << s.logits << ',' << s.reserve << ',' << s.total
    << ',' << s.capacity << ',' << s.headroom << ',' << (s.fits ? "true" : "false") << ',' << s.working_set
    << ',' << s.output_phase << ',' << s.step_peak << ',' << s.fixed_overheads << ',' << s.peak_total << ','
    << (s.peak_decides() ? "step_peak" : "total");
}

}  // namespace

void write_plan_text(std::ostream& o, const problem& p, const breakdown& b) {
  const auto& l = b.where;
  const auto& w = b.worst_stage();
  o << "headroom plan: " << printable(p.model.name) << ", " << l.gpus << " GPU" << (l.gpus > 1 ? "s" : "")
    << ", " << strategy_name(l) << ", " << axes_string(l) << ", seq " << p.training.seq << ", micro-batch "
    << p.training.micro_batch << ", " << printable(p.precision.name) << ", "
    << to_string(p.training.attention) << " attention\n";
  o << "predicted by the analytic model (not measured); GiB per GPU\n\n";
  write_table_header(o, p, false);
  write_table_rule(o, false);
  const bool peak = write_table_row(o, l, w, nullptr);
  write_table_rule(o, false);
  write_peak_note(o, peak);
  o << "\nworst rank: stage " << w.stage << " of " << l.pp << "\n";
  auto line = [&](const std::string& what, std::int64_t bytes, const std::string& note = "") {
    o << "  " << pad(what, 34) << gib_cell(bytes, 10) << " GiB" << (note.empty() ? "" : "   " + note) << "\n";
  };
  for (std::size_t i = 0; i < p.precision.buffers.size(); ++i) {
    const auto& buf = p.precision.buffers[i];
    line(printable(buf.name, 60), w.buffer_bytes[i],
         offloaded(buf, l)          ? "in host memory (offloaded)"
         : l.zero >= buf.shard_from
             ? "sharded over " + std::to_string(l.shard_degree()) +
                   (w.expert_params_on_rank ? ", the experts' over " + std::to_string(l.expert_shard_degree()) : "")
             : "");
  }
  if (w.host_offload) line("host memory (offloaded, not counted)", w.host_offload);
  if (w.transient)
    line("ZeRO-3 gather transient", w.transient,
         l.reshard_after_forward
             ? std::to_string(zero3_units(b.basis.params, l, w.layers / l.vpp)) + " layers in flight"
             : "every layer kept gathered from forward to backward");
  line("state", w.state);
  line("activations", w.activations,
       std::to_string(w.layer_activations) + " layer activations, recompute " + to_string(l.recompute));
  line("state + activations", w.state + w.activations);
  if (p.device.reserve.fixed_only()) {
    line("reserve", w.reserve, p.device.reserve.source);
  } else {
    const auto& r = p.device.reserve;
    line("reserve", w.reserve,
         "fixed " + gib_str(r.fixed, 2) + " + " + fixed(r.fragmentation, 4) + " x churn " +
             gib_str(w.terms().churn(), 2) + " + " + fixed(r.per_token, 1) + " B x " +
             std::to_string(reserve_tokens(p, l)) + " tokens");
    o << "  " << pad("", 34) << "           " << r.source << "\n";
  }
  line("total", w.total, "state + activations + reserve (the reference total)");
  o << "  the step peak, with what lies outside the allocator:\n";
  line("  backward working set, one layer", w.working_set);
  if (w.output_phase)
    line("  output phase, " + std::string(to_string(p.training.loss)) + " loss", w.output_phase);
  line("  step peak", w.step_peak, "persistent + transient + activations + max of the two");
  line("  fixed overheads", w.fixed_overheads, "context, cuBLAS, NCCL (--fixed-overheads)");
  line("  step peak + fixed overheads", w.peak_total);
  line("capacity", w.capacity);
  o << "  " << pad("headroom", 34) << gib_cell(w.headroom, 10) << " GiB ("
    << fixed_width(100.0 * static_cast<double>(w.headroom) / static_cast<double>(w.capacity), 0, 1) << "%)"
    << (w.peak_decides() ? "   from the step peak + fixed overheads, which decides" : "") << "\n";
  o << "\n"
    << (w.fits ? (w.tight() ? "fits, but headroom under 5% is too tight to trust" : "fits") : "does not fit")
    << "\n";
  if (l.pp > 1) {
    o << "\nstage  layers  alive   params    grads   master    optim transient    activ    total  headroom\n";
    for (const auto& s : b.stages) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%5d %7lld %6lld", s.stage, static_cast<long long>(s.layers),
                    static_cast<long long>(s.layer_activations));
      o << buf;
      for (auto v : {s.params, s.grads, s.master, s.optimizer}) o << " " << num8(v);
      o << "  " << num8(s.transient) << " " << num8(s.activations) << " " << num8(s.decisive_total())
        << (s.peak_decides() ? "* " : "  ") << num8(s.headroom) << (s.stage == b.worst ? "  <- worst" : "")
        << "\n";
    }
  }
}

nlohmann::json plan_json(const problem& p, const breakdown& b) {
  nlohmann::json j = inputs_json(p, records::kind::plan);
  j["layout"] = layout_json(b.where);
  j["params"] = {{"total", b.basis.params.total},
                 {"stated", b.basis.params.stated},
                 {"per_layer", b.basis.params.per_layer},
                 {"embedding", b.basis.params.embedding},
                 {"output", b.basis.params.output}};
  nlohmann::json ledger = nlohmann::json::array();
  for (const auto& e : b.basis.ledger)
    ledger.push_back({{"name", e.name},
                      {"formula", e.formula},
                      {"shape", e.shape},
                      {"dtype_bytes", e.dtype_bytes},
                      {"bytes", e.bytes},
                      {"role", e.role == act_role::layer_input      ? "layer_input"
                               : e.role == act_role::attention_core ? "attention_core"
                                                                    : "saved"}});
  j["ledger"] = ledger;
  j["layer_activation_bytes"] = {{"none", b.basis.per_layer.none},
                                 {"selective", b.basis.per_layer.selective},
                                 {"full", b.basis.per_layer.full}};
  j["microbatches_per_step"] = b.basis.microbatches;
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : b.stages) stages.push_back(stage_json(p, s));
  j["stages"] = stages;
  j["worst_stage"] = b.worst;
  j["fits"] = b.fits();
  return j;
}

void write_plan_csv(std::ostream& o, const problem&, const breakdown& b) {
  o << stage_csv_header << ",worst\n";
  for (const auto& s : b.stages) {
    stage_csv(o, s);
    o << ',' << (s.stage == b.worst ? "true" : "false") << "\n";
  }
}

void write_suggest_text(std::ostream& o, const problem& p, const suggestion& s, std::size_t top) {
  o << "headroom plan --suggest: " << printable(p.model.name) << " on " << s.gpus << " GPUs, seq "
    << p.training.seq << ", " << micro_batch_phrase(p, s) << ", " << printable(p.precision.name) << "; "
    << s.evaluated << " layouts evaluated, " << s.fitting.size() << " fit\n";
  o << "predicted by the analytic model (not measured); GiB per GPU, worst rank; cost = extra step time "
       "(recompute, bubble, exposed communication)\n\n";
  const std::size_t aw = axes_width_of(s);
  write_table_header(o, p, true, aw);
  write_table_rule(o, true, aw);
  std::size_t n = top == 0 ? s.fitting.size() : std::min(top, s.fitting.size());
  bool peak = false;
  auto row = [&](const candidate& c) {
    peak =
        write_table_row(o, c.where, c.worst, &c.cost, candidate_axes(c, s.micro_batch_searched), aw) || peak;
  };
  for (std::size_t i = 0; i < n; ++i) row(s.fitting[i]);
  // Below the cut, the best layout of every strategy not shown yet, so the alternatives stay in view.
  std::vector<std::string> shown;
  for (std::size_t i = 0; i < n; ++i) shown.push_back(strategy_name(s.fitting[i].where));
  bool heading = false;
  for (std::size_t i = n; i < s.fitting.size(); ++i) {
    const std::string name = strategy_name(s.fitting[i].where);
    if (std::find(shown.begin(), shown.end(), name) != shown.end()) continue;
    shown.push_back(name);
    if (!heading) o << "best layout of each strategy not shown above:\n";
    heading = true;
    row(s.fitting[i]);
  }
  write_table_rule(o, true, aw);
  write_peak_note(o, peak);
  if (s.fitting.empty()) {
    o << "nothing fits: add GPUs, shorten the sequence, or cut the micro-batch\n";
    o << explain_nothing_fits(p, s);
    return;
  }
  if (n < s.fitting.size())
    o << s.fitting.size() << " layouts fit; the first " << n << " by cost are listed (--top 0 lists all)\n";
  const auto& best = s.fitting.front();
  o << "first: " << strategy_name(best.where) << " (" << candidate_axes(best, s.micro_batch_searched)
    << "): recompute " << pct(best.cost.recompute) << ", bubble " << pct(best.cost.bubble) << ", tp traffic "
    << pct(best.cost.tp_comm) << ", pp traffic " << pct(best.cost.pp_comm) << ", exposed dp traffic "
    << pct(best.cost.dp_exposed) << "; headroom " << gib_str(best.worst.headroom) << " GiB ("
    << fixed(100.0 * static_cast<double>(best.worst.headroom) / static_cast<double>(best.worst.capacity), 1)
    << "%)\n";
  o << "tight = fits with under 5% headroom, too tight to trust; ranked after the rest\n";
}

nlohmann::json suggest_json(const problem& p, const suggestion& s) {
  nlohmann::json j = inputs_json(p, records::kind::suggest);
  j["gpus"] = s.gpus;
  j["evaluated"] = s.evaluated;
  j["search_space"] = space_json(s.space);
  j["bound"] = {{"shardable_bytes_per_param", s.bound.shardable_per_param},
                {"state_total_bytes", s.bound.state_total},
                {"state_per_gpu_bytes", s.bound.per_gpu},
                {"usable_bytes", s.bound.usable},
                {"proves_nothing_fits", s.bound.impossible}};
  nlohmann::json f = nlohmann::json::array();
  for (const auto& c : s.fitting) f.push_back(candidate_json(p, c));
  j["fitting"] = f;
  j["fits"] = !s.fitting.empty();
  return j;
}

void write_suggest_csv(std::ostream& o, const problem&, const suggestion& s) {
  o << "rank,gpus,tp,pp,cp,dp,vpp,micro_batch,zero,recompute,sequence_parallel," << stage_csv_header
    << ",cost_total,cost_recompute,cost_bubble,cost_tp_comm,cost_pp_comm,cost_dp_exposed,dp_bytes_per_gpu,"
       "tight\n";
  int rank = 1;
  for (const auto& c : s.fitting) {
    const auto& l = c.where;
    o << rank++ << ',' << l.gpus << ',' << l.tp << ',' << l.pp << ',' << l.cp << ',' << l.dp() << ',' << l.vpp
      << ',' << c.micro_batch << ',' << l.zero << ',' << to_string(l.recompute) << ','
      << (l.sp() ? "true" : "false") << ',';
    stage_csv(o, c.worst);
    o << ',' << c.cost.total << ',' << c.cost.recompute << ',' << c.cost.bubble << ',' << c.cost.tp_comm
      << ',' << c.cost.pp_comm << ',' << c.cost.dp_exposed << ',' << static_cast<long long>(c.cost.dp_bytes)
      << ',' << (c.tight ? "true" : "false") << "\n";
  }
}

void write_min_gpus_text(std::ostream& o, const problem& p, const min_gpus_result& r, std::size_t top) {
  o << "headroom plan --min-gpus: " << printable(p.model.name) << ", seq " << p.training.seq << ", "
    << (r.at_min ? micro_batch_phrase(p, *r.at_min) : "micro-batch " + std::to_string(p.training.micro_batch))
    << ", " << printable(p.precision.name) << " (predicted by the analytic model)\n\n";
  o << explain_min_gpus(p, r);
  if (!r.n_min) {
    o << "\nno GPU count up to the search limit has a fitting layout (" << r.evaluated
      << " layouts evaluated)\n";
    return;
  }
  auto show = [&](const char* what, int n, const suggestion& s) {
    o << "\n"
      << what << ": N = " << n << " (" << s.fitting.size() << " of " << s.evaluated << " layouts fit)\n";
    const std::size_t aw = axes_width_of(s);
    write_table_header(o, p, true, aw);
    write_table_rule(o, true, aw);
    std::size_t k = top == 0 ? s.fitting.size() : std::min(top, s.fitting.size());
    bool peak = false;
    for (std::size_t i = 0; i < k; ++i) {
      const auto& c = s.fitting[i];
      peak = write_table_row(o, c.where, c.worst, &c.cost, candidate_axes(c, s.micro_batch_searched), aw) ||
             peak;
    }
    write_table_rule(o, true, aw);
    write_peak_note(o, peak);
  };
  show("smallest GPU count with a fitting layout", *r.n_min, *r.at_min);
  if (r.n_pow2) show("smallest power of two with a fitting layout", *r.n_pow2, *r.at_pow2);
  o << "\n" << r.evaluated << " layouts evaluated in all\n";
}

nlohmann::json min_gpus_json(const problem& p, const min_gpus_result& r) {
  nlohmann::json j = inputs_json(p, records::kind::min_gpus);
  j["seed_bound"] = r.seed_bound;
  j["strict_bound"] = r.strict_bound;
  j["full_recompute_activation_bytes"] = r.full_recompute_activations;
  j["first_candidate"] = r.first_candidate;
  if (r.at_min) j["search_space"] = space_json(r.at_min->space);
  j["min_gpus"] = r.n_min ? nlohmann::json(*r.n_min) : nlohmann::json(nullptr);
  j["min_gpus_power_of_two"] = r.n_pow2 ? nlohmann::json(*r.n_pow2) : nlohmann::json(nullptr);
  if (r.at_min && !r.at_min->fitting.empty()) j["best_at_min"] = candidate_json(p, r.at_min->fitting.front());
  if (r.at_pow2 && !r.at_pow2->fitting.empty())
    j["best_at_power_of_two"] = candidate_json(p, r.at_pow2->fitting.front());
  j["evaluated"] = r.evaluated;
  return j;
}

}  // namespace headroom::cli
