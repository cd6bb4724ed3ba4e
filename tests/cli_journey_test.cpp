// cli_journey_test.cpp: issue 33 items 4, 6 and 8, the journey of planning Qwen3-30B-A3B on 16 H100 80GB
// from an HF config and from Megatron-MoE-ModelZoo's launch (tests/data/megatron/Qwen3-30B-A3B.yaml): the
// defaults a 2026 user runs, the title naming the model, the assumptions stating dropout and the assumed
// capacity, rankings without rows the user cannot tell apart, node-sized GPU counts, tables within 120
// columns.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "cli_support.hpp"

namespace {

const std::string qwen_hf = " --hf-config " + data + "/hf/qwen3-30b-a3b.json";
// ModelZoo's YAML with the variables its runtime.conf gives Qwen3-30B-A3B on 16 GPUs (EP 8, no pipeline).
const std::string qwen_megatron = " --megatron-args " + data +
                                  "/megatron/Qwen3-30B-A3B.yaml --megatron-var TP=1 --megatron-var PP=1 "
                                  "--megatron-var EP=8 --megatron-var CP=1 --megatron-var LAYERS_PER_VP=false "
                                  "--megatron-var MBS=1 --megatron-var GBS=256 --megatron-var SEQ_LEN=4096 "
                                  "--megatron-var MOE_TOKEN_DISPATCHER=alltoall --megatron-var MOE_GROUPED_GEMM=true";

// Returns the lines of `text`.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> v;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

// Returns the table rows (lines ending in a cost or a verdict) of a --suggest output.
std::vector<std::string> ranked_rows(const std::string& out) {
  std::vector<std::string> rows;
  for (const auto& l : lines_of(out))
    if (l.find("  yes ") != std::string::npos || l.find("  tight ") != std::string::npos) rows.push_back(l);
  return rows;
}

TEST(Journey, HfConfigPlansFlashAttentionAndNamesTheModel) {
  const auto r = run("plan" + qwen_hf + " --gpus 16 --gpu-type h100-80gb --ep 8 --recompute full --zero 1");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("headroom plan: qwen3-30b-a3b, 16 GPUs, ", 0), 0u) << r.out;  // the file, not qwen3_moe
  EXPECT_NE(r.out.find("flash attention\n"), std::string::npos);
  EXPECT_NE(r.out.find("attention   flash: no s x s scores are kept (--attention eager); transformers' default"),
            std::string::npos);
  EXPECT_NE(r.out.find("dropout     off: no masks are kept; the HF config's"), std::string::npos);
  EXPECT_EQ(r.out.find("assumed: no --gpu-type"), std::string::npos);  // a GPU type was given
  // --attention still chooses: eager keeps the s x s scores, so the activations grow.
  const auto eager = run("plan" + qwen_hf + " --gpus 16 --gpu-type h100-80gb --ep 8 --attention eager");
  EXPECT_NE(eager.out.find("attention   eager"), std::string::npos) << eager.out;
}

TEST(Journey, MegatronLaunchIsNamedByItsFileAndStatesItsDropout) {
  const auto r = run("plan" + qwen_megatron + " --gpu-type h100-80gb --gpus 16");
  ASSERT_EQ(r.status, 3) << r.err;  // no recompute: does not fit, with levers
  EXPECT_EQ(r.out.rfind("headroom plan: Qwen3-30B-A3B, 16 GPUs, ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("dropout     off: no masks are kept; the launch sets --attention-dropout"),
            std::string::npos);
  // Without dropout flags Megatron applies 0.1 to both, and the assumptions say so and how to change it.
  const auto d = run(
      "plan --megatron-args \"--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
      "--max-position-embeddings 2048 --vocab-size 32000 --micro-batch-size 1 --global-batch-size 64 --bf16\" "
      "--gpu-type h100-80gb --gpus 8");
  ASSERT_EQ(d.status, 0) << d.err;
  EXPECT_NE(d.out.find("dropout     on: its masks are kept for backward; Megatron's --attention-dropout and "
                       "--hidden-dropout, 0.1 each"),
            std::string::npos)
      << d.out;
  // No --attention-backend: Megatron's auto backend runs TransformerEngine's fused kernels, not eager.
  EXPECT_NE(d.out.find("flash attention\n"), std::string::npos) << d.out;
}

TEST(Journey, NoGpuTypeSaysTheCapacityWasAssumed) {
  const auto r = run("plan" + qwen_hf + " --gpus 16 --ep 8 --recompute full --zero 1");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("headroom plan: qwen3-30b-a3b, 16 GPUs (192 GiB each, assumed: no --gpu-type), "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("GPU memory  192.0 GiB assumed, no --gpu-type or --gpu-mem given"), std::string::npos);
  const auto s = run("plan" + qwen_hf + " --gpus 16 --suggest --top 3");
  EXPECT_NE(s.out.find("on 16 GPUs (192 GiB each, assumed: no --gpu-type), seq"), std::string::npos) << s.out;
}

// The ranking lists one row per layout that a user can tell apart: DDP, ZeRO-1 and ZeRO-2 of the same axes
// cost the same, so only the one with the most headroom is listed, and the table says how many it left out.
// The rows it lists by default stay on one line each within 120 columns.
TEST(Journey, RankingListsNoRowTheUserCannotTellApart) {
  const auto r = run("plan" + qwen_hf + " --gpus 16 --gpu-type h100-80gb --suggest --top 0");
  ASSERT_EQ(r.status, 0) << r.err;
  std::set<std::string> seen;  // the words of a DDP / ZeRO-1 / ZeRO-2 row that are not its memory figures
  for (const auto& row : ranked_rows(r.out)) {
    if (row.rfind("ZeRO-3", 0) == 0 || row.find(" + ") == std::string::npos) continue;
    std::istringstream words(row.substr(row.find(" + ")));
    std::string key, w, last;
    while (words >> w) {
      if (w.find_first_of("abcdefghijklmnopqrstuvwxyz=") != std::string::npos && w != "yes") key += w + " ";
      last = w;
    }
    EXPECT_TRUE(seen.insert(key + last).second) << "listed twice under DDP / ZeRO-1 / ZeRO-2: " << row;
  }
  EXPECT_NE(r.out.find("of them not listed: a listed layout under a lower ZeRO stage"), std::string::npos);
  // The table as printed by default (its first rows and the best of each strategy) stays on one line a row.
  const auto shown = run("plan" + qwen_hf + " --gpus 16 --gpu-type h100-80gb --suggest");
  const auto lines = lines_of(shown.out);
  bool in_table = false;
  for (const auto& l : lines) {
    if (l.rfind("---", 0) == 0) in_table = !in_table;
    if (!in_table) continue;
    EXPECT_LE(l.size(), 120u) << l;
    EXPECT_NE(l.front(), ' ') << "a wrapped row: " << l;
  }
  // A Megatron launch runs DDP or its distributed optimizer (ZeRO-1): never ZeRO-2 or ZeRO-3.
  const auto m = run("plan" + qwen_megatron + " --gpu-type h100-80gb --gpus 16 --suggest --top 0");
  EXPECT_EQ(m.out.find("ZeRO-2"), std::string::npos) << m.out;
  EXPECT_EQ(m.out.find("ZeRO-3"), std::string::npos) << m.out;
}

// --min-gpus rounds to whole nodes of 8 H100s and says the rule; the bound's line does not print a search
// result as if it were derived.
TEST(Journey, MinGpusRoundsToWholeNodes) {
  const auto r = run("plan" + qwen_hf + " --gpu-type h100-80gb --min-gpus --top 1");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("N >= 455.0 / 68.9 = 6.6   ->  N >= 7  ->  N >= 8 in whole nodes of 8 (--gpus-per-node)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("smallest count in whole nodes of 8 with a fitting layout (--gpus-per-node): N = 8 "),
            std::string::npos);
  EXPECT_EQ(r.out.find("power of two"), std::string::npos);
  const auto four = run("plan" + qwen_hf + " --gpu-type h100-80gb --gpus-per-node 4 --min-gpus --top 1");
  EXPECT_NE(four.out.find("N >= 8 in whole nodes of 4"), std::string::npos) << four.out;
}

}  // namespace
