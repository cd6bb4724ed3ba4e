// bench_support.hpp: the problems the benchmarks time: a preset with the seed's defaults.
#pragma once

#include <string>

#include "planner/layout.hpp"
#include "planner/model_files.hpp"

namespace headroom::bench {

// Returns the problem of preset `name` with bf16-adam, its own sequence length, 192 GiB and 10 GiB reserve.
inline problem preset_problem(const std::string& name) {
  problem p;
  p.model = load_preset(name, preset_dir());
  p.precision = load_recipe("bf16-adam");
  p.training.seq = p.model.seq;
  return p;
}

}  // namespace headroom::bench
