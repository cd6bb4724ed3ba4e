// search_bench.cpp: how fast the planner evaluates layouts and searches them (korthikanti-1t, the largest
// preset; DeepSeek-V3 and Qwen3-30B-A3B for the mixture-of-experts axes). Targets (issues 2 and 30): >= 10
// million layout evaluations per second on one core, MoE axes (ep, expert tp, expert data parallelism, the
// dispatcher) and HSDP included; the whole minimum-GPU search over N up to 16,384 under one second. Every
// benchmark prints its rate as a layouts/s counter.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "planner/estimate.hpp"
#include "planner/model_files.hpp"
#include "planner/suggest.hpp"

namespace {

using namespace headroom;

// Reports `layouts` evaluations as the benchmark's items and as its layouts/s counter (a rate).
void count_layouts(benchmark::State& state, std::int64_t layouts) {
  state.SetItemsProcessed(layouts);
  state.counters["layouts/s"] = benchmark::Counter(static_cast<double>(layouts), benchmark::Counter::kIsRate);
}

problem one_trillion() {
  return default_problem(load_preset("korthikanti-1t", preset_dir()));
}

// One layout evaluation = the worst stage's full breakdown (state, transient, activations, step peak,
// both totals).
void BM_EvaluateLayout(benchmark::State& state) {
  const problem p = one_trillion();
  const auto pc = count_params(p.model);
  struct item {
    layout l;
    activation_sums sums;
    peak_sums peaks;
  };
  std::vector<item> layouts;
  for (int tp : {1, 2, 4, 8})
    for (int pp : {1, 2, 4, 8, 16, 32, 64})
      for (int z = 0; z <= 3; ++z)
        for (auto r : {recompute_mode::none, recompute_mode::selective, recompute_mode::full}) {
          layout l;
          l.gpus = 4096;
          l.tp = tp;
          l.pp = pp;
          l.zero = z;
          l.recompute = r;
          const ledger_shape shape = shape_of(p, l);
          layouts.push_back({l, sum_ledger(layer_ledger(p.model, shape)), sum_peaks(p.model, shape)});
        }
  std::size_t i = 0;
  for (auto _ : state) {
    const auto& x = layouts[i];
    benchmark::DoNotOptimize(evaluate_worst(p, pc, x.sums, x.peaks, x.l));
    if (++i == layouts.size()) i = 0;
  }
  count_layouts(state, static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_EvaluateLayout);

// Times run(N = the benchmark's argument), which returns a suggestion; the items are the layouts evaluated.
// Also counts the fitting layouts of one search.
template <class Run>
void time_search(benchmark::State& state, Run&& run) {
  std::int64_t evaluated = 0, fitting = 0;
  for (auto _ : state) {
    auto s = run(static_cast<int>(state.range(0)));
    evaluated += s.evaluated;
    fitting = s.fit;
    benchmark::DoNotOptimize(s);
  }
  count_layouts(state, evaluated);
  state.counters["fitting"] = static_cast<double>(fitting);
}

// Times search.suggest(N, `top`): every fitting layout is costed and ranked, the first `top` get their full
// breakdown (every one by default, as --json and --top 0 list them).
void time_suggest(benchmark::State& state, const layout_search& search, std::size_t top = SIZE_MAX) {
  time_search(state, [&](int gpus) { return search.suggest(gpus, top); });
}

void BM_Suggest(benchmark::State& state) {
  time_suggest(state, layout_search(one_trillion(), {}, {}));
}
BENCHMARK(BM_Suggest)->Arg(512)->Arg(4096)->Unit(benchmark::kMillisecond);

// --suggest for a mixture-of-experts model (DeepSeek-V3, 256 experts, MLA, MTP on the last stage, the
// distributed optimizer) on 1,024 GPUs: ep and expert tp are searched too, and every stage is evaluated
// (stages of different layer kinds), the slow path.
problem deepseek_v3() {
  problem p = default_problem(load_preset("deepseek-v3", preset_dir()));
  p.precision = load_recipe("megatron-distopt");
  p.training.seq = 4096;
  p.training.global_batch = 8192;
  p.training.attention = attention_kind::flash;
  p.device.capacity = 80LL << 30;
  return p;
}

void BM_SuggestMoe(benchmark::State& state) {
  search_axes axes;
  axes.zero = 1;
  time_suggest(state, layout_search(deepseek_v3(), axes, {}));
}
BENCHMARK(BM_SuggestMoe)->Arg(1024)->Unit(benchmark::kMillisecond);

// The same search ranking every fitting layout but building the full breakdown of the first 20 alone (the
// rows a --top 20 table shows): the ranking keeps 2 x 20 compact records at most.
void BM_SuggestMoeTop20(benchmark::State& state) {
  search_axes axes;
  axes.zero = 1;
  time_suggest(state, layout_search(deepseek_v3(), axes, {}), 20);
}
BENCHMARK(BM_SuggestMoeTop20)->Arg(1024)->Unit(benchmark::kMillisecond);

// Every MoE axis at once on a model whose 48 layers interleave (Qwen3-30B-A3B, 128 experts): ep, expert tp,
// micro-batch, tp, sp, pp, vpp, ZeRO and recompute searched, two HSDP replicas (expert data parallelism
// sharded within each), the all-gather dispatcher and a calibrated reserve, on 256 GPUs.
layout_search qwen3_every_axis() {
  problem p = default_problem(load_preset("qwen3-30b-a3b", preset_dir()));
  p.training.seq = 4096;
  p.training.global_batch = 1024;
  p.training.attention = attention_kind::flash;
  p.training.routing.dispatcher = dispatcher_kind::allgather;
  p.device.capacity = 80LL << 30;
  p.device.reserve.fragmentation = 0.05;
  search_axes axes;
  axes.dp_replicate = 2;
  return layout_search(p, axes, {});
}

void BM_SuggestMoeAxes(benchmark::State& state) {
  time_suggest(state, qwen3_every_axis());
}
BENCHMARK(BM_SuggestMoeAxes)->Arg(256)->Unit(benchmark::kMillisecond);

void BM_SuggestMoeAxesTop20(benchmark::State& state) {
  time_suggest(state, qwen3_every_axis(), 20);
}
BENCHMARK(BM_SuggestMoeAxesTop20)->Arg(256)->Unit(benchmark::kMillisecond);

// The same search as `plan --suggest` runs it (suggest_across): every fitting layout ranked and listed
// (suggestion::ranked, which the table's choice of rows reads), the breakdowns of the first 20 alone built.
void BM_SuggestAcrossMoeAxes(benchmark::State& state) {
  const layout_search search = qwen3_every_axis();
  auto first_rows = [](const suggestion& s) {
    std::vector<std::size_t> rows;
    for (std::size_t i = 0; i < s.ranked.size() && i < 20; ++i) rows.push_back(i);
    return rows;
  };
  time_search(state, [&](int gpus) {
    return suggest_across(search.the_problem(), search.axes(), {}, gpus, {}, false, first_rows);
  });
}
BENCHMARK(BM_SuggestAcrossMoeAxes)->Arg(256)->Unit(benchmark::kMillisecond);

// The MoE search's inner loop alone: whether any layout fits, DeepSeek-V3 (every stage of its own layer
// kinds) for every N from 1 to 1,024 and Qwen3-30B-A3B (every MoE axis, HSDP) from 1 to 256; at 80 GB
// neither fits below a few hundred GPUs, so every layout of those N is evaluated.
void BM_AnyFitsMoe(benchmark::State& state) {
  search_axes axes;
  axes.zero = 1;
  const layout_search deepseek(deepseek_v3(), axes, {});
  const layout_search qwen3 = qwen3_every_axis();
  std::int64_t evaluated = 0;
  for (auto _ : state) {
    for (int n = 1; n <= 1024; ++n) benchmark::DoNotOptimize(deepseek.any_fits(n, evaluated));
    for (int n = 1; n <= 256; ++n) benchmark::DoNotOptimize(qwen3.any_fits(n, evaluated));
  }
  count_layouts(state, evaluated);
}
BENCHMARK(BM_AnyFitsMoe)->Unit(benchmark::kMillisecond);

// --min-gpus as the CLI runs it: from the strict bound upwards, then the power of two.
void BM_MinGpus(benchmark::State& state) {
  const problem p = one_trillion();
  const layout_search search(p, {}, {});
  std::int64_t evaluated = 0;
  for (auto _ : state) {
    auto r = min_gpus(search, 16384);
    evaluated += r.evaluated;
    benchmark::DoNotOptimize(r);
  }
  count_layouts(state, evaluated);
}
BENCHMARK(BM_MinGpus)->Unit(benchmark::kMillisecond);

// The search's inner loop alone: whether any layout fits, for every N from 1 to 2,048 (korthikanti-1t
// first fits far above, so every layout of every N is evaluated: tp, cp, sp, pp, vpp, ZeRO, recompute,
// at the smallest micro-batch). This is the rate the 10 M evaluations / s target is about.
void BM_AnyFits(benchmark::State& state) {
  const problem p = one_trillion();
  const layout_search search(p, {}, {});
  std::int64_t evaluated = 0;
  for (auto _ : state) {
    for (int n = 1; n <= 2048; ++n) benchmark::DoNotOptimize(search.any_fits(n, evaluated));
  }
  count_layouts(state, evaluated);
}
BENCHMARK(BM_AnyFits)->Unit(benchmark::kMillisecond);

// The exhaustive form: --suggest (every layout evaluated, the fitting ones costed and ranked) for every N
// from 1 to 16,384, no bound used.
void BM_SuggestEveryN(benchmark::State& state) {
  const problem p = one_trillion();
  const layout_search search(p, {}, {});
  std::int64_t evaluated = 0;
  for (auto _ : state) {
    for (int n = 1; n <= 16384; ++n) {
      auto s = search.suggest(n);
      evaluated += s.evaluated;
      benchmark::DoNotOptimize(s);
    }
  }
  count_layouts(state, evaluated);
}
BENCHMARK(BM_SuggestEveryN)->Unit(benchmark::kMillisecond);

void BM_LayerLedger(benchmark::State& state) {
  const problem p = one_trillion();
  ledger_shape s{2048, 1, 8, true, 1, attention_kind::eager, 2};
  for (auto _ : state) benchmark::DoNotOptimize(sum_ledger(layer_ledger(p.model, s)));
}
BENCHMARK(BM_LayerLedger);

}  // namespace

BENCHMARK_MAIN();
