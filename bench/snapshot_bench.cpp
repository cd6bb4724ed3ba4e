// snapshot_bench.cpp: reading and replaying PyTorch memory snapshots (issue 8's target: a 20,000-event
// snapshot read and replayed in under 100 ms). Each iteration parses the file's bytes (pickle), converts
// device 0 into a trace and replays it through the caching emulation, compared with the real trace. The
// files: the two in tests/data/snapshots, and the larger ones of docs/snapshots.md when present.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "probes/snapshots/snapshot.hpp"
#include "probes/snapshots/snapshot_record.hpp"
#include "probes/snapshots/what_if.hpp"

namespace {

using namespace headroom::probes;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void read_and_replay(benchmark::State& state, const std::string& path) {
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("not present: " + path).c_str());
    return;
  }
  const std::string bytes = slurp(path);
  std::size_t events = 0;
  for (auto _ : state) {
    const torch_snapshot s = parse_snapshot(bytes, path);
    const snapshot_trace t = snapshot_to_trace(s, 0);
    const snapshot_replay r = replay_snapshot(s, t, recorded_options(s), std::int64_t{1} << 40, true);
    benchmark::DoNotOptimize(r.peak_reserved);
    events = s.devices[0].size();
  }
  state.counters["snapshot_events"] = static_cast<double>(events);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * events));
}

const std::string repo = HEADROOM_SOURCE_DIR;

}  // namespace

BENCHMARK_CAPTURE(read_and_replay, fwd100_2304_events,
                  repo + "/tests/data/snapshots/NiuHuangxiaozi__forward_memory_snapshot_100.pickle")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(read_and_replay, wedsonlin_19136_events,
                  repo + "/../shared/data/snapshots/Wedsonlin__medium_128_training_memory_snapshot.pickle")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(read_and_replay, sidsoc12_27358_events,
                  repo + "/../shared/data/snapshots/sidsoc12__mem_snapshot_ctx128_fp32_train.pickle")
    ->Unit(benchmark::kMillisecond);
