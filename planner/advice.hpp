// advice.hpp: what to change when nothing fits, following what decides. When state alone exceeds what the GPU
// leaves for it (the state bound, suggest.hpp's bound_for), only what moves state helps: more GPUs, optimizer
// offload, an 8-bit optimizer, a higher ZeRO stage; a shorter sequence or a smaller micro-batch does not. When
// state fits and activations decide, what shrinks them helps: recomputation, the micro-batch, the sequence,
// context parallelism. Each lever is checked, not guessed: the GPU count by the minimum-GPU search, offload and
// the 8-bit recipe by the state bound, the sequence by the planner's max-fit.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/cost_model.hpp"
#include "planner/estimate.hpp"
#include "planner/search_space.hpp"
#include "planner/suggest.hpp"

namespace headroom {

struct advice {
  std::string bound_by;             // "state", "activations", or "layout" (no valid layout to weigh)
  std::string why;                  // one line: the figures that say so
  std::vector<std::string> levers;  // what would help, each with its checked figure, most effective first
};

// How a lever's setting is typed: "--recompute full" by default; an imported launch that states the setting
// spells it in its own terms (cli/launch_levers.hpp), since the flag itself would be refused there. An empty
// value is a switch (--offload-optimizer).
using flag_spelling = std::function<std::string(std::string_view flag, std::string_view value)>;

// Returns the advice for a search on `gpus` GPUs in which nothing fit (`s`), the searched axes as given.
// `max_gpus` bounds the minimum-GPU search it runs.
advice advise_search(const problem& p, const search_axes& axes, const cost_model& costs, const suggestion& s,
                     int max_gpus, const flag_spelling& spell = {});

// Returns the advice for one layout that does not fit (`b`).
advice advise_plan(const problem& p, const breakdown& b, const flag_spelling& spell = {});

}  // namespace headroom
