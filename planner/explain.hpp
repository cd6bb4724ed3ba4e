// explain.hpp: the derivations behind a plan, in the form of docs/reference-case.md (formula, substituted
// numbers, result), for the case at hand. Returns text; the CLI prints it.
#pragma once

#include <string>

#include "estimate.hpp"
#include "suggest.hpp"

namespace headroom {

// Returns the derivation of every figure of `b` (state, transient, ledger, activations, total, headroom).
std::string explain_plan(const problem& p, const breakdown& b);

// Returns the proof that nothing fits on s.gpus when the bound proves it, or why nothing fits otherwise.
std::string explain_nothing_fits(const problem& p, const suggestion& s);

// Returns the derivation of the minimum GPU count (docs/reference-case.md (e)).
std::string explain_min_gpus(const problem& p, const min_gpus_result& r);

}  // namespace headroom
