// recipe_test.cpp: the built-in precision recipes and custom recipe files.
#include "planner/recipe.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "planner/errors.hpp"

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
    if (b.kind == buffer_kind::params) EXPECT_EQ(b.shard_from, 3);
    if (b.kind == buffer_kind::grads) EXPECT_EQ(b.shard_from, 2);
    if (b.kind == buffer_kind::master || b.kind == buffer_kind::optimizer) EXPECT_EQ(b.shard_from, 1);
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
}

}  // namespace
}  // namespace headroom
