// model_key.hpp: the key that says which model a measurement ran, so records of one model group together and a
// calibration's activation factor is applied to that model only (calibration.hpp).
#pragma once

#include <string>

#include "planner/model_spec.hpp"

namespace headroom::calibrate {

// Returns the key runs of one model share: its shape, what model_spec.hpp's shape_difference compares (the
// sequence and batch are the training's, not the model's, so two sizes of one run share it). Not its name: the
// name says where the shape was read from (a preset, an HF config's model_type, a launch file), and one model
// read from two of them is one model.
std::string implementation_key(const model_spec& m);

// Returns whether a calibration's stored key names the model `m`: its shape key, or, in a file written before
// keys dropped the name, "<name> " + the legacy shape of `m`, whatever the name.
bool same_implementation(const std::string& stored, const model_spec& m);

}  // namespace headroom::calibrate
