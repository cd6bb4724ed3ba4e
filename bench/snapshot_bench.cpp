// snapshot_bench.cpp: reading and replaying PyTorch memory snapshots (issue 8's target: a 20,000-event
// snapshot read and replayed in under 100 ms; issue 30's: a 1 M-event one, an 80 MB pickle, read, replayed
// and compared in 0.5 s and 500 MB resident; its rate is items_per_second, in events). Each iteration parses the file's bytes (pickle), converts device 0 into a trace
// and replays it through the caching emulation, compared with the real trace, as `headroom probe snapshot`
// does. The files: the two in tests/data/snapshots, the larger ones of docs/snapshots.md when present, and
// a generated 1 M-event one (synthetic_snapshot.hpp), whose peak resident memory is reported too.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "bench/synthetic_snapshot.hpp"
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

// Returns the process's peak resident memory in MiB (VmHWM, proc(5)), or -1 where /proc has none.
double peak_resident_mib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024;  // the line is in kB
  return -1;
}

// Resets the peak resident memory to what is resident now (writing 5 to clear_refs, proc(5), Linux 4.0).
void reset_peak_resident() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

// The generated 1 M-event snapshot: its pickle bytes stay resident, as the file's do in the command line
// (which reads it whole). peak_rss_MiB is the process's peak during the timed iterations, the generator's
// own peak before them excluded (reset_peak_resident), the bench's own few MiB included.
void read_replay_compare_1m(benchmark::State& state) {
  static const std::string bytes = headroom::bench::synthetic_snapshot(1'000'000);
  reset_peak_resident();
  std::size_t events = 0;
  for (auto _ : state) {
    const torch_snapshot s = parse_snapshot(bytes, "synthetic 1M");
    const snapshot_trace t = snapshot_to_trace(s, 0);
    const snapshot_replay r = replay_snapshot(s, t, recorded_options(s), std::int64_t{1} << 40, true);
    if (r.diverged_at || r.oom_event) state.SkipWithError(("the replay diverged: " + r.divergence).c_str());
    benchmark::DoNotOptimize(r.peak_reserved);
    events = s.devices[0].size();
  }
  state.counters["snapshot_events"] = static_cast<double>(events);
  state.counters["pickle_MB"] = static_cast<double>(bytes.size()) / 1e6;
  state.counters["peak_rss_MiB"] = peak_resident_mib();
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * events));
}

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
BENCHMARK(read_replay_compare_1m)->Unit(benchmark::kMillisecond)->UseRealTime();
