// fuzz_targets.hpp: one fuzz target per reader of outside input. The same entry serves libFuzzer (each
// target a binary built from libfuzzer_main.cpp, clang only) and the regression test that replays the seed
// corpus and every committed crash input (tests/fuzz_regression_test.cpp, any compiler).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace headroom::fuzz {

// The targets: model (preset / model file), hf_config, recipe, problem (problem + layout), trace,
// measurement (record), calibration, snapshot (PyTorch pickle or JSON), launcher (the launchers'
// environment variables), printable (strings made safe to print), outputs (output files, however spelt),
// megatron_args, deepspeed_config and torchtitan_config (the launch importers, planner/imports/),
// observations (`headroom observe`'s rows) and sidecar (a capture's JSON beside its snapshot).
const std::vector<std::string>& fuzz_target_names();

// Feeds `size` bytes to reader `target` (a name from fuzz_target_names()). Returns 0; a violated invariant
// aborts.
int fuzz_one(std::string_view target, const std::uint8_t* data, std::size_t size);

}  // namespace headroom::fuzz
