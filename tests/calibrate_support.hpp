// calibrate_support.hpp: record sets for the calibrate/ tests: records whose footprint obeys a planted
// reserve (fixed + fragmentation x churn + per-token x tokens), and a minimal probe record.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "planner/estimate.hpp"
#include "planner/reserve.hpp"
#include "probes/records/measurement_record.hpp"
#include "test_support.hpp"

namespace headroom::calibrate::test_records {

using probes::measurement_record;

// A record of `preset` on `l` whose footprint obeys a planted reserve: fixed + frag x churn + tok x tokens.
inline measurement_record planted(const std::string& preset, const layout& l, std::int64_t seq, double fixed,
                           double frag, double tok, bool cuda, std::int64_t micro_batch = 1) {
  problem p = test::preset_problem(preset);
  p.training.seq = seq;
  p.training.micro_batch = micro_batch;
  const breakdown b = estimate(p, l);
  const auto& w = b.worst_stage();
  measurement_record r;
  r.origin = preset + " seq " + std::to_string(seq) + " mb " + std::to_string(micro_batch) + " " + axes_string(l) +
             (cuda ? " cuda" : " sim");
  r.kind = "probe";
  r.backend = cuda ? "cuda" : "sim";
  r.measured = cuda;
  r.inputs = p;
  r.where = b.where;
  r.stage = w.stage;
  r.persistent = w.persistent;
  r.transient = w.transient;
  r.activations = w.activations;
  r.working_set = w.working_set;
  r.output_phase = w.output_phase;
  const double churn =
      static_cast<double>(w.transient + w.activations + std::max(w.working_set, w.output_phase));
  const double tokens = static_cast<double>(reserve_tokens(p, l));
  const double model = static_cast<double>(w.persistent + w.transient + w.activations);
  const double foot = model + (cuda ? fixed : 0) + frag * churn + tok * tokens;
  if (cuda) {
    r.device_used_at_peak = static_cast<std::int64_t>(std::llround(foot)) + 300 * mib;
    r.used_before_context = 300 * mib;  // what another process held: subtracted
  } else {
    r.peak_reserved = static_cast<std::int64_t>(std::llround(foot));
  }
  return r;
}

inline std::vector<measurement_record> planted_set(double fixed, double frag, double tok, bool all_sim = false) {
  std::vector<measurement_record> out;
  const struct {
    const char* preset;
    int gpus, zero;
    recompute_mode r;
    std::int64_t seq;
    bool cuda;
  } cases[] = {{"gpt3-1.3b", 8, 1, recompute_mode::none, 2048, true},
               {"gpt3-1.3b", 8, 3, recompute_mode::selective, 4096, true},
               {"gpt3-2.7b", 8, 2, recompute_mode::full, 1024, true},
               {"gpt3-6.7b", 16, 3, recompute_mode::full, 8192, false},
               {"llama2-7b", 8, 3, recompute_mode::selective, 2048, true},
               {"gpt3-350m", 4, 0, recompute_mode::none, 512, false}};
  for (const auto& c : cases) {
    layout l;
    l.gpus = c.gpus;
    l.zero = c.zero;
    l.recompute = c.r;
    out.push_back(planted(c.preset, l, c.seq, fixed, frag, tok, c.cuda && !all_sim));
  }
  return out;
}

// A sim probe record of `model` with the given reserved peak and fragmentation.
inline measurement_record simple(const std::string& model, std::int64_t reserved, double frag) {
  measurement_record r;
  r.kind = "probe";
  r.backend = "sim";
  r.allocator = "caching";
  r.peak_reserved = reserved;
  r.peak_allocated = reserved / 2;
  r.fragmentation = frag;
  r.raw = {{"inputs", {{"layout", "tp=1 pp=1 dp=8, ZeRO-1, recompute none"}}}};
  r.inputs = test::preset_problem(model);
  return r;
}

}  // namespace headroom::calibrate::test_records
