// plan_tables.cpp: what `headroom plan` writes: a plan (text, JSON, CSV), a --suggest ranking and a --min-gpus
// search (tables.hpp declares them; the shared cells and the table's columns are in tables.cpp).
#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "planner/explain.hpp"
#include "planner/format.hpp"
#include "planner/problem_json.hpp"
#include "planner/schedule.hpp"
#include "planner/units.hpp"
#include "tables.hpp"

namespace headroom::cli {

namespace {

// Returns the axes of a candidate (or a ranked_fit): the layout's, plus " mb=B" when the search chose the
// micro-batch.
template <class Row>
std::string candidate_axes(const Row& c, bool micro_batch_searched, const suggestion* across = nullptr) {
  std::string a = axes_string(c.where);
  if (micro_batch_searched) a += " mb=" + std::to_string(c.micro_batch);
  if (across && !across->recipes.empty())
    a += " " + printable(across->recipes[static_cast<std::size_t>(c.recipe)].name, 40);
  return a;
}
// Returns " (192 GiB each, assumed: no --gpu-type)" when the capacity is the default nobody chose, else "": the
// titles say it where a reader looks first, since the same plan that fits 192 GiB may not fit 80.
std::string assumed_capacity(const problem& p) {
  return p.device.capacity_assumed ? " (" + gib_str(p.device.capacity, 0) + " GiB each, assumed: no --gpu-type)"
                                   : "";
}

// Returns the rows of `ranked` (s's fitting layouts, ranked) a ranking lists, in its order, and counts in
// `hidden` those it leaves out: a layout whose same axes, recompute and recipe under a higher ZeRO stage cost
// no more, move no more data-parallel bytes and leave at least its headroom (DDP, ZeRO-1 and ZeRO-2 of one
// layout cost the same, so only the one with the most headroom is listed; ZeRO-3, which moves more, stays
// beside it). A row the user could not tell apart from one above by anything but less headroom is not a
// choice.
std::vector<std::size_t> undominated_rows(const suggestion&, const std::vector<ranked_fit>& ranked,
                                          std::size_t& hidden) {
  // The layout but its ZeRO stage, by what each axis means (etp unset and etp = tp are one layout, as their
  // text is): the rows grouped by it, in one sort of their keys rather than a table of strings (a search
  // lists tens of thousands).
  auto key = [&](std::size_t i) {
    const ranked_fit& c = ranked[i];
    const layout& l = c.where;
    return std::make_tuple(l.tp, l.pp, l.dp(), l.cp, l.vpp, l.sp(), l.ep, l.expert_tp(), l.dp_replicate,
                           c.micro_batch, c.recipe, l.recompute, l.offload_optimizer, l.offload_params);
  };
  using key_type = decltype(key(0));
  std::vector<std::pair<key_type, std::size_t>> keyed(ranked.size());
  for (std::size_t i = 0; i < ranked.size(); ++i) keyed[i] = {key(i), i};
  std::sort(keyed.begin(), keyed.end());
  std::vector<bool> keep(ranked.size(), true);
  for (std::size_t first = 0, end = 0; first < keyed.size(); first = end) {
    for (end = first + 1; end < keyed.size() && keyed[end].first == keyed[first].first;) ++end;
    for (std::size_t x = first; x < end; ++x)
      for (std::size_t y = first; y < end; ++y) {
        const ranked_fit &a = ranked[keyed[x].second], &b = ranked[keyed[y].second];
        if (b.where.zero > a.where.zero && b.cost.total <= a.cost.total + 1e-12 &&
            b.cost.dp_bytes <= a.cost.dp_bytes && b.headroom >= a.headroom && (!b.tight || a.tight))
          keep[keyed[x].second] = false;
      }
  }
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < ranked.size(); ++i)
    if (keep[i]) rows.push_back(i);
  hidden = ranked.size() - rows.size();
  return rows;
}

suggest_rows rows_of(const suggestion& s, const std::vector<ranked_fit>& all, std::size_t top) {
  suggest_rows t;
  t.ranked = undominated_rows(s, all, t.hidden);
  t.n = top == 0 ? t.ranked.size() : std::min(top, t.ranked.size());
  std::vector<std::string> shown;
  // strategy_name reads the ZeRO stage, whether data parallelism shards at all, the offloads and the
  // recompute mode: a row with those of a row before it has a name already shown, found without writing it.
  std::vector<std::tuple<int, bool, bool, bool, recompute_mode>> named;
  for (std::size_t r = 0; r < t.ranked.size(); ++r) {
    const layout& l = all[t.ranked[r]].where;
    const auto inputs =
        std::make_tuple(l.zero, l.shard_degree() > 1, l.offload_optimizer, l.offload_params, l.recompute);
    const bool seen = std::find(named.begin(), named.end(), inputs) != named.end();
    if (r >= t.n && seen) continue;
    if (!seen) named.push_back(inputs);
    const std::string name = strategy_name(l);
    const bool new_strategy = !seen && std::find(shown.begin(), shown.end(), name) == shown.end();
    if (r >= t.n && !new_strategy) continue;
    if (new_strategy) shown.push_back(name);
    t.rows.push_back(t.ranked[r]);
  }
  t.first_below = t.n < t.ranked.size() ? t.ranked[t.n] : all.size();
  return t;
}

// Returns s.ranked, or (where suggest_across built every fitting layout) the same rows from s.fitting into
// `own`.
const std::vector<ranked_fit>& ranked_of(const suggestion& s, std::vector<ranked_fit>& own) {
  if (!s.ranked.empty() || s.fitting.empty()) return s.ranked;
  own.reserve(s.fitting.size());
  for (std::size_t i = 0; i < s.fitting.size(); ++i) {
    const candidate& c = s.fitting[i];
    own.push_back({c.where, c.micro_batch, c.cost, c.worst.headroom, c.tight, c.recipe, static_cast<std::int64_t>(i)});
  }
  return own;
}

// Returns a search table's columns (tables.hpp, columns_for) for the rows it lists, `rows` of s.fitting, the
// axes as `across` writes them (with vpp, the searched micro-batch, the recipe when `across` names recipes).
table_columns columns_of(const suggestion& s, const std::vector<std::size_t>& rows, const suggestion* across) {
  std::vector<layout> layouts;
  std::vector<std::string> axes;
  for (const std::size_t i : rows) {
    layouts.push_back(s.fitting[i].where);
    axes.push_back(candidate_axes(s.fitting[i], s.micro_batch_searched, across));
  }
  return columns_for(layouts, axes, true);
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
nlohmann::json cost_json(const layout_cost& c) {
  return {{"recompute", c.recompute},   {"bubble", c.bubble},         {"tp_comm", c.tp_comm},
          {"pp_comm", c.pp_comm},       {"ep_comm", c.ep_comm},       {"dp_exposed", c.dp_exposed},
          {"dp_bytes_per_gpu", c.dp_bytes}, {"total", c.total}};
}

// Returns one layer's ledger as the plan document writes it: name, formula, shape, dtype_bytes, bytes, role.
nlohmann::json ledger_json(const std::vector<ledger_entry>& entries) {
  nlohmann::json ledger = nlohmann::json::array();
  for (const auto& e : entries)
    ledger.push_back({{"name", e.name},
                      {"formula", e.formula},
                      {"shape", e.shape},
                      {"dtype_bytes", e.dtype_bytes},
                      {"bytes", e.bytes},
                      {"role", e.role == act_role::layer_input      ? "layer_input"
                               : e.role == act_role::attention_core ? "attention_core"
                               : e.role == act_role::op_output      ? "op_output"
                                                                    : "saved"},
                      {"op_saved", e.op_saved}});
  return ledger;
}
// Returns the bytes one layer keeps per micro-batch under none, selective, full and torchtitan's per-op
// recomputation (selective_op).
nlohmann::json activation_sums_json(const activation_sums& s) {
  return {{"none", s.none}, {"selective", s.selective}, {"full", s.full}, {"selective_op", s.op}};
}

nlohmann::json candidate_json(const problem& p, const candidate& c, const suggestion* across = nullptr) {
  problem q = p;
  if (across && !across->recipes.empty()) q.precision = across->recipes[static_cast<std::size_t>(c.recipe)];
  return {{"layout", layout_to_json(c.where)},
          {"recipe", q.precision.name},
          {"micro_batch", c.micro_batch},
          {"headroom_bytes", c.worst.headroom},
          {"worst_stage", stage_json(q, c.worst)},
          {"cost", cost_json(c.cost)},
          {"tight", c.tight}};
}

}  // namespace

void write_plan_text(std::ostream& o, const problem& p, const breakdown& b, std::int64_t uncertainty,
                     const std::string& no_spread) {
  const auto& l = b.where;
  const auto& w = b.worst_stage();
  o << "headroom plan: " << printable(p.model.name) << ", " << l.gpus << " GPU" << (l.gpus > 1 ? "s" : "")
    << assumed_capacity(p)
    << ", " << strategy_name(l) << ", " << axes_string(l) << ", seq " << p.training.seq << ", micro-batch "
    << p.training.micro_batch << ", " << printable(p.precision.name) << ", "
    << to_string(p.training.attention) << " attention\n";
  o << "predicted by the analytic model (not measured); GiB per GPU\n\n";
  // The axes column widens for a long layout (MoE, vpp); the strategy column narrows for it past 120 columns.
  const table_columns aw = columns_for({l}, {axes_string(l)}, false);
  write_table_header(o, p, false, aw);
  write_table_rule(o, false, aw);
  const bool peak = write_table_row(o, l, w, nullptr, "", aw);
  write_table_rule(o, false, aw);
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
             ? std::to_string(zero3_units(b.basis.params, l, largest_chunk_layers(p, l, w.stage))) + " layers in flight"
             : "every layer kept gathered from forward to backward");
  line("state", w.state);
  line("activations", w.activations,
       std::to_string(w.layer_activations) + " layer activations" +
           (w.mtp_activations ? " + MTP modules " + gib_str(w.mtp_activations, 1) : std::string()) + ", recompute " +
           to_string(l.recompute));
  line("state + activations", w.state + w.activations);
  if (p.device.reserve.fixed_only()) {
    line("reserve", w.reserve, p.device.reserve.source);
  } else {
    const auto& r = p.device.reserve;
    line("reserve", w.reserve,
         "fixed " + gib_str(r.fixed, 2) + " + " + fixed(r.fragmentation, 4) + " x churn " +
             gib_str(w.terms().churn(), 2) + " + " + bytes_str(r.per_token) + "/token x " +
             std::to_string(reserve_tokens(p, l)) + " tokens" +
             (r.activation_extra != 0 ? " + " + fixed(r.activation_extra, 4) + " x activations " +
                                            gib_str(w.activations, 2)
                                      : ""));
    o << "  " << pad("", 34) << "           " << r.source << "\n";
  }
  line("total", w.total, "state + activations + reserve (the reference total)");
  o << "  the step peak, with what lies outside the allocator:\n";
  line("  backward working set, one layer", w.working_set);
  if (w.output_phase)
    line("  output phase, " + std::string(to_string(p.training.loss)) + " loss", w.output_phase);
  if (w.allocator_workspaces)
    line("  library workspaces", w.allocator_workspaces, "cuBLAS, TransformerEngine: in the allocator");
  line("  step peak", w.step_peak,
       std::string(w.allocator_workspaces ? "workspaces + " : "") + "persistent + transient + activations + max of the two");
  line("  fixed overheads", w.fixed_overheads, "context, NCCL (--fixed-overheads)");
  line("  step peak + fixed overheads", w.peak_total);
  line("capacity", w.capacity);
  o << "  " << pad("headroom", 34) << gib_cell(w.headroom, 10) << " GiB"
    << (uncertainty > 0        ? " +- " + gib_str(uncertainty, 2) + " GiB (the calibration's)"
        : !no_spread.empty() ? " (no +-: " + no_spread + ")"
                             : "")
    << " (" 
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
  j["layout"] = layout_to_json(b.where);
  j["params"] = {{"total", b.basis.params.total},
                 {"stated", b.basis.params.stated},
                 {"per_layer", b.basis.params.per_layer},
                 {"embedding", b.basis.params.embedding},
                 {"output", b.basis.params.output}};
  // The dense layer's ledger and sums, then (2.3) the MoE layer's and how many layers of each kind the model
  // has: for an all-MoE model (Qwen3-30B-A3B, Mixtral) no layer is dense and `ledger` describes none.
  j["ledger"] = ledger_json(b.basis.ledger);
  j["layer_activation_bytes"] = activation_sums_json(b.basis.per_layer);
  const std::int64_t moe_layers = b.basis.params.moe_before.empty() ? 0 : b.basis.params.moe_before.back();
  j["layers_by_kind"] = {{"dense", p.model.layers - moe_layers}, {"moe", moe_layers}};
  j["moe_ledger"] = ledger_json(b.basis.moe_ledger);
  j["moe_layer_activation_bytes"] =
      b.basis.moe_ledger.empty() ? nlohmann::json(nullptr) : activation_sums_json(b.basis.peaks.moe_layer);
  j["microbatches_per_step"] = b.basis.microbatches;
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : b.stages) stages.push_back(stage_json(p, s));
  j["stages"] = stages;
  j["worst_stage"] = b.worst;
  j["fits"] = b.fits();
  j["tight"] = b.worst_stage().tight();
  j["headroom_bytes"] = b.worst_stage().headroom;
  return j;
}

void write_plan_csv(std::ostream& o, const problem& p, const breakdown& b) {
  o << layout_csv_header << ",recipe," << stage_csv_header << ",worst\n";
  for (const auto& s : b.stages) {
    layout_csv(o, p, b.where, p.training.micro_batch);
    o << ',' << csv_field(p.precision.name) << ',';
    stage_csv(o, s);
    o << ',' << (s.stage == b.worst ? "true" : "false") << "\n";
  }
}

namespace {
// Returns " with tp 1 and pp 1 fixed by the launch" for the axes a launch holds (`held`), "" for none.
std::string held_by_launch(const std::string& held) {
  return held.empty() ? "" : " with " + held + " fixed by the launch";
}
}  // namespace

suggest_rows suggest_text_rows(const suggestion& s, std::size_t top) {
  return rows_of(s, s.ranked, top);
}

void write_suggest_text(std::ostream& o, const problem& p, const suggestion& s, std::size_t top,
                        const std::string& held, const std::string& search, const suggest_rows* chosen) {
  std::vector<ranked_fit> own;
  const std::vector<ranked_fit>& all = ranked_of(s, own);  // every fitting layout; s.fitting the rows built
  o << "headroom plan --suggest: " << printable(p.model.name) << " on " << s.gpus << " GPUs" << assumed_capacity(p)
    << ", seq "
    << p.training.seq << ", " << micro_batch_phrase(p, s) << ", " << printable(p.precision.name) << "; "
    << s.evaluated << " layouts evaluated, " << all.size() << " fit\n";
  o << "predicted by the analytic model (not measured); GiB per GPU, worst rank; cost = extra step time "
       "(recompute, bubble, exposed communication)\n\n";
  const suggest_rows t = chosen ? *chosen : rows_of(s, all, top);
  auto built = [&](std::size_t i) -> const candidate& {
    return s.fitting.at(static_cast<std::size_t>(all[i].built));  // suggest_text_rows chose it: built
  };
  std::vector<layout> layouts;
  std::vector<std::string> axes;
  for (const std::size_t i : t.rows) {
    layouts.push_back(all[i].where);
    axes.push_back(candidate_axes(all[i], s.micro_batch_searched, &s));
  }
  const table_columns aw = columns_for(layouts, axes, true);
  write_table_header(o, p, true, aw);
  write_table_rule(o, true, aw);
  bool peak = false, heading = false;
  for (const std::size_t i : t.rows) {
    if (i >= t.first_below && !heading) o << "best layout of each strategy not shown above:\n";
    heading = heading || i >= t.first_below;
    const auto& c = built(i);
    peak =
        write_table_row(o, c.where, c.worst, &c.cost, candidate_axes(c, s.micro_batch_searched, &s), aw) || peak;
  }
  write_table_rule(o, true, aw);
  write_peak_note(o, peak);
  if (all.empty()) {
    // The first line follows the bound (planner/advice.hpp): when state alone exceeds what the GPU leaves on
    // these GPUs, only more GPUs or less state per GPU help, never a shorter sequence or a smaller micro-batch.
    // The bound holds for every layout; any other verdict only for the axes a launch holds.
    if (s.bound.impossible)
      o << "nothing fits: add GPUs (state alone exceeds what each GPU leaves: the bound below)\n";
    else if (!held.empty())
      o << "nothing fits" << held_by_launch(held) << ": search them (--search " << search
        << "), add GPUs, shorten the sequence, or cut the micro-batch\n";
    else
      o << "nothing fits: add GPUs, shorten the sequence, or cut the micro-batch\n";
    o << explain_nothing_fits(p, s);
    return;
  }
  if (t.n < all.size())
    o << all.size() << " layouts fit; the first " << t.n << " by cost are listed (--top 0 lists all)\n";
  if (t.hidden > 0)
    o << t.hidden << " of them not listed: a listed layout under a lower ZeRO stage, at the same cost with less "
                     "headroom (--json lists every one)\n";
  const auto& best = built(t.ranked.front());
  o << "first: " << strategy_name(best.where) << " (" << candidate_axes(best, s.micro_batch_searched, &s)
    << "): recompute " << pct(best.cost.recompute) << ", bubble " << pct(best.cost.bubble) << ", tp traffic "
    << pct(best.cost.tp_comm) << ", pp traffic " << pct(best.cost.pp_comm)
    << (best.cost.ep_comm > 0 ? ", ep all-to-all " + pct(best.cost.ep_comm) : std::string())
    << ", exposed dp traffic "
    << pct(best.cost.dp_exposed) << "; headroom " << gib_str(best.worst.headroom) << " GiB ("
    << fixed(100.0 * static_cast<double>(best.worst.headroom) / static_cast<double>(best.worst.capacity), 1)
    << "%)\n";
  o << "tight = fits with under 5% headroom, too tight to trust; ranked after the rest\n";
  if (!held.empty())
    o << "ranked" << held_by_launch(held) << "; --search " << search << " searches them too\n";
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
  for (const auto& c : s.fitting) f.push_back(candidate_json(p, c, &s));
  j["fitting"] = f;
  if (!s.recipes.empty()) {
    nlohmann::json names = nlohmann::json::array();
    for (const auto& r : s.recipes) names.push_back(r.name);
    j["recipes_searched"] = names;
  }
  j["offload_searched"] = s.offload_searched;
  j["fits"] = !s.fitting.empty();
  return j;
}

void write_suggest_csv(std::ostream& o, const problem& p, const suggestion& s) {
  o << "rank," << layout_csv_header << ",recipe," << stage_csv_header
    << ",cost_total,cost_recompute,cost_bubble,cost_tp_comm,cost_pp_comm,cost_dp_exposed,dp_bytes_per_gpu,"
       "cost_ep_comm\n";
  int rank = 1;
  for (const auto& c : s.fitting) {
    o << rank++ << ',';
    layout_csv(o, p, c.where, c.micro_batch);
    const std::string& recipe =
        s.recipes.empty() ? p.precision.name : s.recipes[static_cast<std::size_t>(c.recipe)].name;
    o << ',' << csv_field(recipe) << ',';
    stage_csv(o, c.worst);
    o << ',' << c.cost.total << ',' << c.cost.recompute << ',' << c.cost.bubble << ',' << c.cost.tp_comm
      << ',' << c.cost.pp_comm << ',' << c.cost.dp_exposed << ',' << static_cast<long long>(c.cost.dp_bytes)
      << ',' << c.cost.ep_comm << "\n";
  }
}

void write_min_gpus_text(std::ostream& o, const problem& p, const min_gpus_result& r, std::size_t top,
                         const std::string& held, const std::string& search) {
  o << "headroom plan --min-gpus: " << printable(p.model.name) << assumed_capacity(p) << ", seq "
    << p.training.seq << ", "
    << (r.at_min ? micro_batch_phrase(p, *r.at_min) : "micro-batch " + std::to_string(p.training.micro_batch))
    << ", " << printable(p.precision.name) << " (predicted by the analytic model)\n\n";
  o << explain_min_gpus(p, r);
  if (!r.n_min) {
    o << "\n"
      << (held.empty() ? "" : "with " + held + " fixed by the launch, ")
      << "no GPU count up to the search limit (--max-gpus) has a fitting layout (" << r.evaluated
      << " layouts evaluated)" << (held.empty() ? "" : "; free them with --search " + search) << "\n";
    return;
  }
  auto show = [&](const std::string& what, int n, const suggestion& s) {
    o << "\n"
      << what << ": N = " << n << " (" << s.fitting.size() << " of " << s.evaluated << " layouts fit)\n";
    const std::size_t k = top == 0 ? s.fitting.size() : std::min(top, s.fitting.size());
    std::vector<std::size_t> rows(k);
    for (std::size_t i = 0; i < k; ++i) rows[i] = i;
    const table_columns aw = columns_of(s, rows, nullptr);
    write_table_header(o, p, true, aw);
    write_table_rule(o, true, aw);
    bool peak = false;
    for (std::size_t i = 0; i < k; ++i) {
      const auto& c = s.fitting[i];
      peak = write_table_row(o, c.where, c.worst, &c.cost, candidate_axes(c, s.micro_batch_searched), aw) ||
             peak;
    }
    write_table_rule(o, true, aw);
    write_peak_note(o, peak);
  };
  const std::string held_note =
      held.empty() ? "" : held_by_launch(held) + " (--search " + search + " frees them)";
  show("smallest GPU count with a fitting layout" + held_note, *r.n_min, *r.at_min);
  if (r.n_nodes)
    show("smallest count in whole nodes of " + std::to_string(p.device.gpus_per_node) +
             " with a fitting layout (--gpus-per-node)" + held_by_launch(held),
         *r.n_nodes, *r.at_nodes);
  o << "\n" << r.evaluated << " layouts evaluated in all\n";
}

nlohmann::json min_gpus_json(const problem& p, const min_gpus_result& r) {
  nlohmann::json j = inputs_json(p, records::kind::min_gpus);
  j["activation_room_bound"] = r.activation_room_bound;  // was "seed_bound" before tool version 0.2
  j["strict_bound"] = r.strict_bound;
  j["full_recompute_activation_bytes"] = r.full_recompute_activations;
  j["first_candidate"] = r.first_candidate;
  if (r.at_min) j["search_space"] = space_json(r.at_min->space);
  j["min_gpus"] = r.n_min ? nlohmann::json(*r.n_min) : nlohmann::json(nullptr);
  // "min_gpus_power_of_two" and "best_at_power_of_two" before issue 33: a power of two ignored 8-GPU nodes.
  j["min_gpus_whole_nodes"] = r.n_nodes ? nlohmann::json(*r.n_nodes) : nlohmann::json(nullptr);
  j["gpus_per_node"] = p.device.gpus_per_node;
  if (r.at_min && !r.at_min->fitting.empty()) j["best_at_min"] = candidate_json(p, r.at_min->fitting.front());
  if (r.at_nodes && !r.at_nodes->fitting.empty())
    j["best_at_whole_nodes"] = candidate_json(p, r.at_nodes->fitting.front());
  j["evaluated"] = r.evaluated;
  return j;
}

void write_max_fit_text(std::ostream& o, const problem& p, const layout& l, const planned_fit& f) {
  const char* axis = f.axis == fit_axis::layers ? "layer count" : to_string(f.axis);
  o << "headroom plan --max-fit " << to_string(f.axis) << ": " << printable(p.model.name) << ", " << l.gpus << " GPU"
    << (l.gpus > 1 ? "s" : "") << assumed_capacity(p) << ", " << strategy_name(l) << ", " << axes_string(l) << ", seq " << p.training.seq
    << ", micro-batch " << p.training.micro_batch << ", " << printable(p.precision.name) << "\n";
  o << "predicted by the analytic model (not measured); the measured answer is `headroom probe max-fit`\n\n";
  const std::string how = "steps of " + std::to_string(f.step) + ", up to " + std::to_string(f.limit) + ", " +
                          std::to_string(f.search.trials.size()) + " plans";
  if (!f.search.largest) {
    o << "largest " << axis << " that fits: none, not even " << f.step << " (" << how << ")\n";
  } else {
    o << "largest " << axis << " that fits: " << *f.search.largest
      << (f.search.reached_limit ? " or more: the search limit fitted (--max-fit-limit)" : "") << " (" << how
      << "; now " << f.current << ")\n";
  }
  if (f.axis == fit_axis::micro_batch)
    o << "  the micro-batches per step stay as now: the global batch grows with the micro-batch\n";
  auto at = [&](const char* what, std::int64_t value, const breakdown& b) {
    const auto& w = b.worst_stage();
    o << "  " << what << " " << value << ": " << (w.fits ? (w.tight() ? "fits, tight" : "fits") : "does not fit")
      << ", " << (w.peak_decides() ? "step peak + fixed overheads " : "state + activations + reserve ")
      << gib_str(w.decisive_total(), 1) << " GiB of " << gib_str(w.capacity, 1) << " GiB (state "
      << gib_str(w.state, 1) << ", activations " << gib_str(w.activations, 1) << ", stage " << w.stage << ")\n";
  };
  if (f.at_largest) at("at", *f.search.largest, *f.at_largest);
  if (f.at_next) {
    const std::int64_t next = f.search.largest ? *f.search.largest + f.step : f.step;
    at("at", next, *f.at_next);
    if (!f.breaking_term.empty())
      o << "  what breaks it: " << f.breaking_term << ", +" << gib_str(f.breaking_growth, 2) << " GiB from "
        << (f.search.largest ? std::to_string(*f.search.largest) : std::string("-")) << " to " << next << "\n";
  } else if (!f.next_error.empty()) {
    o << "  the next step has no plan: " << printable(f.next_error) << "\n";
  }
}

nlohmann::json max_fit_json(const problem& p, const layout& l, const planned_fit& f) {
  nlohmann::json j = inputs_json(p, records::kind::plan_max_fit);
  j["layout"] = layout_to_json(l);
  j["axis"] = to_string(f.axis);
  j["step"] = f.step;
  j["limit"] = f.limit;
  j["current"] = f.current;
  j["largest"] = f.search.largest ? nlohmann::json(*f.search.largest) : nlohmann::json(nullptr);
  j["reached_limit"] = f.search.reached_limit;
  if (f.at_largest) j["at_largest"] = stage_json(p, f.at_largest->worst_stage());
  if (f.at_next) j["at_next"] = stage_json(p, f.at_next->worst_stage());
  j["breaking_term"] = f.breaking_term.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.breaking_term);
  j["breaking_growth_bytes"] = f.breaking_growth;
  nlohmann::json trials = nlohmann::json::array();
  for (const auto& t : f.search.trials) trials.push_back({{"value", t.value}, {"fits", t.fits}, {"detail", t.detail}});
  j["trials"] = trials;
  return j;
}

void write_max_fit_csv(std::ostream& o, const planned_fit& f) {
  o << "axis,value,fits,detail\n";
  for (const auto& t : f.search.trials)
    o << to_string(f.axis) << ',' << t.value << ',' << (t.fits ? "true" : "false") << ',' << csv_field(t.detail)
      << "\n";
}

}  // namespace headroom::cli
