// tables.hpp: writers over the planner's results: the reference case's table, stage breakdowns, JSON and CSV.
// Every byte count goes out as an integer in JSON and CSV; GiB only in the human table.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "planner/estimate.hpp"
#include "planner/suggest.hpp"
#include "probes/records/schema.hpp"

namespace headroom::cli {

// The reference case's table header (plus a cost column) and its rule line.
void write_table_header(std::ostream& o, const problem& p, bool with_cost, std::size_t axes_width = 23);
void write_table_rule(std::ostream& o, bool with_cost, std::size_t axes_width = 23);
// One table row for a layout's worst stage; the total is the decisive one, starred when the step peak
// decides. `axes` replaces the layout's axes text when not empty. Returns whether the step peak decided.
bool write_table_row(std::ostream& o, const layout& l, const stage_breakdown& w, const layout_cost* cost,
                     const std::string& axes = "", std::size_t axes_width = 23);
// The footnote of a table in which some row's total was starred.
void write_peak_note(std::ostream& o, bool any);
// Returns the reference case's strategy name: "ZeRO-3 + selective recompute".
std::string strategy_name(const layout& l);

// A plan: heading, the table row, the worst rank's terms, every stage when pp > 1.
void write_plan_text(std::ostream& o, const problem& p, const breakdown& b);
nlohmann::json plan_json(const problem& p, const breakdown& b);
void write_plan_csv(std::ostream& o, const problem& p, const breakdown& b);

// --suggest: heading, ranked table (top `top`, 0 = all), "nothing fits" and the proof.
void write_suggest_text(std::ostream& o, const problem& p, const suggestion& s, std::size_t top);
nlohmann::json suggest_json(const problem& p, const suggestion& s);
void write_suggest_csv(std::ostream& o, const problem& p, const suggestion& s);

// --min-gpus: the derivation, the smallest N and power of two, and the best layouts there.
void write_min_gpus_text(std::ostream& o, const problem& p, const min_gpus_result& r, std::size_t top);
nlohmann::json min_gpus_json(const problem& p, const min_gpus_result& r);

// `headroom recipes`: every built-in recipe, its buffers, and the bytes per parameter each ZeRO stage leaves
// on a GPU ("4 + 12/d": unsharded bytes + sharded bytes over d ranks).
void write_recipes(std::ostream& o, bool json = false);
// Writes every model preset (presets/): name, parameters, layers, hidden, heads, sequence, kind (dense: the
// only kind this version models) and source, as a table or as JSON (an array under the envelope).
void write_presets(std::ostream& o, bool json = false);

// Returns the start of a predicted document of kind `k`: the envelope (probes/records/envelope.hpp),
// "predicted": true, and the inputs (model, recipe, training, device).
nlohmann::json inputs_json(const problem& p, records::kind k);

}  // namespace headroom::cli
