// launch_levers.hpp: how the advice under a verdict names a setting that an imported launch states. The flag
// itself would be refused there (launch_options.cpp, check_agrees: a flag that contradicts the file), so each
// lever is spelt as the launch changes it: Megatron's flag appended to --megatron-args, a torchtitan
// override, or the DeepSpeed JSON's key. A setting the launch cannot state gets no lever.
#pragma once

#include <utility>
#include <vector>

#include "plan_command.hpp"
#include "planner/advice.hpp"
#include "planner/errors.hpp"

namespace headroom::cli {

// Returns the spelling for the advice of a plan whose options `o` an import filled (o.imported); an empty
// function (the flags as they are) when no launch was imported.
flag_spelling launch_spelling(const plan_options& o);
// Returns how the launch `o` imported (Megatron arguments, a torchtitan file, a DeepSpeed JSON) changes the
// setting `flag` (a headroom flag) to `value` ("append --attention-backend unfused to --megatron-args"), ""
// when the launch has no way to state it.
std::string launch_change(const plan_options& o, std::string_view flag, std::string_view value);
// Returns how the launch `o` imported changes every setting of `settings` ({flag, value}) at once, as one
// instruction ("append --tensor-model-parallel-size 2 --recompute-granularity selective to --megatron-args"),
// the settings it has no way to state named after it; "" when `settings` is empty.
std::string launch_changes(const plan_options& o,
                           const std::vector<std::pair<std::string, std::string>>& settings);

// Which launch `o` imports: --search frees its axes by what that framework can change (launch_options.cpp).
enum class launch_kind { none, megatron, torchtitan, deepspeed };
// Returns the launch `o` names (Megatron arguments first, as launch_change reads them), none without one.
launch_kind launch_of(const plan_options& o);

// Rethrows `e`; a refusal of a setting an imported launch states (planner/layout.cpp: ep not dividing the
// ranks, a global batch the data-parallel ranks do not divide, ...) is rethrown naming the launch file and
// how to change the setting there, as a refusal of a contradicting flag does (launch_options.cpp).
[[noreturn]] void rethrow_for_launch(const plan_options& o, const bad_input& e);

}  // namespace headroom::cli
