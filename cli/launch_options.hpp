// launch_options.hpp: the launch importers on the command line (--megatron-args, --deepspeed-config,
// --torchtitan-config): each importer's launch_import (planner/imports/launch.hpp) fills the plan options the
// command line does not state, and its unmodelled keys are refused unless --allow-unmodelled.
#pragma once

#include <string>
#include <vector>

#include "plan_command.hpp"
#include "planner/imports/launch.hpp"
#include "probes/allocators/caching_allocator.hpp"

namespace headroom::cli {

// Reads every importer `o` names and merges what each states into `o` where the command line is silent
// (o.imported lists the options it set). Returns the imports, in the order read, for --explain. Throws
// bad_input: an importer's own error, a value that contradicts an explicit flag or another import, or an
// unmodelled key without --allow-unmodelled.
std::vector<launch_import> apply_imports(plan_options& o);

// Returns the caching-allocator settings of the PYTORCH_CUDA_ALLOC_CONF an import set (o.alloc_conf; the
// defaults when none did): the plan's allocator emulation runs under them.
probes::caching_options imported_allocator(const plan_options& o);

// Returns the text --explain prints for `imports`: every value derived or defaulted with its rule, the keys
// read and not used, and the unmodelled keys allowed through.
std::string explain_imports(const std::vector<launch_import>& imports);

}  // namespace headroom::cli
