// recipe_test.cpp: the built-in precision recipes and custom recipe files.
#include "planner/recipe.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

TEST(Recipe, BuiltinsHaveTheirPublishedBytes) {
  EXPECT_EQ(load_recipe("bf16-adam").bytes_per_param(), 16);  // ZeRO's 16 Psi
  EXPECT_EQ(load_recipe("fp16-adam").bytes_per_param(), 16);
  EXPECT_EQ(load_recipe("fp32-adam").bytes_per_param(), 16);
  EXPECT_EQ(load_recipe("fp32-adam").activation_bytes, 4);
  EXPECT_EQ(load_recipe("bf16-adam-fp32-grads").bytes_per_param(), 18);
  EXPECT_EQ(load_recipe("bf16-adam8bit").bytes_per_param(), 10);
  for (const auto& n : builtin_recipes()) EXPECT_EQ(load_recipe(n).name, n);
}

TEST(Recipe, ShardingStagesFollowZero) {
  auto r = load_recipe("bf16-adam");
  for (const auto& b : r.buffers) {
    if (b.kind == buffer_kind::params) {
      EXPECT_EQ(b.shard_from, 3);
    }
    if (b.kind == buffer_kind::grads) {
      EXPECT_EQ(b.shard_from, 2);
    }
    if (b.kind == buffer_kind::master || b.kind == buffer_kind::optimizer) {
      EXPECT_EQ(b.shard_from, 1);
    }
  }
}

TEST(Recipe, CustomFileAndErrors) {
  auto r = load_recipe(std::string(HEADROOM_TEST_DATA) + "/recipe_custom.json");
  EXPECT_EQ(r.bytes_per_param(), 12);
  EXPECT_EQ(r.bytes_of(buffer_kind::optimizer), 4);
  EXPECT_THROW(load_recipe("bf17-adam"), bad_input);
  try {
    load_recipe(std::string(HEADROOM_TEST_DATA) + "/bad/recipe_bad_kind.json");
    FAIL();
  } catch (const bad_input& e) {
    EXPECT_NE(std::string(e.what()).find("kind"), std::string::npos);
  }
  EXPECT_THROW(recipe_from_json(nlohmann::json::parse(R"({"buffers": []})"), "r"), bad_input);
  EXPECT_THROW(
      recipe_from_json(nlohmann::json::parse(R"({"buffers": [{"kind": "params", "bytes": -2}]})"), "r"),
      bad_input);
  // A stated ZeRO range the buffers cannot run with: a buffer never sharded stops the recipe at ZeRO 1.
  EXPECT_THROW(recipe_from_json(nlohmann::json::parse(
                                    R"({"zero_stages": [2, 3], "buffers": [{"kind": "grads", "bytes": 4, "shard_from": 4}]})"),
                                "r"),
               bad_input);
}

// `headroom recipes --json` reads back as recipes: every built-in, its bytes per parameter included; a
// stale sum beside edited buffers is refused.
TEST(Recipe, ListedJsonReadsBack) {
  for (const auto& name : builtin_recipes()) {
    const recipe r = load_recipe(name);
    nlohmann::json j = recipe_to_json(r);
    j["bytes_per_param"] = r.bytes_per_param();
    const recipe back = recipe_from_json(j, name);
    EXPECT_EQ(back.bytes_per_param(), r.bytes_per_param()) << name;
    EXPECT_EQ(back.lowest_zero(), r.lowest_zero()) << name;
    EXPECT_EQ(back.highest_zero(), r.highest_zero()) << name;
    EXPECT_EQ(back.trains_in_fp8(), r.trains_in_fp8()) << name;
    j["bytes_per_param"] = r.bytes_per_param() + 1;
    EXPECT_THROW(recipe_from_json(j, name), bad_input) << name;
  }
}

// Framework recipes against the figures their sources state. Megatron-LM's distributed optimizer
// (Megatron-LM:docs/source/distrib_optimizer.md): 6 + 12/d bytes a parameter, bf16 params, fp32 grads.
// OPT-175B's fp16 weights with fp32 Adam state and no master copy: 12 bytes, all shardable.
TEST(Recipe, FrameworkRecipesMatchTheirSources) {
  problem p = test::preset_problem("gpt3-13b");
  for (int d : {2, 8, 64}) {
    p.precision = load_recipe("megatron-distopt");
    layout l = test::make_layout(d, 1, recompute_mode::selective);
    const auto w = estimate(p, l).worst_stage();
    const std::int64_t psi = w.params_on_rank;
    // 6 bytes whole; fp32 master, m and v each a buffer of ceil(4 psi / d).
    EXPECT_EQ(w.persistent, 6 * psi + 3 * ((4 * psi + d - 1) / d)) << d;
    p.precision = load_recipe("fp16-nomaster");
    l.zero = 3;
    EXPECT_EQ(estimate(p, l).worst_stage().persistent, (2 * psi + d - 1) / d * 2 + (4 * psi + d - 1) / d * 2)
        << d;
  }
  EXPECT_EQ(load_recipe("megatron-distopt").bytes_per_param(), 18);
  EXPECT_EQ(load_recipe("deepspeed-bf16").bytes_per_param(), 20);
  EXPECT_EQ(load_recipe("fp16-nomaster").bytes_per_param(), 12);
  EXPECT_EQ(describe_sharding(load_recipe("megatron-distopt").buffers[1]), "never sharded");
}

// Whatever the name, one not found is bad input "unknown recipe" (a name longer than a file name may be
// was a filesystem exception, exit 1); a directory or a FIFO where a recipe file is expected is refused.
TEST(Recipe, NamesNotFoundAndNonFilesAreBadInput) {
  for (const std::string& name : {std::string(5000, 'r'), std::string(100000, 'r'), std::string(""),
                                  std::string("bf16-adam "), std::string("no/such/recipe.json")}) {
    try {
      load_recipe(name);
      ADD_FAILURE() << "accepted a recipe named " << name.substr(0, 40);
    } catch (const bad_input& e) {
      EXPECT_NE(std::string(e.what()).find("unknown recipe"), std::string::npos) << e.what();
      EXPECT_LT(std::string(e.what()).size(), 400u);
    }
  }
  try {
    load_recipe(std::string(HEADROOM_TEST_DATA) + "/bad");
    ADD_FAILURE() << "accepted a directory";
  } catch (const bad_input& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace headroom
