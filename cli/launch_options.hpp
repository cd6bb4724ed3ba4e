// launch_options.hpp: the launch importers on the command line (--megatron-args, --deepspeed-config,
// --torchtitan-config): each importer's launch_import (planner/imports/launch.hpp) fills the plan options the
// command line does not state, and its unmodelled keys are refused unless --allow-unmodelled.
#pragma once

#include <string>
#include <vector>

#include "plan_command.hpp"
#include "planner/imports/launch.hpp"

namespace headroom::cli {

// Reads every importer `o` names and merges what each states into `o` where the command line is silent
// (o.imported lists the options it set). Returns the imports, in the order read, for --explain. Throws
// bad_input: an importer's own error, a value that contradicts an explicit flag or another import, or an
// unmodelled key without --allow-unmodelled.
std::vector<launch_import> apply_imports(plan_options& o);

// Returns the text --explain prints for `imports`: every value derived or defaulted with its rule, the keys
// read and not used, and the unmodelled keys allowed through.
std::string explain_imports(const std::vector<launch_import>& imports);

}  // namespace headroom::cli
