// ledger_test.cpp: the per-layer activation ledger against the closed forms of Korthikanti et al.
// (docs/model.md) at several shapes, and the terms that flash attention, no dropout, SwiGLU and grouped
// KV heads change. Beyond the paper the ledger keeps each norm's fp32 statistics for backward: 8 bytes per
// token for a LayerNorm (mean, rstd), 4 for an RMSNorm (rstd), dropped only by full recomputation.
#include "planner/ledger.hpp"

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace headroom {
namespace {

model_spec gpt_like(std::int64_t L, std::int64_t h, std::int64_t a) {
  model_spec m;
  m.name = "t";
  m.layers = L;
  m.hidden = h;
  m.heads = a;
  m.kv_heads = a;
  m.head_dim = h / a;
  m.ffn_hidden = 4 * h;
  m.vocab = 50257;
  return m;
}

// The norm statistics of one layer: `norms` norms x (8 LayerNorm | 4 RMSNorm) bytes x tokens on the rank.
std::int64_t norm_stats(std::int64_t tokens, int norms, bool layernorm) {
  return norms * (layernorm ? 8 : 4) * tokens;
}

struct shape_case {
  std::int64_t L, h, a, s, b;
};
const shape_case cases[] = {{96, 12288, 96, 2048, 1},
                            {48, 6144, 64, 2048, 2},
                            {24, 2048, 16, 4096, 4},
                            {128, 25600, 160, 2048, 1},
                            {12, 768, 12, 1024, 8}};

TEST(Ledger, GptLayerSumsToKorthikantiAtEveryShape) {
  for (auto c : cases) {
    auto m = gpt_like(c.L, c.h, c.a);
    for (int t : {1, 2, 4, 8}) {
      if (c.a % t) continue;
      ledger_shape s{c.s, c.b, t, false, 1, attention_kind::eager, 2};
      auto sums = sum_ledger(layer_ledger(m, s));
      const std::int64_t sbh = c.s * c.b * c.h, as2b = c.a * c.s * c.s * c.b;
      // Without sequence parallel: sbh(10 + 24/t) + 5as^2b/t.
      const std::int64_t stats = norm_stats(c.s * c.b, 2, true);
      EXPECT_EQ(sums.none, 10 * sbh + 24 * sbh / t + 5 * as2b / t + stats) << c.h << " t=" << t;
      EXPECT_EQ(sums.selective, 10 * sbh + 24 * sbh / t + stats);
      EXPECT_EQ(sums.full, 2 * sbh);
      // With sequence parallel everything is divided by t: sbh(34 + 5as/h)/t, selective 34sbh/t.
      s.sp = t > 1;
      auto sp = sum_ledger(layer_ledger(m, s));
      EXPECT_EQ(sp.none, (34 * sbh + 5 * as2b) / t + stats / t);
      EXPECT_EQ(sp.selective, 34 * sbh / t + stats / t);
      EXPECT_EQ(sp.full, 2 * sbh / t);
    }
  }
}

TEST(Ledger, ContextParallelDividesSequenceTerms) {
  auto m = gpt_like(96, 12288, 96);
  auto one = sum_ledger(layer_ledger(m, {32768, 1, 1, false, 1, attention_kind::flash, 2}));
  auto four = sum_ledger(layer_ledger(m, {32768, 1, 1, false, 4, attention_kind::flash, 2}));
  EXPECT_EQ(four.none * 4, one.none);
  EXPECT_EQ(four.full * 4, one.full);
}

TEST(Ledger, FlashAttentionDropsTheSquareTerms) {
  auto m = gpt_like(96, 12288, 96);
  const std::int64_t s = 2048, h = 12288, a = 96;
  auto e = layer_ledger(m, {s, 1, 1, false, 1, attention_kind::flash, 2});
  for (const auto& x : e) EXPECT_EQ(x.name.find("softmax"), std::string::npos) << x.name;
  auto sums = sum_ledger(e);
  EXPECT_EQ(sums.none,
            34 * s * h + 4 * a * s + norm_stats(s, 2, true));  // + fp32 log-sum-exp per head, token
  EXPECT_EQ(sums.selective, 34 * s * h + norm_stats(s, 2, true));
}

TEST(Ledger, NoDropoutDropsTheMasks) {
  auto m = gpt_like(96, 12288, 96);
  m.dropout = false;
  const std::int64_t s = 2048, h = 12288, a = 96;
  auto sums = sum_ledger(layer_ledger(m, {s, 1, 1, false, 1, attention_kind::eager, 2}));
  // 34 - 2 masks (1 byte each); 5as^2b - mask (1) - dropout output (2) = 2as^2b.
  EXPECT_EQ(sums.none, 32 * s * h + 2 * a * s * s + norm_stats(s, 2, true));
}

TEST(Ledger, SwiGluAndGroupedKvHeads) {
  auto m = load_preset("llama2-70b", preset_dir());  // h 8192, 64 heads, 8 kv heads, f 28672
  const std::int64_t s = 4096, h = 8192, kv = 8 * 128, f = 28672;
  auto e = layer_ledger(m, {s, 1, 1, false, 1, attention_kind::flash, 2});
  auto sums = sum_ledger(e);
  // ln1 in, qkv in, q, proj in, ln2 in, fc1 in: 6 x 2sh; k and v: 2 x 2s*kv; gate, up, fc2 in: 3 x 2sf;
  // flash keeps the fp32 log-sum-exp; no dropout.
  EXPECT_EQ(sums.none, 12 * s * h + 4 * s * kv + 6 * s * f + 4 * 64 * s + norm_stats(s, 2, false));
  // tp = 16 > 8 kv heads: each rank keeps one replicated kv head.
  model_spec m2 = m;
  auto t16 = layer_ledger(m2, {s, 1, 8, true, 1, attention_kind::flash, 2});
  for (const auto& x : t16) {
    if (x.name == "attn.k") {
      EXPECT_EQ(x.shape[2], 128);
    }
  }
}

TEST(Ledger, ShapesAreRealAndBytesAreTheirProduct) {
  auto m = gpt_like(96, 12288, 96);
  for (const auto& e : layer_ledger(m, {2048, 2, 4, true, 1, attention_kind::eager, 2})) {
    std::int64_t p = e.dtype_bytes;
    for (auto d : e.shape) p *= d;
    EXPECT_EQ(p, e.bytes) << e.name;
    EXPECT_FALSE(e.formula.empty());
  }
}

TEST(Ledger, LogitsAreTokensTimesVocabOverTpInFp32) {
  auto m = gpt_like(96, 12288, 96);
  EXPECT_EQ(logits_bytes(m, {2048, 1, 1, false, 1, attention_kind::eager, 2}), 2048LL * 50257 * 4);  // 412 MB
  EXPECT_EQ(logits_bytes(m, {2048, 1, 2, false, 1, attention_kind::eager, 2}), 2048LL * 25129 * 4);
}

// The output phase as the loss holds it, against closed forms derived from the two losses' code
// (Megatron's _VocabParallelCrossEntropy; PyTorch's log_softmax + nll_loss on upcast logits).
TEST(Ledger, OutputPhaseAsEachLossHoldsIt) {
  auto m = gpt_like(96, 12288, 96);  // vocab 50257
  const std::int64_t tokens = 2048, v = 50257;
  ledger_shape s{2048, 1, 1, false, 1, attention_kind::eager, 2, loss_kind::fused};
  // fp32 softmax (saved, becomes the gradient in place) + bf16 gradient; per token loss, mask, target.
  EXPECT_EQ(total_bytes(output_phase_tensors(m, s)), tokens * v * (4 + 2) + tokens * (4 + 1 + 8));
  // The same steps compiled (--cross-entropy-loss-fusion): the compiled functions' own fp32 result beside the
  // copy they write it back into, 4 + 4 + 2 bytes per logit.
  s.loss = loss_kind::compiled;
  EXPECT_EQ(total_bytes(output_phase_tensors(m, s)), tokens * v * (4 + 4 + 2) + tokens * (4 + 1 + 8));
  EXPECT_EQ(output_phase_peak(output_phase_tensors(m, s)), total_bytes(output_phase_tensors(m, s)));
  s.loss = loss_kind::unfused;
  // In forward the bf16 logits, their fp32 copy and log_softmax's output (10 bytes); in backward, the peak,
  // log_softmax's saved output, its gradient and the input's gradient (+ the loss); then the bf16 cast.
  const auto phase = output_phase_tensors(m, s);
  // Before them the final norm's fp32 input and bf16 output and the output linear's bf16 input.
  ASSERT_EQ(phase.size(), 10u);
  EXPECT_EQ(phase.front().name, "output.norm.input.fp32");
  EXPECT_EQ(phase.back().name, "output.logits.grad");
  const std::int64_t h = 12288;
  // The backward peak: log_softmax's saved output, its gradient and the input's gradient (+ the loss).
  EXPECT_EQ(output_phase_peak(phase), tokens * v * (4 + 4 + 4) + tokens * 4 + tokens * h * (4 + 2 + 2));
  // Under tp (loss_parallel's handlers): 16 bytes per local logit at the backward peak, the norm sequence-
  // sharded, the output linear's input gathered whole.
  s = {2048, 1, 4, true, 1, attention_kind::eager, 2, loss_kind::unfused};
  const std::int64_t v4 = (50257 + 3) / 4;
  EXPECT_EQ(output_phase_peak(output_phase_tensors(m, s)),
            tokens * v4 * 16 + tokens * 4 + tokens / 4 * h * (4 + 2) + tokens * h * 2);
  // Vocab-parallel: each of 8 tp ranks holds ceil(V / 8) columns; cp divides the tokens.
  s = {2048, 2, 8, true, 2, attention_kind::eager, 2, loss_kind::fused};
  EXPECT_EQ(total_bytes(output_phase_tensors(m, s)), 1024 * 2 * 6283LL * 6 + 1024 * 2 * 13LL);
}

// MPT-7B at 65,536 tokens (the case): the fused loss alone holds 65536 * 50432 * 6 bytes = 18.5 GiB.
TEST(Ledger, LongContextOutputPhase) {
  const model_spec m = load_preset("mpt-7b", preset_dir());
  const ledger_shape s{65536, 1, 1, false, 1, attention_kind::flash, 2, loss_kind::fused};
  const auto bytes = total_bytes(output_phase_tensors(m, s));
  EXPECT_EQ(bytes, 65536LL * 50432 * 6 + 65536LL * 13);
  EXPECT_NEAR(static_cast<double>(bytes) / gib, 18.47, 0.01);
  EXPECT_EQ(sum_peaks(m, s).output_phase, bytes);
}

// The first stage keeps the embedding output's dropout mask per micro-batch in flight (Korthikanti et al.,
// section 4.3: sbhp/t), and nothing when the model has no dropout.
TEST(Ledger, FirstStageKeepsTheEmbeddingDropoutMask) {
  auto m = gpt_like(96, 12288, 96);
  EXPECT_EQ(total_bytes(first_stage_tensors(m, {2048, 2, 1, false, 1, attention_kind::eager, 2})),
            2048 * 2 * 12288);
  EXPECT_EQ(total_bytes(first_stage_tensors(m, {2048, 2, 4, true, 1, attention_kind::eager, 2})),
            512 * 2 * 12288);
  m.dropout = false;
  EXPECT_TRUE(first_stage_tensors(m, {2048, 2, 1, false, 1, attention_kind::eager, 2}).empty());
}

}  // namespace
}  // namespace headroom
