// replay_bench.cpp: replay speed of the step trace through the allocator policies (issue 3's target: at
// least 5 million events per second on one core for the caching policy on gpt3-175b, 32 GPUs, ZeRO-3,
// selective recompute), and the time to build that trace.
#include <benchmark/benchmark.h>

#include "planner/model_files.hpp"
#include "probes/allocators/caching_allocator.hpp"
#include "probes/trace/replay.hpp"
#include "probes/devices/sim_device.hpp"
#include "probes/trace/step_trace.hpp"

namespace {

using namespace headroom;
using namespace headroom::probes;

problem gpt3() {
  return default_problem(load_preset("gpt3-175b", preset_dir()));
}

layout zero3_selective_32() {
  layout l;
  l.gpus = 32;
  l.zero = 3;
  l.recompute = recompute_mode::selective;
  return l;
}

void BM_BuildTrace(benchmark::State& state) {
  const problem p = gpt3();
  for (auto _ : state) benchmark::DoNotOptimize(build_trace(p, zero3_selective_32(), 0));
}
BENCHMARK(BM_BuildTrace)->Unit(benchmark::kMillisecond);

// Replays the whole trace on a fresh device and allocator per iteration.
void BM_ReplayCaching(benchmark::State& state) {
  const problem p = gpt3();
  const step_trace t = build_trace(p, zero3_selective_32(), 0);
  caching_options o;
  o.expandable_segments = state.range(0) == 1;
  for (auto _ : state) {
    sim_device dev(p.device.capacity, 2 * mib);
    caching_allocator a(dev, o);
    benchmark::DoNotOptimize(replay(t, a, false));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(t.events.size()));
  state.counters["events"] = static_cast<double>(t.events.size());
}
BENCHMARK(BM_ReplayCaching)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_ReplayRaw(benchmark::State& state) {
  const problem p = gpt3();
  const step_trace t = build_trace(p, zero3_selective_32(), 0);
  for (auto _ : state) {
    sim_device dev(p.device.capacity, 2 * mib);
    auto a = make_raw_allocator(dev);
    benchmark::DoNotOptimize(replay(t, *a, false));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(t.events.size()));
}
BENCHMARK(BM_ReplayRaw)->Unit(benchmark::kMicrosecond);

}  // namespace
