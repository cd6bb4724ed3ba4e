// launch_options.hpp: the launch importers on the command line (--megatron-args, --deepspeed-config,
// --torchtitan-config): each importer's launch_import (planner/imports/launch.hpp) fills the plan options the
// command line does not state, and its unmodelled keys are refused unless --allow-unmodelled.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan_command.hpp"
#include "planner/advice.hpp"
#include "planner/imports/launch.hpp"
#include "probes/allocators/caching_allocator.hpp"

namespace headroom::cli {

// Reads every importer `o` names and merges what each states into `o` where the command line is silent
// (o.imported lists the options it set). Returns the imports, in the order read, for --explain. Throws
// bad_input: an importer's own error, a value that contradicts an explicit flag or another import, or an
// unmodelled key without --allow-unmodelled.
std::vector<launch_import> apply_imports(plan_options& o);

// Checks --search AXES (o.search) against the launch `o` imports and records in o.freed the flags of the axes
// it frees ("all": every axis that launch can change). With tp go the sequence parallelism and expert tp
// that mean nothing at the launch's tp 1, with pp the virtual stages that mean nothing at its pp 1. Throws
// bad_input: an unknown name (the nearest and the valid ones), an axis the launch cannot change (why), an axis
// a flag fixes too, --search without a launch or without --suggest / --min-gpus.
void free_searched_axes(plan_options& o);

// Returns whether option `flag` ("--tp") fixes its axis for --suggest and --min-gpus: given on the command
// line or by a launch, and not freed by --search.
bool fixed_for_search(const plan_options& o, const char* flag);

// Returns the axes --suggest and --min-gpus hold: those the command line fixes and those a launch fixes that
// --search does not free; under a launch, the search keeps to what its framework runs (ZeRO stages, recompute
// modes, Megatron's even pipeline split). Throws bad_input.
search_axes search_axes_from(const plan_options& o);

// What a launch fixes that --search could free, for a conditional verdict: "tp 1, pp 1, ep 8 and recompute
// none" and "tp,pp,ep,recompute"; both "" when the launch holds no such axis (`p`: the problem planned).
struct launch_pins {
  std::string values, names;
  bool empty() const { return names.empty(); }
};
launch_pins pinned_by_launch(const plan_options& o, const problem& p);

// Returns how the launch `o` imports runs layout `l` at micro-batch `micro_batch` on the axes --search freed
// ("append --tensor-model-parallel-size 2 to --megatron-args"), "" when it is the launch's own.
std::string launch_edit(const plan_options& o, const layout& l, std::int64_t micro_batch);

// Returns what --suggest (on `gpus` GPUs) or --min-gpus (no `gpus`) finds for problem `p` with the axes the
// launch holds (`pins`) freed, checked by the search: the first layout that fits and how the launch runs it,
// else the smallest count with one, else that none up to --max-gpus has one. Throws bad_input.
std::string searched_instead(const plan_options& o, const problem& p, const launch_pins& pins,
                             std::optional<int> gpus);

// Returns advice `a` for a search in which the launch held `pins`: what it concludes over layouts and GPU
// counts worded as holding with them fixed (the state bound holds for every layout), with lever `searched`.
advice held_advice(advice a, const launch_pins& pins, const std::string& searched);

// Returns the caching-allocator settings of the PYTORCH_CUDA_ALLOC_CONF an import set (o.alloc_conf; the
// defaults when none did): the plan's allocator emulation runs under them.
probes::caching_options imported_allocator(const plan_options& o);

// Returns the text --explain prints for `imports`: every value derived or defaulted with its rule, the keys
// read and not used, and the unmodelled keys allowed through.
std::string explain_imports(const std::vector<launch_import>& imports);

}  // namespace headroom::cli
