// plan_assumptions.hpp: the assumptions a plan rests on, stated once under its title: every setting that
// changes the answer and that the user may not have chosen (GPU memory, attention kernel, loss, sequence
// length and where each came from, the reserve), with the flag that changes it.
#pragma once

#include <string>

#include "calibrate/calibration.hpp"
#include "plan_command.hpp"
#include "planner/layout.hpp"

namespace headroom::cli {

// Returns the assumption lines for `p` as the options `o` produced it, each ending in a newline.
std::string assumption_lines(const problem& p, const plan_options& o);

// Returns the lines a calibration adds: what it was fitted on, whether its fixed term is the documented prior
// (no record held the CUDA context), and one line per way the planned case `l` (null: the problem alone)
// lies outside its domain (calibrate/calibration.hpp, outside_domain). Throws bad_input for the first of
// those under --strict-calibration.
std::string calibration_lines(const calibrate::calibration& c, const problem& p, const layout* l,
                              const plan_options& o);

}  // namespace headroom::cli
