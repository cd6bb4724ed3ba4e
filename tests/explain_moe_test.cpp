// explain_moe_test.cpp: `plan --explain` for mixture-of-experts models (planner/explain.cpp): section (b)
// gives the ledger of each layer kind the worst stage holds and a true equation for its activations, and
// the "what if" lines never abort the derivation when the toggled layout is one no framework runs. The
// expected counts and bytes are derived by hand from the HF configs (tests/data/hf/SOURCES.md).
#include <gtest/gtest.h>

#include <cstdio>
#include <regex>

#include "planner/estimate.hpp"
#include "planner/explain.hpp"
#include "planner/format.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

using test::make_layout;

bool explain_moe_has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// Returns the problem for an HF config at seq 4096, micro-batch 1, flash attention (the CLI's defaults for
// these models on --gpu-type h100-80gb: max_position_embeddings capped at 4096).
problem explain_moe_problem(const std::string& file) {
  problem p = default_problem(load_hf_config(data + "/hf/" + file));
  p.training.seq = 4096;
  p.training.micro_batch = 1;
  p.training.attention = attention_kind::flash;
  return p;
}

// Returns the "stage K holds ..." line of section (b).
std::string explain_moe_stage_line(const std::string& text) {
  std::smatch m;
  const std::regex line(R"(\n  stage \d+ holds [^\n]*)");
  return std::regex_search(text, m, line) ? m.str().substr(3) : std::string();
}

// The tester's case: Mixtral 8x7B at tp 2 must explain, and say why there is no "without sequence parallel".
TEST(ExplainMoe, TensorParallelMoeSaysWhyThereIsNoSequenceParallelToggle) {
  const auto p = explain_moe_problem("mixtral-8x7b.json");
  auto l = make_layout(64, 1, recompute_mode::full, 2, 4);
  l.ep = 8;
  const auto b = estimate(p, l);
  std::string t;
  ASSERT_NO_THROW(t = explain_plan(p, b));
  EXPECT_TRUE(explain_moe_has(t, "with sequence parallel off instead: not a layout that can run (sp: ")) << t;
  // 32 layers over pp 4: 8 a stage, all MoE (every Mixtral layer routes). Stage 0 keeps min(pp, M) = 4
  // micro-batches of them (M = 1536 / dp 8 = 192), each layer's input only: 2 * s * b * h / t (sequence
  // parallel) = 2 * 4096 * 4096 / 2 = 16 MiB; 32 x 16 MiB = 0.5 GiB.
  ASSERT_EQ(b.worst_stage().stage, 0);
  EXPECT_EQ(b.worst_stage().activations, 32LL * 2 * 4096 * 4096 / 2);
  EXPECT_TRUE(explain_moe_has(t, "a MoE layer (8 of stage 0's 8 layers")) << t;
  EXPECT_FALSE(explain_moe_has(t, "a dense layer (")) << t;
  EXPECT_EQ(
      explain_moe_stage_line(t),
      "stage 0 holds 8 layers (0 dense, 8 MoE) and, in 1F1B with 192 micro-batches per step, keeps 32 layer "
      "activations alive (0 dense, 32 MoE): 32 * 0.016 = 0.5 GiB");
}

// Where sequence parallelism can be toggled (a dense model), the line still prices the other layout.
TEST(ExplainMoe, DenseModelStillPricesTheToggle) {
  auto p = test::preset_problem("llama3-8b");
  p.training.seq = 4096;
  const auto t = explain_plan(p, estimate(p, make_layout(8, 1, recompute_mode::full, 2, 1)));
  EXPECT_TRUE(explain_moe_has(t, "with sequence parallel off instead: activations ")) << t;
  EXPECT_FALSE(explain_moe_has(t, "MoE")) << t;
}

// The tester's second case: Qwen3-30B-A3B, all 48 layers MoE. Section (b) must not list the dense MLP of
// intermediate_size 6144 (no layer has it), and 48 x the MoE layer's bytes must be the stage's total.
TEST(ExplainMoe, AllMoeModelShowsOnlyTheMoeLedgerAndATrueEquation) {
  const auto p = explain_moe_problem("qwen3-30b-a3b.json");
  auto l = make_layout(16, 1, recompute_mode::none);
  l.ep = 16;
  const auto b = estimate(p, l);
  const auto t = explain_plan(p, b);
  EXPECT_FALSE(explain_moe_has(t, "mlp.gate")) << t;
  EXPECT_FALSE(explain_moe_has(t, "6144")) << t;
  EXPECT_TRUE(explain_moe_has(t, "a MoE layer (48 of stage 0's 48 layers")) << t;
  // Routed rows R = k x tokens = 8 x 4096 = 32768 (docs/model.md, "Routed tokens"): the experts' fc1 input
  // is R x h = 32768 x 2048.
  EXPECT_TRUE(explain_moe_has(t, "[32768, 2048]")) << t;
  // The equation: 48 x (the MoE layer's bytes, read back from the text) = the printed total, which is the
  // table's activations.
  const std::string line = explain_moe_stage_line(t);
  double per_layer = 0, total = 0;
  ASSERT_EQ(std::sscanf(line.c_str(), "stage 0 holds 48 layers (0 dense, 48 MoE): 48 * %lf = %lf GiB",
                        &per_layer, &total),
            2)
      << line;
  EXPECT_EQ(gib_str(b.worst_stage().activations), fixed(total, 1)) << line;
  EXPECT_NEAR(48 * per_layer, total, 48 * 0.0005 + 0.05) << line;
  // A Qwen3 MoE layer keeps more than its attention's and router's tensors: at least the four routed
  // tensors of R rows (fc1 input R x h, fc1 output R x 2F, activation R x F, unpermute input R x h), 2 bytes
  // each: 2 x 32768 x (2048 + 1536 + 768 + 2048) bytes = 0.39 GiB a layer.
  EXPECT_GT(per_layer, 2.0 * 32768 * (2048 + 1536 + 768 + 2048) / (1 << 30));
}

// DeepSeek-V3: first_k_dense_replace = 3, so at pp 4 (61 layers: 16, 15, 15, 15) stage 0 holds 3 dense and 13
// MoE layers. Full recompute keeps each layer's input, 2 * 4096 * 7168 bytes, whatever its kind; stage 0
// keeps pp = 4 micro-batches (M = 1536 / dp 256 = 6): 12 dense and 52 MoE layer activations.
TEST(ExplainMoe, DeepSeekStageHoldsBothKinds) {
  const auto p = explain_moe_problem("deepseek-v3.json");
  auto l = make_layout(1024, 1, recompute_mode::full, 1, 4);
  l.ep = 64;
  const auto b = estimate(p, l);
  ASSERT_EQ(b.worst_stage().stage, 0);
  EXPECT_EQ(b.worst_stage().activations, 64LL * 2 * 4096 * 7168);
  const auto t = explain_plan(p, b);
  EXPECT_TRUE(explain_moe_has(t, "a dense layer (3 of stage 0's 16 layers):")) << t;
  EXPECT_TRUE(explain_moe_has(t, "a MoE layer (13 of stage 0's 16 layers")) << t;
  EXPECT_TRUE(explain_moe_has(t, "mlp.gate                      2*s*b*f/t             [4096, 1, 18432]"))
      << t;
  EXPECT_EQ(
      explain_moe_stage_line(t),
      "stage 0 holds 16 layers (3 dense, 13 MoE) and, in 1F1B with 6 micro-batches per step, keeps 64 layer "
      "activations alive (12 dense, 52 MoE): 12 * 0.055 + 52 * 0.055 = 3.5 GiB");
  // Section (d), the last stage: 15 MoE layers, one micro-batch in flight: 15 x 2 * 4096 * 7168 = 0.82 GiB,
  // and the MTP module under full recomputation: its layer's input, enorm's and hnorm's inputs and its output
  // layer's input, 4 x 2 * 4096 * 7168 = 0.22 GiB (docs/model.md, "The MTP modules' activations").
  EXPECT_EQ(b.stages[3].mtp_activations, 4LL * 2 * 4096 * 7168);
  EXPECT_EQ(b.stages[3].activations, (15LL + 4) * 2 * 4096 * 7168);
  EXPECT_TRUE(explain_moe_has(
      t, "activations = 15 layer activations (0 dense, 15 MoE: 15 * 0.055) + MTP modules 0.22 GiB = 1.0 GiB"))
      << t;
}

// Interleaved: pp 4 x vpp 2 with the split 8 8 8 8 | 8 7 7 7 and M = 2048 / 256 = 8. Stage 0 keeps
// min(2 (pp - 1) + (vpp - 1) pp + 1, M vpp) = 11 chunks: copies of chunk 0 (layers 0-7: 3 dense, 5 MoE)
// 1 x 4 + 3 = 7, of chunk 1 (layers 32-39, MoE) 1 x 4 = 4 (schedule.hpp peak_chunk_copies):
// 7 x 3 = 21 dense and 7 x 5 + 4 x 8 = 67 MoE layer activations.
TEST(ExplainMoe, InterleavedStageCountsEachChunksKinds) {
  auto p = explain_moe_problem("deepseek-v3.json");
  p.training.global_batch = 2048;
  p.training.split.layers = {8, 8, 8, 8, 8, 7, 7, 7};
  auto l = make_layout(1024, 1, recompute_mode::none, 1, 4);
  l.ep = 64;
  l.vpp = 2;
  const auto b = estimate(p, l);
  ASSERT_EQ(b.worst_stage().stage, 0);
  const auto t = explain_plan(p, b);
  const std::string line = explain_moe_stage_line(t);
  EXPECT_TRUE(explain_moe_has(line, "keeps 88 layer activations alive (21 dense, 67 MoE): 21 * ")) << line;
  const std::int64_t dense = b.basis.per_layer.none, moe = b.basis.peaks.moe_layer.none;
  EXPECT_EQ(b.worst_stage().activations, 21 * dense + 67 * moe);
  EXPECT_TRUE(explain_moe_has(
      line, " + 67 * " + gib_str(moe, 3) + " = " + gib_str(b.worst_stage().activations) + " GiB"))
      << line;
}

}  // namespace
}  // namespace headroom
