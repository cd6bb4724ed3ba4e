// interleaved_peak_test.cpp: the interleaved schedule's peak (schedule.hpp peak_chunk_copies and
// embeddings_in_flight, counted in closed form) against a step-by-step run of Megatron's interleaved order
// written here: every warm-up forward, then one forward and one backward at a time to the end of the step.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "planner/schedule.hpp"

namespace headroom {
namespace {

struct simulated {
  std::vector<std::int64_t> copies;  // per chunk, at the first moment the stage held the most bytes
  std::int64_t most_chunk0 = 0;      // the most copies of chunk 0 alive at once
};

// Megatron's order (schedules.py, forward_backward_pipelining_with_interleaving): forward step i runs chunk
// (i mod pp*vpp) / pp; backward step j runs chunk vpp - 1 - (j mod pp*vpp) / pp; stage k runs
// 2(pp - k - 1) + (vpp - 1) pp warm-up forwards (at most all of them).
simulated run_schedule(int pp, int vpp, int stage, std::int64_t microbatches,
                       const std::vector<std::int64_t>& bytes) {
  const std::int64_t total = microbatches * vpp, round = static_cast<std::int64_t>(pp) * vpp;
  const std::int64_t warmup = std::min<std::int64_t>(2 * (pp - stage - 1) + (vpp - 1) * pp, total);
  std::vector<std::int64_t> alive(static_cast<std::size_t>(vpp), 0);
  simulated r{alive, 0};
  std::int64_t held = 0, most = -1, f = 0, b = 0;
  auto forward = [&] {
    const auto c = static_cast<std::size_t>((f++ % round) / pp);
    ++alive[c];
    held += bytes[c];
  };
  auto look = [&] {
    if (held > most) most = held, r.copies = alive;
    r.most_chunk0 = std::max(r.most_chunk0, alive[0]);
  };
  while (f < warmup) forward();
  if (f == total) look();
  while (f < total) {
    forward();
    look();
    const auto c = static_cast<std::size_t>(vpp - 1 - (b++ % round) / pp);
    --alive[c];
    held -= bytes[c];
  }
  return r;
}

TEST(InterleavedPeak, ClosedFormIsTheStepByStepPeak) {
  std::mt19937 g(30);
  int checked = 0;
  for (int pp = 2; pp <= 9; ++pp)
    for (int vpp = 2; vpp <= 6; ++vpp)
      for (std::int64_t microbatches : {1, 2, 3, 5, 8, 16, 24, 64}) {
        layout l;
        l.pp = pp;
        l.vpp = vpp;
        for (int stage = 0; stage < pp; ++stage)
          for (int draw = 0; draw < 4; ++draw) {
            std::vector<std::int64_t> bytes(static_cast<std::size_t>(vpp));
            // Equal chunks, and chunks of different sizes (small ranges make ties between moments).
            for (auto& x : bytes)
              x = draw == 0 ? 7 : std::uniform_int_distribution<std::int64_t>(0, draw * 3)(g);
            const simulated want = run_schedule(pp, vpp, stage, microbatches, bytes);
            EXPECT_EQ(peak_chunk_copies(l, stage, microbatches, bytes), want.copies)
                << "pp=" << pp << " vpp=" << vpp << " stage=" << stage << " M=" << microbatches;
            ++checked;
          }
        EXPECT_EQ(embeddings_in_flight(l, microbatches),
                  run_schedule(pp, vpp, 0, microbatches, std::vector<std::int64_t>(vpp, 1)).most_chunk0)
            << "pp=" << pp << " vpp=" << vpp << " M=" << microbatches;
      }
  EXPECT_GT(checked, 5000);
}

}  // namespace
}  // namespace headroom
