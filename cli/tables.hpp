// tables.hpp: writers over the planner's results: the reference case's table, stage breakdowns, JSON and CSV.
// Every byte count goes out as an integer in JSON and CSV; GiB only in the human table.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "planner/advice.hpp"
#include "planner/estimate.hpp"
#include "planner/max_fit.hpp"
#include "planner/suggest.hpp"
#include "probes/records/schema.hpp"

namespace headroom::cli {

// Returns `s` padded with spaces to `w` characters (unchanged when longer).
std::string pad(std::string s, std::size_t w);
// Returns bytes as the reference case's 8-wide GiB number column.
std::string num8(std::int64_t bytes);
// Returns a fraction as a signed percent with one decimal: "+12.5%".
std::string pct(double fraction);

// One stage's terms as JSON (every byte count an integer) and as a CSV row under stage_csv_header.
nlohmann::json stage_json(const problem& p, const stage_breakdown& s);
extern const char* const stage_csv_header;
void stage_csv(std::ostream& o, const stage_breakdown& s);

// The widths, in characters, of a table's two text columns (the figures' columns are fixed): the reference
// case's 32 and 23 by default.
struct table_columns {
  std::size_t strategy = 32, axes = 23;
  bool short_strategy = false;  // strategies written short ("ZeRO-3 + selective") to leave the axes room
};
// Returns the columns for a table whose rows have these strategy names and axes texts: the strategy column
// at 32, the axes column as wide as its longest text (at least 23) while the line stays within 120
// characters; past that the strategy column narrows to its longest name, and then to its longest short name
// (short_strategy_name). Only a row whose axes are longer than what is then left wraps (write_table_row).
table_columns columns_for(const std::vector<layout>& rows, const std::vector<std::string>& axes, bool with_cost);
// The reference case's table header (plus a cost column) and its rule line.
void write_table_header(std::ostream& o, const problem& p, bool with_cost, table_columns cols = {});
void write_table_rule(std::ostream& o, bool with_cost, table_columns cols = {});
// One table row for a layout's worst stage; the total is the decisive one, starred when the step peak
// decides. `axes` replaces the layout's axes text when not empty. Returns whether the step peak decided.
bool write_table_row(std::ostream& o, const layout& l, const stage_breakdown& w, const layout_cost* cost,
                     const std::string& axes = "", table_columns cols = {});
// The footnote of a table in which some row's total was starred.
void write_peak_note(std::ostream& o, bool any);
// Returns the reference case's strategy name: "ZeRO-3 + selective recompute".
std::string strategy_name(const layout& l);
// Returns the strategy name without "recompute", as the search's messages write it: "ZeRO-3 + selective",
// "DDP + none", "ZeRO-1 + full every 4".
std::string short_strategy_name(const layout& l);

// A plan: heading, the table row, the worst rank's terms, every stage when pp > 1.
// `uncertainty`: the headroom's, in bytes, from a calibration (0: none stated).
// `uncertainty`: the calibration's band, bytes (0: none); `no_spread`: why a calibration gives none ("" when
// uncalibrated or when it does).
void write_plan_text(std::ostream& o, const problem& p, const breakdown& b, std::int64_t uncertainty = 0,
                     const std::string& no_spread = "");
nlohmann::json plan_json(const problem& p, const breakdown& b);
void write_plan_csv(std::ostream& o, const problem& p, const breakdown& b);

// Returns `text` with the assumption lines (plan_assumptions.hpp) after its first line, the title.
std::string with_assumptions(const std::string& text, const std::string& assumptions);

// What to change when nothing fits (planner/advice.hpp): as lines under the verdict, and as JSON.
std::string advice_text(const advice& a);
nlohmann::json advice_json(const advice& a);

// plan --max-fit: the largest value, the plan on either side of the edge, and every trial.
void write_max_fit_text(std::ostream& o, const problem& p, const layout& l, const planned_fit& f);
nlohmann::json max_fit_json(const problem& p, const layout& l, const planned_fit& f);
void write_max_fit_csv(std::ostream& o, const planned_fit& f);

// Returns `s` as one CSV field: quoted (with quotes doubled) when it holds a comma, quote or line break.
std::string csv_field(const std::string& s);

// The layout and training columns every plan CSV row starts with, and a row's values for them.
extern const char* const layout_csv_header;
void layout_csv(std::ostream& o, const problem& p, const layout& l, std::int64_t micro_batch);

// The rows a --suggest table lists, indices into the ranking (suggestion::ranked, or s.fitting where every
// fitting layout was built): the first n undominated rows, then below the cut the best layout of every
// strategy not shown yet, so the alternatives stay in view.
struct suggest_rows {
  std::vector<std::size_t> ranked;  // the rows a ranking lists (a lower ZeRO stage dominated: not listed)
  std::size_t hidden = 0;           // rows the ranking leaves out
  std::size_t n = 0;                // rows above the cut
  std::vector<std::size_t> rows;    // the rows listed, in order
  std::size_t first_below = 0;      // the first row below the cut (the ranking's size when none)
};
// Returns the rows write_suggest_text lists with `top` (0 = all) over s.ranked (suggest_across with a
// selection): the selection that builds them.
suggest_rows suggest_text_rows(const suggestion& s, std::size_t top);

// --suggest: heading, ranked table (top `top`, 0 = all), "nothing fits" and the proof. `held` ("tp 1 and pp
// 1"): the axes a launch fixes, which the verdict is conditional on and --search `search` frees ("": none).
// `chosen`: the rows suggest_text_rows gave for this `top`, found once (else found here).
void write_suggest_text(std::ostream& o, const problem& p, const suggestion& s, std::size_t top,
                        const std::string& held = "", const std::string& search = "",
                        const suggest_rows* chosen = nullptr);
nlohmann::json suggest_json(const problem& p, const suggestion& s);
void write_suggest_csv(std::ostream& o, const problem& p, const suggestion& s);

// --min-gpus: the derivation, the smallest N and whole-node count, and the best layouts there.
void write_min_gpus_text(std::ostream& o, const problem& p, const min_gpus_result& r, std::size_t top,
                         const std::string& held = "", const std::string& search = "");
nlohmann::json min_gpus_json(const problem& p, const min_gpus_result& r);

// `headroom recipes`: every built-in recipe, its buffers, and the bytes per parameter each ZeRO stage leaves
// on a GPU ("4 + 12/d": unsharded bytes + sharded bytes over d ranks).
void write_recipes(std::ostream& o, bool json = false);
// Writes every model preset (presets/): name, parameters, layers, hidden, heads, sequence, kind (dense or
// MoE) and source, as a table or as JSON (an array under the envelope).
void write_presets(std::ostream& o, bool json = false);
// Writes every GPU type --gpu-type takes (planner/gpu_types.hpp): the capacity a process sees (GiB), the
// architecture, whether it has FP8 tensor cores, the dense bf16 TFLOP/s, GPUs per node and the capacity's
// source, as a table or as JSON.
void write_gpus(std::ostream& o, bool json = false);

// Returns the start of a predicted document of kind `k`: the envelope (probes/records/envelope.hpp),
// "predicted": true, and the inputs (model, recipe, training, device).
nlohmann::json inputs_json(const problem& p, records::kind k);

}  // namespace headroom::cli
