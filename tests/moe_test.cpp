// moe_test.cpp: mixture-of-experts and multi-latent attention in the planner, against independent
// derivations: NVIDIA's per-tensor tally for a DeepSeek-V3 layer (yanring/Megatron-MoE-ModelZoo
// misc/tools/deepseek_mem_estimate.py, lines 163-202 and its recompute savings, lines 250-291, as
// docs/model.md quotes them), Megatron-Core's sharding rules (parallel_state.py: expert data parallel =
// dp * tp * cp / (ep * etp)), and hand counts of a toy model.
#include <gtest/gtest.h>

#include <map>

#include "planner/estimate.hpp"
#include "planner/ledger.hpp"
#include "planner/problem_json.hpp"
#include "planner/suggest.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

using test::preset_problem;
constexpr double MiB_d = 1024.0 * 1024.0;

// The DeepSeek-V3 layer NVIDIA's script tallies: s 4096, b 1, t = etp = 1, ep 64, bf16, no recomputation.
ledger_shape deepseek_shape() {
  ledger_shape s(4096, 1, 1, false, 1, attention_kind::flash, 2);
  s.ep = 64;
  s.etp = 1;
  return s;
}

TEST(Moe, DeepSeekV3LayerMeetsNvidiasTally) {
  const auto p = preset_problem("deepseek-v3");
  const auto ledger = layer_ledger(p.model, deepseek_shape(), true);
  const auto e = test::bytes_by_name(ledger);
  // The routed path, from the script's formulas (s/t * etp * k rows; h 7168, k 8, F 2048):
  const std::int64_t s = 4096, h = 7168, k = 8, F = 2048;
  EXPECT_EQ(e.at("moe.experts.fc1.input"), 2 * s * k * h);        // permute out: 448 MiB
  EXPECT_EQ(e.at("moe.experts.fc1.output"), 2 * s * k * 2 * F);   // expert fc1 out: 256 MiB
  EXPECT_EQ(e.at("moe.experts.act.output"), 2 * s * k * F);       // expert act out: 128 MiB
  EXPECT_EQ(e.at("moe.unpermute.input"), 2 * s * k * h);          // unpermute a2a out: 448 MiB
  EXPECT_EQ(e.at("moe.shared.fc1.output") + e.at("moe.shared.act.output"), 2 * s * 3 * 2048);  // 32 + 16
  EXPECT_EQ(e.at("moe.routing_map"), 8 * s * 256);                // the int64 row map: 8 MiB
  EXPECT_EQ(e.at("attn.q") + e.at("attn.k") + e.at("attn.v"), 2 * s * 128 * (192 + 192 + 128));  // 512 MiB
  // The whole layer: the script's table sums to 2,234 MiB (it prints 2,236); ours adds the rotary part of
  // kv_down (0.5 MiB), the flash kernel's fp32 log-sum-exp (2 MiB) and two norms' fp32 statistics (32 KiB)
  // the table leaves out: 2,236.53 MiB, within 0.6 MiB of the printed total.
  const double total = static_cast<double>(total_bytes(ledger)) / MiB_d;
  EXPECT_NEAR(total, 2234.0 + 0.5 + 2.0 + 1.0 / 32, 0.01);
}

TEST(Moe, RecomputeModulesDropWhatMegatronSays) {
  // The script's savings per layer per micro-batch: moe_act 144 MiB, layernorm 112, mla_up_proj 512.
  const auto p = preset_problem("deepseek-v3");
  const auto ledger = layer_ledger(p.model, deepseek_shape(), true);
  const std::int64_t none = sum_ledger(ledger, 0).selective;
  auto saved = [&](recompute_module m) {
    return static_cast<double>(none - sum_ledger(ledger, module_bit(m)).selective) / MiB_d;
  };
  EXPECT_DOUBLE_EQ(saved(recompute_module::moe_act), 144.0);
  EXPECT_DOUBLE_EQ(saved(recompute_module::layernorm), 112.0 + 12.0 + 4.0);  // + the q and kv latent norms
  EXPECT_DOUBLE_EQ(saved(recompute_module::mla_up_proj), 512.0);
  // Full recomputation keeps the layer's input alone: 56 MiB, the script's "full recompute" per layer.
  EXPECT_DOUBLE_EQ(static_cast<double>(sum_ledger(ledger).full) / MiB_d, 56.0);
}

TEST(Moe, RoutedRowsFollowTopKEtpOverTpCp) {
  const auto p = preset_problem("mixtral-8x7b");  // k 2, 8 experts
  ledger_shape s(8192, 2, 4, true, 2, attention_kind::flash, 2);
  s.etp = 2;
  EXPECT_EQ(routed_rows(p.model, s), 2 * (8192 / 2 / 4) * 2 * 2);  // k * s*b/(t*c) * etp
  s.routing.imbalance = 1.5;
  EXPECT_EQ(routed_rows(p.model, s), 3 * (8192 / 2 / 4) * 2 * 2);  // 1.5 x the balanced rows
  s.routing = {};
  s.routing.capacity_factor = 1.25;
  s.routing.pad_to_capacity = true;
  // ceil(tokens * k * cf / E) per expert, E experts, times etp: tokens 2048, ceil(2048*2*1.25/8) = 640.
  EXPECT_EQ(routed_rows(p.model, s), 640 * 8 * 2);
}

TEST(Moe, ExpertParallelismShrinksStateNotActivations) {
  auto p = preset_problem("mixtral-8x7b");
  p.precision = load_recipe("megatron-distopt");
  p.training.seq = 4096;
  p.training.global_batch = 256;
  layout l;
  l.gpus = 64;
  l.pp = 4;
  l.zero = 1;
  l.recompute = recompute_mode::selective;
  std::int64_t last_state = INT64_MAX, activations = -1;
  for (int ep : {1, 2, 4, 8}) {
    l.ep = ep;
    const auto b = estimate(p, l);
    const auto& w = b.stages[1];
    if (activations < 0) activations = w.activations;
    EXPECT_EQ(w.activations, activations) << "ep " << ep;  // the all-to-all trades tokens, keeps them
    EXPECT_LT(w.state, last_state) << "ep " << ep;
    last_state = w.state;
  }
}

TEST(Moe, ExpertStateShardsOverExpertDataParallelRanks) {
  // A toy model counted by hand: h 64, 4 heads, ffn 256, SwiGLU, RMSNorm, no bias, untied, vocab 1000,
  // 4 layers, all MoE with 8 experts of width 128, top 2.
  auto p = preset_problem("mixtral-8x7b");
  auto& m = p.model;
  m.layers = 4;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 4;
  m.head_dim = 16;
  m.ffn_hidden = 256;
  m.vocab = 1000;
  m.moe.experts = 8;
  m.moe.top_k = 2;
  m.moe.expert_ffn = 128;
  m.moe.layers.assign(4, true);
  const auto pc = count_params(m);
  const std::int64_t attn = 4 * 64 * 64, norms = 2 * 64, router = 64 * 8, expert = 3 * 64 * 128;
  EXPECT_EQ(pc.moe_layer.sharded, attn);
  EXPECT_EQ(pc.moe_layer.replicated, norms + router);
  EXPECT_EQ(pc.moe_layer.expert, 8 * expert);
  EXPECT_EQ(pc.total, 4 * (attn + norms + router + 8 * expert) + 2 * 1000 * 64 + 64);
  EXPECT_EQ(pc.active, 4 * (attn + norms + router + 2 * expert) + 2 * 1000 * 64 + 64);
  // tp 2, ep 4, etp 1 on 16 GPUs (dp 8): the expert data-parallel degree is 8 * 2 / (4 * 1) = 4.
  p.precision = load_recipe("megatron-distopt");
  p.training.seq = 64;
  p.training.global_batch = 64;
  layout l;
  l.gpus = 16;
  l.tp = 2;
  l.ep = 4;
  l.etp = 1;
  l.zero = 1;
  EXPECT_EQ(l.expert_shard_degree(), 4);
  const auto b = estimate(p, l);
  const auto& w = b.stages[0];
  const std::int64_t expert_on_rank = 4 * 8 * expert / 4;  // experts / (ep * etp)
  const std::int64_t dense_on_rank = (4 * attn + 2 * 1000 * 64) / 2 + 4 * (norms + router) + 64;
  EXPECT_EQ(w.expert_params_on_rank, expert_on_rank);
  EXPECT_EQ(w.params_on_rank, dense_on_rank + expert_on_rank);
  // fp32 master: dense over dp * cp = 8, experts over the expert data-parallel 4.
  EXPECT_EQ(w.master, 4 * dense_on_rank / 8 + 4 * expert_on_rank / 4);
  EXPECT_EQ(w.params, 2 * (dense_on_rank + expert_on_rank));  // distopt keeps bf16 weights whole
}

// DeepSeek-V3 under Megatron's distributed optimizer at s 4096 on 1024 GPUs, pp 16, ep 64, ZeRO-1.
problem deepseek_pp16_problem() {
  auto p = preset_problem("deepseek-v3");
  p.precision = load_recipe("megatron-distopt");
  p.training.seq = 4096;
  p.training.global_batch = 8192;
  p.training.attention = attention_kind::flash;
  return p;
}
layout deepseek_pp16_layout(recompute_mode r) {
  layout l;
  l.gpus = 1024;
  l.pp = 16;
  l.ep = 64;
  l.zero = 1;
  l.recompute = r;
  return l;
}

TEST(Moe, DeepSeekV3StagesPlaceDenseLayersFirstAndMtpLast) {
  const auto p = deepseek_pp16_problem();
  const auto b = estimate(p, deepseek_pp16_layout(recompute_mode::full));
  EXPECT_EQ(b.stages[0].layers, 4);
  EXPECT_EQ(b.stages[0].moe_layers, 1);  // layers 0-2 dense, layer 3 MoE
  EXPECT_EQ(b.stages[1].moe_layers, 4);
  const auto pc = count_params(p.model);
  // The last stage holds the MTP module's experts too: (3 + 1) MoE layers' experts / ep.
  EXPECT_EQ(b.stages[15].expert_params_on_rank, (3 * pc.moe_layer.expert + pc.mtp.expert) / 64);
  // Every stage was evaluated, and the worst is the one with the largest total.
  for (const auto& s : b.stages) EXPECT_LE(s.decisive_total(), b.worst_stage().decisive_total());
}

// The MTP module on the last stage (Megatron's MultiTokenPredictionLayer @ d98e8a64): per micro-batch in
// flight, one MoE layer of the last layer's kind plus its own tensors, by hand: enorm and hnorm inputs, the
// final norm's and the output layer's inputs (2sbh each), eh_proj's input (2 x 2sbh) and three fp32 norm
// statistics (12sb); under full recomputation the two inputs and the output layer's. Its loss keeps one more
// fp32 softmax (4 bytes per logit) and its per-token terms beside the main loss.
TEST(Moe, MtpModuleOnTheLastStageByHand) {
  const auto p = deepseek_pp16_problem();
  const ledger_shape s = deepseek_shape();
  const std::int64_t sbh = 4096LL * 1 * 7168, sb = 4096;
  const auto mtp = sum_ledger(mtp_module_tensors(p.model, s));
  EXPECT_EQ(mtp.none, 2 * sbh * (1 + 1 + 2 + 1 + 1) + 12 * sb);
  EXPECT_EQ(mtp.full, 2 * sbh * 3);
  const auto phase = output_phase_tensors(p.model, s);
  const std::int64_t v = 129280;
  EXPECT_EQ(output_phase_peak(phase), sb * v * (4 + 2) + sb * 13 + sb * v * 4 + sb * 13);
  const layout l = deepseek_pp16_layout(recompute_mode::none);
  const auto b = estimate(p, l);
  const auto& last = b.stages[15];
  const auto per_moe_layer = sum_peaks(p.model, shape_of(p, l)).moe_layer.none;
  // 1F1B: one micro-batch in flight on the last stage; its three MoE layers and the MTP module.
  EXPECT_EQ(last.mtp_activations, per_moe_layer + sum_ledger(mtp_module_tensors(p.model, shape_of(p, l))).none);
  EXPECT_EQ(last.activations, 3 * per_moe_layer + last.mtp_activations);
  EXPECT_EQ(b.stages[14].mtp_activations, 0);
}

TEST(Moe, LayoutRulesRefuseWhatMegatronRefuses) {
  auto dense = preset_problem("llama3-8b");
  layout l;
  l.gpus = 8;
  l.ep = 2;
  EXPECT_TRUE(layout_error(dense, l).has_value());  // no experts to divide
  auto p = preset_problem("mixtral-8x7b");
  l.ep = 3;  // 8 experts
  EXPECT_TRUE(layout_error(p, l).has_value());
  l.ep = 8;
  l.gpus = 4;  // ep 8 does not divide dp * tp * cp = 4
  EXPECT_TRUE(layout_error(p, l).has_value());
  l.gpus = 16;
  l.tp = 2;
  l.ep = 4;
  l.sequence_parallel = false;  // MoE with tp > 1 needs sequence parallelism
  EXPECT_TRUE(layout_error(p, l).has_value());
  l.sequence_parallel = true;
  EXPECT_FALSE(layout_error(p, l).has_value());
}

TEST(Moe, SearchFindsExpertParallelLayouts) {
  auto p = preset_problem("mixtral-8x7b");
  p.precision = load_recipe("megatron-distopt");
  p.training.seq = 4096;
  p.training.global_batch = 256;
  p.device.capacity = 80LL << 30;
  search_axes axes;
  axes.zero = 1;
  const layout_search search(p, axes, {});
  const auto s = search.suggest(32);
  ASSERT_FALSE(s.fitting.empty());
  bool any_ep = false;
  for (const auto& c : s.fitting) any_ep = any_ep || c.where.ep > 1;
  EXPECT_TRUE(any_ep);
  // The fast figure equals the full estimate for the ranked first layout.
  const auto& best = s.fitting.front();
  EXPECT_EQ(best.worst.decisive_total(), estimate(search.problem_of(best), best.where).worst_stage().decisive_total());
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

// A MoE plan written as a record writes it (problem_json.hpp) and read back is the same plan: ep, expert
// tp, replicas, buckets, recompute modules, routing and the FP8 recipe's fields all survive.
TEST(Moe, ProblemAndLayoutJsonKeepEveryMoeAndFp8Field) {
  auto p = preset_problem("deepseek-v3");
  p.precision = load_recipe("megatron-distopt-fp8-param-gather");
  p.training.seq = 4096;
  p.training.global_batch = 8192;
  p.training.recompute_modules = module_bit(recompute_module::moe_act) | module_bit(recompute_module::layernorm);
  p.training.routing.imbalance = 1.25;
  p.training.routing.dispatcher = dispatcher_kind::allgather;
  layout l;
  l.gpus = 1024;
  l.pp = 16;
  l.ep = 16;  // ep x etp = 32 of the 64 ranks of a stage: an expert data-parallel degree of 2, one per replica
  l.etp = 2;
  l.tp = 2;
  l.zero = 1;
  l.dp_replicate = 2;
  l.recompute = recompute_mode::selective;
  const problem q = problem_from_json(problem_to_json(p), "p");
  const layout m = layout_from_json(layout_to_json(l), "l");
  EXPECT_EQ(m.ep, 16);
  EXPECT_EQ(m.expert_tp(), 2);
  EXPECT_EQ(m.dp_replicate, 2);
  EXPECT_EQ(q.training.recompute_modules, p.training.recompute_modules);
  EXPECT_EQ(q.precision.linear_only, p.precision.linear_only);
  EXPECT_EQ(q.precision.other_only, p.precision.other_only);
  EXPECT_TRUE(q.precision.fp8_activations);
  const auto a = estimate(p, l), b = estimate(q, m);
  for (std::size_t k = 0; k < a.stages.size(); ++k)
    EXPECT_EQ(a.stages[k].decisive_total(), b.stages[k].decisive_total()) << "stage " << k;
}

}  // namespace
}  // namespace headroom
