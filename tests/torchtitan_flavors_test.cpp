// torchtitan_flavors_test.cpp: the flavor table (presets/torchtitan/flavors.json, read from torchtitan's
// torchtitan/models/*/__init__.py @ 238fa995) against what it must agree with: the HuggingFace configs and
// presets of the same models in this repository, torchtitan's FFN rounding worked by hand, and its lookups.
#include "planner/imports/torchtitan_flavors.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "planner/errors.hpp"
#include "planner/model_files.hpp"

namespace headroom {
namespace {

const std::string table = torchtitan_flavor_table_path();

model_spec flavor_model(const std::string& name, const std::string& flavor) {
  const auto f = find_torchtitan_flavor(name, flavor, table);
  EXPECT_TRUE(f && f->model) << name << "/" << flavor;
  return f && f->model ? *f->model : model_spec{};
}

std::string hf(const std::string& file) { return std::string(HEADROOM_TEST_DATA) + "/hf/" + file; }

TEST(TorchtitanFlavors, EveryEntryReadsAndNamesItsSource) {
  int models = 0;
  for (const auto& key : torchtitan_flavor_keys(table)) {
    SCOPED_TRACE(key);
    const auto slash = key.find('/');
    const auto f = find_torchtitan_flavor(key.substr(0, slash), key.substr(slash + 1), table);
    ASSERT_TRUE(f);
    EXPECT_TRUE(f->model || !f->not_modelled.empty());
    if (!f->model) continue;
    ++models;
    EXPECT_NE(f->model->source.find("@ 238fa9953e4aec2a62582121564273d7cbb1e9f1"), std::string::npos);
  }
  EXPECT_EQ(models, 32);  // llama3 8, llama4 6, deepseek_v3 5, qwen3 10, gpt_oss 3
}

// Where this repository holds the same model from another source, the shapes agree; the one difference is
// torchtitan's own (its DeepSeek-V3 builds no multi-token-prediction module: models/deepseek_v3/model/model.py).
TEST(TorchtitanFlavors, FlavorsAgreeWithTheHuggingFaceConfigsAndPresetsOfTheSameModel) {
  const std::string presets = preset_dir();
  EXPECT_EQ(shape_difference(flavor_model("qwen3", "30B-A3B"), load_hf_config(hf("qwen3-30b-a3b.json"))), "");
  EXPECT_EQ(shape_difference(flavor_model("gpt_oss", "20b"), load_hf_config(hf("gpt-oss-20b.json"))), "");
  EXPECT_EQ(shape_difference(flavor_model("deepseek_v3", "671B"), load_hf_config(hf("deepseek-v3.json"))),
            "MTP layers 0 and 1");
  EXPECT_EQ(shape_difference(flavor_model("llama4", "17bx16e"), load_hf_config(hf("llama4-scout.json"))), "");
  for (const auto& [flavor, preset] : {std::pair{"8B", "llama3-8b"}, {"70B", "llama3-70b"}, {"405B", "llama3-405b"}})
    EXPECT_EQ(shape_difference(flavor_model("llama3", flavor), load_preset(preset, presets)), "") << flavor;
  EXPECT_EQ(shape_difference(flavor_model("qwen3", "235B-A22B"), load_preset("qwen3-235b-a22b", presets)), "");
  EXPECT_EQ(shape_difference(flavor_model("qwen3", "30B-A3B"), load_preset("qwen3-30b-a3b", presets)), "");
}

// torchtitan's FeedForward (llama3/model/model.py l.324-336 @ 238fa995): 4h, two thirds of it, times
// ffn_dim_multiplier, rounded up to multiple_of; the flavors' multipliers and multiples from llama3/__init__.py.
TEST(TorchtitanFlavors, Llama3FfnWidthsAreTorchtitansRounding) {
  auto ffn = [](std::int64_t dim, double multiplier, std::int64_t multiple_of) {
    std::int64_t h = 2 * (4 * dim) / 3;
    h = static_cast<std::int64_t>(multiplier * static_cast<double>(h));
    return multiple_of * ((h + multiple_of - 1) / multiple_of);
  };
  EXPECT_EQ(flavor_model("llama3", "8B").ffn_hidden, ffn(4096, 1.3, 1024));
  EXPECT_EQ(flavor_model("llama3", "70B").ffn_hidden, ffn(8192, 1.3, 4096));
  EXPECT_EQ(flavor_model("llama3", "405B").ffn_hidden, ffn(16384, 1.2, 4096));
  EXPECT_EQ(ffn(4096, 1.3, 1024), 14336);
}

TEST(TorchtitanFlavors, LookupsAliasesAndNearMisses) {
  // llama3_ft trains llama3's flavors (torchtitan/models/llama3_ft/__init__.py:17).
  EXPECT_EQ(shape_difference(flavor_model("llama3_ft", "8B"), flavor_model("llama3", "8B")), "");
  EXPECT_FALSE(find_torchtitan_flavor("my_model", "8B", table));
  try {
    find_torchtitan_flavor("deepseek_v3", "16b", table);
    ADD_FAILURE() << "an unknown flavor was found";
  } catch (const bad_input& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean '16B'?"), std::string::npos) << e.what();
  }
  const auto flex = find_torchtitan_flavor("deepseek_v3", "16B", table);
  ASSERT_TRUE(flex);
  EXPECT_EQ(flex->attention, attention_kind::flex);
  EXPECT_EQ(find_torchtitan_flavor("llama3", "8B_varlen", table)->attention, attention_kind::flash);
  EXPECT_FALSE(find_torchtitan_flavor("flux", "flux-dev", table)->model);
  EXPECT_NE(find_torchtitan_flavor("gpt_oss", "20b", table)->not_modelled.find("bf16"), std::string::npos);
}

}  // namespace
}  // namespace headroom
