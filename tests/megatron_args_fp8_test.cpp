// megatron_args_fp8_test.cpp: FP8 launches without the distributed optimizer. NVIDIA's Llama 3 8B FP8
// example (tests/data/megatron/train_llama3_8b_h100_fp8.sh, Megatron-LM @ d98e8a64) is read as a user runs it
// with plain DDP: its --use-distributed-optimizer line removed (and the flags Megatron ties to it), as in the
// launch of Megatron-LM issue #1237 ("--bf16 --fp8-format hybrid ... 7B on H100", no distributed optimizer).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "planner/errors.hpp"
#include "planner/imports/megatron_args.hpp"

namespace headroom {
namespace {

std::string fp8ddp_script() {
  std::ifstream in(std::string(HEADROOM_TEST_DATA) + "/megatron/train_llama3_8b_h100_fp8.sh");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Returns `text` without the first occurrence of `line`; fails the test when it is not there.
std::string fp8ddp_without(std::string text, const std::string& line) {
  const auto at = text.find(line);
  EXPECT_NE(at, std::string::npos) << line;
  if (at != std::string::npos) text.erase(at, line.size());
  return text;
}

bool fp8ddp_lists(const std::vector<std::string>& v, const std::string& prefix) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.starts_with(prefix); });
}

// The example under DDP: no distributed optimizer, hence no --fp8-param-gather (Megatron requires the former
// for the latter) and, for the fp32 main gradients Megatron's --bf16 keeps by default, no --grad-reduce-in-bf16.
std::string fp8ddp_ddp_script() {
  std::string s = fp8ddp_without(fp8ddp_script(), "    --use-distributed-optimizer\n");
  s = fp8ddp_without(s, "        \"--fp8-param-gather\"\n");
  return fp8ddp_without(s, "    --grad-reduce-in-bf16\n");
}

TEST(MegatronArgsFp8, DdpLaunchMapsToTheDdpFp8Recipe) {
  const auto l = import_megatron_args(fp8ddp_ddp_script(), "train_llama3_8b_h100_fp8.sh (DDP)");
  EXPECT_EQ(l.recipe, "megatron-fp8");
  EXPECT_EQ(l.zero, 0);         // DDP shards nothing
  EXPECT_EQ(l.fp8, "delayed");  // --fp8-format hybrid, the default recipe
  EXPECT_TRUE(l.unmodelled.empty()) << l.unmodelled.front();
  EXPECT_TRUE(std::any_of(l.derived.begin(), l.derived.end(), [](const import_note& n) {
    return n.field == "recipe" && n.value == "megatron-fp8";
  }));
  // The same launch with the distributed optimizer keeps its recipe (the script as shipped, which also
  // reduces gradients in bf16).
  EXPECT_EQ(
      load_megatron_args(std::string(HEADROOM_TEST_DATA) + "/megatron/train_llama3_8b_h100_fp8.sh").recipe,
      "megatron-distopt-fp8-param-gather-bf16-grads");
}

TEST(MegatronArgsFp8, EveryFp8RecipeOfMegatronPricesAsDdpFp8) {
  const std::string model =
      "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --ffn-hidden-size 11008 --swiglu "
      "--seq-length 4096 --max-position-embeddings 4096 --vocab-size 32000 --micro-batch-size 1 "
      "--global-batch-size 64 --transformer-impl transformer_engine ";
  // Issue #1237's flags, then e4m3 with each --fp8-recipe Megatron accepts (arguments.py --fp8-recipe).
  auto l = import_megatron_args(
      model + "--bf16 --fp8-format hybrid --fp8-amax-history-len 1 --fp8-amax-compute-algo max", "t");
  EXPECT_EQ(l.recipe, "megatron-fp8");
  for (const char* r : {"tensorwise", "delayed", "mxfp8", "blockwise"}) {
    l = import_megatron_args(model + "--bf16 --fp8-format e4m3 --fp8-recipe " + r, "t");
    EXPECT_EQ(l.recipe, "megatron-fp8") << r;
  }
  // fp16 with fp32 gradient accumulation keeps the same buffers (2-byte weights, fp32 main gradients).
  l = import_megatron_args(model + "--fp16 --accumulate-allreduce-grads-in-fp32 --fp8-format hybrid", "t");
  EXPECT_EQ(l.recipe, "megatron-fp8");
}

TEST(MegatronArgsFp8, WhatDdpFp8CannotPriceIsRefusedOrUnmodelled) {
  // --fp8-param-gather without the distributed optimizer: Megatron asserts (arguments.py l.1095-1097).
  const std::string gather = fp8ddp_without(fp8ddp_script(), "    --use-distributed-optimizer\n");
  try {
    import_megatron_args(gather, "t");
    ADD_FAILURE() << "accepted --fp8-param-gather under DDP";
  } catch (const bad_input& e) {
    EXPECT_NE(std::string(e.what()).find("--fp8-param-gather"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--use-distributed-optimizer"), std::string::npos) << e.what();
  }
  // bf16 main gradients under DDP: the step's fp32 copy of every gradient has no FP8 recipe.
  auto l = import_megatron_args(fp8ddp_without(gather, "        \"--fp8-param-gather\"\n"), "t");
  EXPECT_TRUE(fp8ddp_lists(l.unmodelled, "--grad-reduce-in-bf16: ")) << l.recipe.value_or("");
  EXPECT_NE(l.recipe, "megatron-fp8");
  // fp32 parameters (neither --bf16 nor --fp16): no FP8 recipe; the CLI refuses the FP8 request.
  l = import_megatron_args(
      "--num-layers 2 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --max-position-embeddings "
      "128 "
      "--vocab-size 1000 --fp8-format hybrid",
      "t");
  EXPECT_EQ(l.recipe, "fp32-adam");
  EXPECT_EQ(l.fp8, "delayed");
}

}  // namespace
}  // namespace headroom
