// tables.cpp: table, JSON and CSV writers for plans, suggestions and minimum-GPU searches.
#include "tables.hpp"

#include "planner/gpu_types.hpp"

#include <algorithm>
#include <cstdio>

#include "planner/explain.hpp"
#include "planner/format.hpp"
#include "planner/gpu_types.hpp"
#include "planner/model_files.hpp"
#include "planner/problem_json.hpp"
#include "planner/recipe.hpp"
#include "planner/units.hpp"
#include "probes/records/envelope.hpp"

namespace headroom::cli {

namespace {
constexpr std::size_t rule_width = 105;  // the reference case's table: 32 + 23 + the figures' 50
constexpr std::size_t cost_width = 9;
constexpr std::size_t figures_width = rule_width - 32 - 23;
constexpr std::size_t line_limit = 120;  // README: tables fit in 120 columns

}  // namespace

std::string strategy_name(const layout& l) {
  if (const int n = full_every(l.recompute))
    return zero_name(l) + " + full recompute every " + std::to_string(n);  // torchtitan's layer policy
  const char* r = l.recompute == recompute_mode::none           ? "no recompute"
                  : l.recompute == recompute_mode::selective    ? "selective recompute"
                  : l.recompute == recompute_mode::selective_op ? "per-op recompute"
                                                                : "full recompute";
  return zero_name(l) + " + " + r;
}

std::string short_strategy_name(const layout& l) {
  if (const int n = full_every(l.recompute)) return zero_name(l) + " + full every " + std::to_string(n);
  return zero_name(l) + " + " + to_string(l.recompute);
}

table_columns columns_for(const std::vector<layout>& rows, const std::vector<std::string>& axes, bool with_cost) {
  std::size_t longest_strategy = 0, longest_short = 0, longest_axes = 0;
  for (const auto& l : rows) {
    longest_strategy = std::max(longest_strategy, strategy_name(l).size());
    longest_short = std::max(longest_short, short_strategy_name(l).size());
  }
  for (const auto& a : axes) longest_axes = std::max(longest_axes, a.size());
  // What both text columns may take; the header's "fits 79.6 GiB?" is a character wider than the reference
  // case's "fits 192 GiB?".
  const std::size_t room = line_limit - figures_width - 1 - (with_cost ? cost_width : 0);
  table_columns c;
  c.axes = std::max<std::size_t>(23, longest_axes + 1);
  c.strategy = std::max<std::size_t>(32, longest_strategy + 2);
  if (c.strategy + c.axes > room)  // narrow the strategy column to its longest name, not below
    c.strategy = std::max(longest_strategy + 2, room > c.axes ? room - c.axes : 0);
  if (c.strategy + c.axes > room) {
    c.short_strategy = true;
    c.strategy = std::max(longest_short + 2, room > c.axes ? room - c.axes : 0);
  }
  c.strategy = std::max<std::size_t>(c.strategy, 10);
  if (c.strategy + c.axes > room) c.axes = std::max<std::size_t>(23, room > c.strategy ? room - c.strategy : 0);
  return c;
}

void write_table_header(std::ostream& o, const problem& p, bool with_cost, table_columns cols) {
  o << pad("strategy", cols.strategy) << pad("axes", cols.axes) << "   state    activ  reserve    total  fits "
    << trim(to_gib(p.device.capacity), 1) << " GiB?";
  if (with_cost) o << "     cost";
  o << "\n";
}

void write_table_rule(std::ostream& o, bool with_cost, table_columns cols) {
  o << std::string(figures_width + cols.strategy + cols.axes + (with_cost ? cost_width : 0), '-') << "\n";
}

bool write_table_row(std::ostream& o, const layout& l, const stage_breakdown& w, const layout_cost* cost,
                     const std::string& axes, table_columns cols) {
  std::string fits = !w.fits ? "no" : w.tight() ? "tight" : "yes";
  // columns_for sized both text columns for the rows, within 120 columns; a row whose text still does not fit
  // (axes over 40 characters) gives its names a line of their own and its figures the columns below.
  const std::string strategy = cols.short_strategy ? short_strategy_name(l) : strategy_name(l);
  const std::string a = axes.empty() ? axes_string(l) : axes;
  if (strategy.size() >= cols.strategy || a.size() >= cols.axes)
    o << strategy << "  " << a << "\n" << std::string(cols.strategy + cols.axes, ' ');
  else
    o << pad(strategy, cols.strategy) << pad(a, cols.axes);
  o << num8(w.state) << " " << num8(w.activations) << " " << num8(w.reserve) << " "
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
    if (r.gather_bytes > 0) {
      o << "  gathered copy under ZeRO-3: " << r.gathered_bytes_per_param() << " B";
      if (r.gather_bytes_other > 0) o << " (linear weights), " << r.gather_bytes_other << " B (the rest)";
      o << "\n";
    }
    if (!r.source.empty()) o << "  source: " << printable(r.source, 200) << "\n";
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
                      {"kind", m.moe.enabled() ? "moe" : "dense"},
                      {"source", m.source}});
      continue;
    }
    std::snprintf(line, sizeof line, "%-18s %9sB %7lld %7lld %6lld %7lld  %-6s %s\n", printable(name, 18).c_str(),
                  fixed(static_cast<double>(params) / 1e9, 2).c_str(), static_cast<long long>(m.layers),
                  static_cast<long long>(m.hidden), static_cast<long long>(m.heads), static_cast<long long>(m.seq),
                  m.moe.enabled() ? "MoE" : "dense", printable(m.source, 120).c_str());
    o << line;
  }
  if (json) o << nlohmann::json{{"tool", "headroom"}, {"tool_version", records::tool_version()}, {"presets", list}}.dump(2) << "\n";
}

void write_gpus(std::ostream& o, bool json) {
  nlohmann::json list = nlohmann::json::array();
  char line[320];
  if (!json) {
    std::snprintf(line, sizeof line, "%-14s %9s %-7s %-4s %7s %6s  %s\n", "gpu-type", "capacity", "arch", "fp8",
                  "tflops", "node", "capacity source");
    o << line;
  }
  for (const auto& g : gpu_types()) {
    if (json) {
      list.push_back({{"name", g.name},
                      {"capacity_bytes", g.capacity},
                      {"arch", g.arch},
                      {"fp8", g.fp8},
                      {"bf16_tflops", g.tflops},
                      {"gpus_per_node", g.gpus_per_node},
                      {"source", g.source}});
      continue;
    }
    std::snprintf(line, sizeof line, "%-14s %5s GiB %-7s %-4s %7.0f %6d  %s\n", g.name,
                  fixed(to_gib(g.capacity), 1).c_str(), g.arch, g.fp8 ? "yes" : "no", g.tflops, g.gpus_per_node,
                  g.source);
    o << line;
  }
  if (json) o << nlohmann::json{{"tool", "headroom"}, {"tool_version", records::tool_version()}, {"gpus", list}}.dump(2) << "\n";
}

std::string pad(std::string s, std::size_t w) {
  if (s.size() < w) s.append(w - s.size(), ' ');
  return s;
}

std::string num8(std::int64_t bytes) {
  return gib_cell(bytes, 8);
}

std::string pct(double fraction) {
  std::string s =
      fixed(100.0 * fraction, 1);  // built in place: "+" + s trips GCC 12's -Wrestrict (bug 105651)
  s.insert(s.begin(), '+');
  s.push_back('%');
  return s;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

const char* const layout_csv_header =
    "gpus,tp,pp,cp,dp,vpp,ep,etp,zero,recompute,sequence_parallel,offload_optimizer,micro_batch,global_batch,seq";

void layout_csv(std::ostream& o, const problem& p, const layout& l, std::int64_t micro_batch) {
  o << l.gpus << ',' << l.tp << ',' << l.pp << ',' << l.cp << ',' << l.dp() << ',' << l.vpp << ',' << l.ep << ','
    << l.expert_tp() << ',' << l.zero << ',' << to_string(l.recompute) << ',' << (l.sp() ? "true" : "false") << ','
    << (l.offload_optimizer ? "true" : "false") << ',' << micro_batch << ',' << p.training.global_batch << ','
    << p.training.seq;
}

std::string with_assumptions(const std::string& text, const std::string& assumptions) {
  const std::size_t eol = text.find('\n');
  if (eol == std::string::npos) return text + "\n" + assumptions;
  return text.substr(0, eol + 1) + assumptions + text.substr(eol + 1);
}

std::string advice_text(const advice& a) {
  std::string s = "bound by " + a.bound_by + ": " + a.why + "\n" +
                  (a.bound_by == "state" ? "what moves state:\n" : "what would help:\n");
  for (const auto& l : a.levers) s += "  - " + l + "\n";
  return s;
}

nlohmann::json advice_json(const advice& a) {
  return {{"bound_by", a.bound_by}, {"why", a.why}, {"levers", a.levers}};
}

nlohmann::json inputs_json(const problem& p, records::kind k) {
  nlohmann::json j = records::envelope(k);
  j["predicted"] = true;
  j.update(problem_to_json(p));
  return j;
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
          {"fits", s.fits},
          {"tight", s.tight()}};
}

const char* const stage_csv_header =
    "stage,layers,params_on_rank,params_bytes,grads_bytes,master_bytes,optimizer_bytes,host_offload_bytes,"
    "transient_bytes,state_bytes,layer_activations,activation_bytes,logits_bytes_not_added,reserve_bytes,"
    "total_bytes,capacity_bytes,headroom_bytes,fits,working_set_bytes,output_phase_bytes,step_peak_bytes,"
    "fixed_overheads_bytes,peak_total_bytes,decided_by,tight";

void stage_csv(std::ostream& o, const stage_breakdown& s) {
  o << s.stage << ',' << s.layers << ',' << s.params_on_rank << ',' << s.params << ',' << s.grads << ','
    << s.master << ',' << s.optimizer << ',' << s.host_offload << ',' << s.transient << ',' << s.state << ','
    << s.layer_activations << ',' << s.activations << ',' << s.logits << ',' << s.reserve << ',' << s.total
    << ',' << s.capacity << ',' << s.headroom << ',' << (s.fits ? "true" : "false") << ',' << s.working_set
    << ',' << s.output_phase << ',' << s.step_peak << ',' << s.fixed_overheads << ',' << s.peak_total << ','
    << (s.peak_decides() ? "step_peak" : "total") << ',' << (s.tight() ? "true" : "false");
}

}  // namespace headroom::cli
