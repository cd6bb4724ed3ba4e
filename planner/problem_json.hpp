// problem_json.hpp: a problem (model, recipe, training, device with its reserve) and a layout as structured
// JSON, and back. Every record headroom writes carries them this way, so that a record can be turned back
// into exactly the planner's problem and layout (calibration re-predicts from them).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "layout.hpp"

namespace headroom {

nlohmann::json reserve_to_json(const reserve_model& r);
// Throws bad_input naming the field.
reserve_model reserve_from_json(const nlohmann::json& j, const std::string& origin);

// Returns {"model", "recipe", "training", "device"}.
nlohmann::json problem_to_json(const problem& p);
// Returns the problem of problem_to_json's output. Throws bad_input naming the field.
problem problem_from_json(const nlohmann::json& j, const std::string& origin);

nlohmann::json layout_to_json(const layout& l);
// Throws bad_input naming the field; the layout is not validated against a problem here.
layout layout_from_json(const nlohmann::json& j, const std::string& origin);

}  // namespace headroom
