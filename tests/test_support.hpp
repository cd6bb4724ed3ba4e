// test_support.hpp: small helpers the planner tests share: loading presets and building problems.
#pragma once

#include <string>

#include "planner/errors.hpp"
#include "planner/layout.hpp"
#include "planner/model_files.hpp"
#include "planner/recipe.hpp"
#include "planner/units.hpp"

namespace headroom {

// A mebibyte, as the probe tests write sizes.
inline constexpr std::int64_t MiB = mib;
#ifdef HEADROOM_TEST_DATA
// The test data folder (tests/data).
inline const std::string data = HEADROOM_TEST_DATA;
#endif

}  // namespace headroom

namespace headroom::test {

// Runs `f` and returns the message of the bad_input it throws, "" when it throws none.
template <class F>
std::string bad_input_of(F f) {
  try {
    f();
  } catch (const bad_input& e) {
    return e.what();
  }
  return "";
}

// Returns the problem for a preset with the reference case's defaults (bf16-adam, 192 GiB, 10 GiB reserve).
inline problem preset_problem(const std::string& name) {
  return default_problem(load_preset(name, preset_dir()));
}

inline layout make_layout(int gpus, int zero, recompute_mode r, int tp = 1, int pp = 1) {
  layout l;
  l.gpus = gpus;
  l.zero = zero;
  l.recompute = r;
  l.tp = tp;
  l.pp = pp;
  return l;
}

// Returns bytes in GiB rounded to `decimals`, the way docs/reference-case.md prints them.
inline double rounded_gib(std::int64_t bytes, int decimals = 1) {
  double f = 1;
  for (int i = 0; i < decimals; ++i) f *= 10;
  return static_cast<double>(static_cast<long long>(to_gib(bytes) * f + 0.5)) / f;
}

}  // namespace headroom::test
