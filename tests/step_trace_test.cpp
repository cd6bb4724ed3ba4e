// step_trace_test.cpp: the trace and the planner speak of the same tensors. Over a sweep of presets and
// layouts, dense and mixture-of-experts, the trace's peak live bytes equal the planner's persistent +
// transient + activations + max(backward working set, output phase), stage by stage; and the trace is well
// formed.
#include "probes/trace/step_trace.hpp"

#include <gtest/gtest.h>

#include "planner/errors.hpp"
#include "planner/model_files.hpp"
#include "planner/schedule.hpp"
#include "test_support.hpp"

namespace headroom::probes {
namespace {

problem preset(const std::string& name, attention_kind att = attention_kind::eager) {
  problem p = test::preset_problem(name);
  p.training.seq = std::min<std::int64_t>(p.model.seq, 4096);
  p.training.attention = att;
  p.training.global_batch = 64;
  return p;
}

TEST(StepTrace, PeakEqualsThePlannersTermsOverASweep) {
  struct model_case {
    const char* name;
    attention_kind att;
  };
  int checked = 0;
  for (auto mc :
       {model_case{"gpt3-175b", attention_kind::eager}, model_case{"llama2-70b", attention_kind::flash},
        model_case{"gpt-neox-20b", attention_kind::eager}, model_case{"llama3-8b", attention_kind::flash},
        model_case{"gpt3-1.3b", attention_kind::eager}}) {
    const problem p = preset(mc.name, mc.att);
    for (int tp : {1, 2, 4})
      for (int pp : {1, 2, 4})
        for (int vpp : {1, 2})
          for (int zero : {0, 1, 2, 3})
            for (auto r : {recompute_mode::none, recompute_mode::selective, recompute_mode::full}) {
              if (p.model.layers % (pp * vpp) || (vpp > 1 && pp == 1)) continue;
              layout l;
              l.gpus = tp * pp * 2;
              l.tp = tp;
              l.pp = pp;
              l.vpp = vpp;
              l.zero = zero;
              l.recompute = r;
              const breakdown b = estimate(p, l);
              for (int k = 0; k < pp; ++k) {
                const step_trace t = build_trace(p, l, k);
                const auto& s = b.stages[static_cast<std::size_t>(k)];
                EXPECT_EQ(trace_peak(t).bytes, s.allocator_workspaces + s.persistent + s.transient +
                                                   s.activations + std::max(s.working_set, s.output_phase))
                    << mc.name << " tp=" << tp << " pp=" << pp << " vpp=" << vpp << " zero=" << zero << " "
                    << to_string(r) << " stage " << k;
                EXPECT_EQ(trace_peak(t).bytes, s.step_peak);
                ++checked;
              }
            }
  }
  EXPECT_GT(checked, 900);
}

TEST(StepTrace, WellFormedAndEndsWithOnlyTheState) {
  const problem p = preset("gpt3-175b");
  layout l;
  l.gpus = 32;
  l.pp = 4;
  l.zero = 3;
  l.recompute = recompute_mode::selective;
  const step_trace t = build_trace(p, l, 1);
  std::vector<int> live(t.tensors.size(), 0);
  for (const auto& e : t.events) {
    int& x = live[static_cast<std::size_t>(e.tensor)];
    if (e.kind == event_kind::alloc) {
      EXPECT_EQ(x, 0);
      x = 1;
    } else {
      EXPECT_EQ(x, 1);
      x = 0;
    }
  }
  for (std::size_t i = 0; i < t.tensors.size(); ++i)
    // What stays: the state and the library workspaces (allocated first, kept all run).
    EXPECT_EQ(live[i] == 1, t.tensors[i].name.rfind("state.", 0) == 0 || t.tensors[i].name == "library_workspaces")
        << t.tensors[i].name;
  EXPECT_EQ(t.events.front().when, phase::state);
  EXPECT_EQ(t.events.back().when, phase::optimizer);
  // Stage 1 of 4 warms up 2 micro-batches, so 4 are traced: the 1F1B steady state is reached.
  EXPECT_EQ(t.microbatches_traced, 4);
  for (const auto& x : t.tensors) {
    if (x.shape.empty()) continue;
    std::int64_t prod = x.dtype_bytes;
    for (auto d : x.shape) prod *= d;
    EXPECT_EQ(prod, x.bytes) << x.name;
  }
}

TEST(StepTrace, TensorsCarryTheModelsRealShapes) {
  const problem p = preset("gpt3-175b");
  layout l;
  l.gpus = 8;
  l.tp = 8;
  const step_trace t = build_trace(p, l, 0);
  bool seen = false;
  for (const auto& x : t.tensors)
    if (x.name == "mb0.layer0.attn.softmax.output") {
      EXPECT_EQ(x.shape, (std::vector<std::int64_t>{1, 12, 2048, 2048}));  // 96 heads / tp 8
      seen = true;
    }
  EXPECT_TRUE(seen);
}

TEST(StepTrace, InterleavedFirstStageHoldsTheMegatronWarmUp) {
  problem p = preset("gpt3-175b");
  p.training.global_batch = 1536;
  layout l;
  l.gpus = 32;
  l.pp = 8;
  l.vpp = 3;  // 12 layers per stage, 4 per chunk
  l.zero = 1;
  l.recompute = recompute_mode::selective;
  const breakdown b = estimate(p, l);
  EXPECT_EQ(b.stages[0].layer_activations, 124);  // 96 * (1 + 7/24)
  EXPECT_EQ(trace_peak(build_trace(p, l, 0)).bytes, b.stages[0].step_peak);
  EXPECT_EQ(trace_peak(build_trace(p, l, 5)).bytes, b.stages[5].step_peak);
}

TEST(StepTrace, RejectsWhatItCannotTrace) {
  problem p = preset("gpt3-175b");
  layout l;
  l.gpus = 16;
  l.pp = 4;
  l.vpp = 2;
  p.training.global_batch = 20;  // 5 micro-batches per step: Megatron interleaves only multiples of pp
  EXPECT_THROW(build_trace(p, l, 0), bad_input);
  l.vpp = 1;
  EXPECT_THROW(build_trace(p, l, 4), bad_input);
  l.tp = 5;
  EXPECT_THROW(build_trace(p, l, 0), bad_input);
  // FSDP without resharding after forward: the planner models it, the trace says it does not (yet).
  layout nr = test::make_layout(8, 3, recompute_mode::selective);
  nr.reshard_after_forward = false;
  EXPECT_THROW(build_trace(test::preset_problem("gpt3-1.3b"), nr, 0), bad_input);
}

// Uneven pipelines (schedule.hpp): every stage's trace still peaks at exactly its planner step peak, and
// its layers are the ones the split gives it, numbered from where the split puts the stage.
TEST(StepTrace, UnevenSplitsPeakAtThePlannersStepPeak) {
  problem p = test::preset_problem("gpt3-1.3b");  // 24 layers
  for (const auto& cut : {std::vector<std::int64_t>{5, 7, 7, 5}, std::vector<std::int64_t>{9, 5, 5, 5}}) {
    p.training.split.layers = cut;
    const layout l = test::make_layout(8, 1, recompute_mode::selective, 1, 4);
    const breakdown b = estimate(p, l);
    for (int k = 0; k < 4; ++k) {
      const step_trace t = build_trace(p, l, k);
      EXPECT_EQ(trace_peak(t).bytes, b.stages[static_cast<std::size_t>(k)].step_peak) << "stage " << k;
      std::int64_t first = 0;
      for (int j = 0; j < k; ++j) first += cut[static_cast<std::size_t>(j)];
      const std::string want = "mb0.layer" + std::to_string(first) + ".ln1.input";
      bool found = false;
      for (const auto& x : t.tensors) found = found || x.name == want;
      EXPECT_TRUE(found) << want;
    }
  }
}

// Mixture of experts. DeepSeek-V3 (presets/deepseek-v3.json: layers 0-2 dense, 3-60 MoE, one MTP layer) on
// NVIDIA's ModelZoo layout (tests/data/megatron/DeepSeek-V3.yaml: tp 1, pp 16, ep 64 on 1024 GPUs); 61 layers
// over 16 stages put layers 0-3 on stage 0 (three dense, one MoE) and 58-60 on stage 15 (MoE, and the MTP
// layer's state). Mixtral-8x7B (every layer MoE, 8 experts) at ep 8, interleaved too.
problem moe_preset(const std::string& name, std::int64_t global_batch) {
  problem p = test::preset_problem(name);
  p.training.seq = 4096;
  p.training.attention = attention_kind::flash;
  p.training.global_batch = global_batch;
  return p;
}

layout moe_layout(int gpus, int pp, int ep, int zero, recompute_mode r, int vpp = 1) {
  layout l = test::make_layout(gpus, zero, r, 1, pp);
  l.ep = ep;
  l.vpp = vpp;
  return l;
}

bool has_tensor(const step_trace& t, const std::string& name) {
  for (const auto& x : t.tensors)
    if (x.name == name) return true;
  return false;
}

TEST(StepTrace, MoePresetsPeakAtThePlannersStepPeak) {
  struct moe_case {
    const char* name;
    int gpus, pp, ep, vpp;
    std::int64_t global_batch;
    std::vector<int> stages;
  };
  int checked = 0;
  for (const auto& mc : {moe_case{"deepseek-v3", 1024, 16, 64, 1, 1024, {0, 15}},
                         moe_case{"mixtral-8x7b", 64, 1, 8, 1, 256, {0}},
                         moe_case{"mixtral-8x7b", 64, 4, 8, 1, 256, {0, 1, 3}},
                         moe_case{"mixtral-8x7b", 64, 4, 8, 2, 256, {0, 3}}}) {
    const problem p = moe_preset(mc.name, mc.global_batch);
    for (int zero : {0, 1, 2, 3})
      for (auto r : {recompute_mode::none, recompute_mode::selective, recompute_mode::full}) {
        const layout l = moe_layout(mc.gpus, mc.pp, mc.ep, zero, r, mc.vpp);
        const breakdown b = estimate(p, l);
        for (int k : mc.stages) {
          const auto& s = b.stages[static_cast<std::size_t>(k)];
          ASSERT_GT(s.moe_layers, 0);
          const step_trace t = build_trace(p, l, k);
          EXPECT_EQ(trace_peak(t).bytes, s.allocator_workspaces + s.persistent + s.transient + s.activations +
                                             std::max(s.working_set, s.output_phase))
              << mc.name << " pp=" << mc.pp << " vpp=" << mc.vpp << " zero=" << zero << " " << to_string(r)
              << " stage " << k;
          EXPECT_EQ(trace_peak(t).bytes, s.step_peak);
          ++checked;
        }
      }
  }
  EXPECT_EQ(checked, 4 * 3 * (2 + 1 + 3 + 2));
}

// Megatron's --moe-layer-freq 2 (layer 0 MoE, layer 31 dense) on Mixtral-8x7B's dimensions, full recompute:
// the MoE layer's working set (dispatcher buffers) is the larger, but the stage's last layer is dense, so
// by the time layer 30 runs its backward, layer 31 has freed what it kept: its input, s*b*h*2 bytes
// (full recomputation keeps the layer input only). The trace peaks that much below the planner's step peak,
// which adds the larger working set to every saved tensor; the planner is conservative here, not exact.
TEST(StepTrace, AlternatingLayersPeakBelowThePlannerByTheFreedInput) {
  problem p = moe_preset("mixtral-8x7b", 256);
  p.model.moe.layers = moe_layer_pattern(32, 0, 2, 0);
  const layout l = moe_layout(64, 1, 8, 1, recompute_mode::full);
  const breakdown plan = estimate(p, l);
  const auto& s = plan.stages[0];
  ASSERT_GT(s.working_set, s.output_phase);
  const step_trace t = build_trace(p, l, 0);
  EXPECT_EQ(s.step_peak - trace_peak(t).bytes, 4096LL * 1 * 4096 * 2);
  EXPECT_EQ(
      t.tensors[static_cast<std::size_t>(t.events[trace_peak(t).event].tensor)].name.rfind("mb0.layer30.", 0),
      0u);
}

// Interleaved chunks of different kinds (three dense layers, then MoE): the planner weights each chunk by its
// copies at the end of the warm-up (estimate.cpp), which is where the trace peaks; no recomputation, so the
// saved activations dominate. Checked on every stage, no recompute and selective.
TEST(StepTrace, InterleavedMixedChunksMatchThePlanner) {
  problem p = moe_preset("mixtral-8x7b", 256);
  p.model.moe.layers = parse_layer_pattern("[0]*3+[1]*29", "test");
  for (auto r : {recompute_mode::none, recompute_mode::selective}) {
    const layout l = moe_layout(32, 4, 8, 1, r, 2);
    const auto b = estimate(p, l);
    for (int k = 0; k < l.pp; ++k) {
      const step_trace t = build_trace(p, l, k);
      EXPECT_EQ(b.stages[static_cast<std::size_t>(k)].step_peak, trace_peak(t).bytes)
          << "stage " << k << " " << to_string(r);
    }
  }
}

// Chunks of different sizes (schedule.hpp uneven_chunks): DeepSeek-V3 on Megatron-MoE-ModelZoo's H100 layout
// string "Et|(tt|)*30mL" (pp 8, vpp 4: virtual stages of 1, 30 x 2 and 0 layers). The trace walks each
// chunk's own layers and peaks where the planner says.
TEST(StepTrace, UnevenChunksPeakAtThePlannersStepPeak) {
  problem p = moe_preset("deepseek-v3", 8 * 128);  // dp 128: 8 micro-batches a step
  std::vector<std::int64_t> v(32, 2);
  v.front() = 1;
  v.back() = 0;
  p.training.split.layers = v;
  const layout l = moe_layout(1024, 8, 64, 1, recompute_mode::full, 4);
  ASSERT_FALSE(split_error(p, l));
  const auto b = estimate(p, l);
  for (int k = 0; k < l.pp; ++k) {
    const step_trace t = build_trace(p, l, k);
    EXPECT_EQ(b.stages[static_cast<std::size_t>(k)].step_peak, trace_peak(t).bytes) << "stage " << k;
  }
  // Chunk 1 of stage 0 is virtual stage 8, which starts at layer 1 + 7 x 2 = 15.
  const step_trace t0 = build_trace(p, l, 0);
  bool found = false;
  for (const auto& x : t0.tensors) found = found || x.name.rfind("mb0.layer15.", 0) == 0;
  EXPECT_TRUE(found);
}

// Each layer replays the ledger of its own kind, found by its global index: stage 0 of DeepSeek-V3 holds dense
// layers 0-2 and MoE layer 3; only the MoE layer routes tokens, and only its backward holds the all-to-all
// dispatcher's receive and sort buffers (Megatron-Core's default dispatcher in the ModelZoo launch).
TEST(StepTrace, LayersReplayTheLedgerOfTheirKind) {
  const problem p = moe_preset("deepseek-v3", 1024);
  const step_trace t = build_trace(p, moe_layout(1024, 16, 64, 1, recompute_mode::selective), 0);
  for (int j = 0; j < 3; ++j) {
    const std::string layer = "mb0.layer" + std::to_string(j) + ".";
    EXPECT_TRUE(has_tensor(t, layer + "mlp.fc1.input")) << layer;
    EXPECT_FALSE(has_tensor(t, layer + "moe.router.probs")) << layer;
    EXPECT_FALSE(has_tensor(t, layer + "moe.dispatch.receive")) << layer;
  }
  for (const char* name : {"moe.router.probs", "moe.experts.fc1.input", "moe.shared.fc1.output",
                           "moe.dispatch.receive", "moe.dispatch.sort"})
    EXPECT_TRUE(has_tensor(t, std::string("mb0.layer3.") + name)) << name;
  EXPECT_FALSE(has_tensor(t, "mb0.layer3.mlp.fc1.input"));
  EXPECT_FALSE(has_tensor(t, "mb0.layer4.ln1.input"));  // stage 1's
  // Routed rows: top 8 of 4096 tokens, each 7168 wide in bf16 (docs/model.md, "Routed tokens").
  for (const auto& x : t.tensors) {
    if (x.name == "mb0.layer3.moe.experts.fc1.input") {
      EXPECT_EQ(x.bytes, 8LL * 4096 * 7168 * 2);
    }
  }
}

// The state of a MoE rank is two tensors per buffer: the routed experts' shard over the expert data-parallel
// ranks, dp * tp * cp / (ep * etp) = 64 / 64 = 1 here, the rest over dp = 64 (Megatron-Core parallel_state.py,
// docs/model.md "State sharding"). The experts' parameters, from the config: 256 experts x 3 SwiGLU matrices
// of 7168 x 2048 per MoE layer, over ep 64; stage 15 holds three MoE layers and the MTP layer (a MoE layer).
TEST(StepTrace, MoeStateSplitsIntoTheDenseAndTheExpertsParts) {
  const problem p = moe_preset("deepseek-v3", 1024);
  const layout l = moe_layout(1024, 16, 64, 1, recompute_mode::selective);
  const breakdown b = estimate(p, l);
  const std::int64_t per_moe_layer = 256LL * 3 * 7168 * 2048 / 64;
  for (auto [k, moe_layers] : {std::pair{0, 1}, std::pair{15, 4}}) {
    const int stage = k;  // a lambda below names it (C++20 does not capture structured bindings in clang 14)
    const step_trace t = build_trace(p, l, stage);
    const auto& sb = b.stages[static_cast<std::size_t>(stage)];
    auto bytes_of = [&](const std::string& name) {
      for (const auto& x : t.tensors)
        if (x.name == name) return x.bytes;
      ADD_FAILURE() << "no " << name << " on stage " << stage;
      return std::int64_t{0};
    };
    const std::int64_t experts = moe_layers * per_moe_layer;
    // ZeRO-1 shards the fp32 master and moments (over 1 for the experts), not the bf16 weights and grads.
    EXPECT_EQ(bytes_of("state.bf16 parameters.experts"), 2 * experts) << stage;
    EXPECT_EQ(bytes_of("state.bf16 gradients.experts"), 2 * experts) << stage;
    EXPECT_EQ(bytes_of("state.fp32 master weights.experts"), 4 * experts) << stage;
    EXPECT_EQ(bytes_of("state.Adam v (fp32).experts"), 4 * experts) << stage;
    const std::int64_t dense = sb.params_on_rank - experts;
    EXPECT_EQ(bytes_of("state.bf16 parameters.dense"), 2 * dense) << stage;
    EXPECT_EQ(bytes_of("state.fp32 master weights.dense"), (4 * dense + 63) / 64) << stage;
    std::int64_t state = 0;
    for (const auto& x : t.tensors)
      if (x.name.rfind("state.", 0) == 0) state += x.bytes;
    EXPECT_EQ(state, sb.persistent) << stage;
  }
}

// DeepSpeed's buckets (layout::reduce_bucket, prefetch_bucket, in elements, as the DeepSpeed importer derives
// them). ZeRO-2 with overlap_comm: two copies of reduce_bucket_size 2e8 (DeepSpeed's docs example
// ds_config_zero2.json, tests/deepspeed_config_test.cpp), bf16 gradients, made at each backward: the peak
// grows by 2 x 2e8 x 2 bytes. ZeRO-3: one bucket made with the optimizer, and a prefetch bucket of 5e8
// elements that holds more than the two gathered layers in flight: the peak grows by the reduce bucket and
// the prefetch bucket's bytes beyond those layers.
TEST(StepTrace, DeepSpeedBucketsAddWhatTheyHold) {
  const problem p = test::preset_problem("gpt3-1.3b");
  layout z2 = test::make_layout(8, 2, recompute_mode::selective);
  const std::int64_t plain2 = trace_peak(build_trace(p, z2, 0)).bytes;
  z2.reduce_bucket = 2 * 200'000'000LL;
  const step_trace t2 = build_trace(p, z2, 0);
  EXPECT_EQ(trace_peak(t2).bytes, plain2 + 2 * 200'000'000LL * 2);
  EXPECT_EQ(trace_peak(t2).bytes, estimate(p, z2).stages[0].step_peak);
  EXPECT_TRUE(has_tensor(t2, "mb0.zero.reduce_bucket"));

  layout z3 = test::make_layout(8, 3, recompute_mode::selective);
  const step_trace plain = build_trace(p, z3, 0);
  std::int64_t layer = 0;
  for (const auto& x : plain.tensors)
    if (x.name == "layer0.params.gathered") layer = x.bytes;
  ASSERT_GT(layer, 0);
  z3.reduce_bucket = 2048LL * 2048;  // "auto": hidden^2 (HF's DeepSpeed integration)
  z3.prefetch_bucket = 500'000'000;
  const step_trace t3 = build_trace(p, z3, 0);
  const std::int64_t units = z3.zero3_inflight_units;
  ASSERT_GT(500'000'000LL * 2, units * layer);
  EXPECT_EQ(trace_peak(t3).bytes,
            trace_peak(plain).bytes + 2048LL * 2048 * 2 + (500'000'000LL * 2 - units * layer));
  EXPECT_EQ(trace_peak(t3).bytes, estimate(p, z3).stages[0].step_peak);
  // A prefetch bucket smaller than the layers in flight adds nothing.
  z3.prefetch_bucket = 1000;
  EXPECT_EQ(trace_peak(build_trace(p, z3, 0)).bytes, trace_peak(plain).bytes + 2048LL * 2048 * 2);
}

}  // namespace
}  // namespace headroom::probes
