// model_files_test.cpp: presets, model files and HuggingFace import, including every kind of bad file.
#include "planner/model_files.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>

#include "planner/errors.hpp"

namespace headroom {
namespace {

const std::string data = HEADROOM_TEST_DATA;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const bad_input& e) {
    return e.what();
  }
  return "";
}

TEST(Presets, EveryPresetLoadsAndValidates) {
  auto names = list_presets(preset_dir());
  EXPECT_GE(names.size(), 21u);
  for (const auto& n : names) {
    SCOPED_TRACE(n);
    auto m = load_preset(n, preset_dir());
    EXPECT_EQ(m.name, n);
    EXPECT_FALSE(m.source.empty());
    EXPECT_GT(count_params(m).total, 0);
  }
  for (auto required : {"gpt3-175b", "korthikanti-22b", "korthikanti-175b", "korthikanti-530b",
                        "korthikanti-1t", "llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b",
                        "llama3-405b", "bloom-176b", "opt-175b", "gpt-neox-20b"})
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
}

TEST(Presets, UnknownPresetNamesTheKnownOnes) {
  auto msg = error_of([] { load_preset("gpt5", preset_dir()); });
  EXPECT_NE(msg.find("unknown preset 'gpt5'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gpt3-175b"), std::string::npos);
  EXPECT_NE(error_of([] { load_preset("../etc/passwd", preset_dir()); }), "");
}

TEST(ModelFiles, BadFilesAreOneClearError) {
  EXPECT_NE(error_of([] { load_model_file(data + "/bad/truncated.json"); }).find("malformed JSON"),
            std::string::npos);
  EXPECT_NE(error_of([] { load_model_file(data + "/bad/malformed.json"); }).find("malformed JSON"),
            std::string::npos);
  EXPECT_NE(error_of([] { load_model_file(data + "/bad/negative.json"); }).find("hidden"), std::string::npos);
  EXPECT_NE(error_of([] { load_model_file(data + "/bad/missing_hidden.json"); }).find("hidden: missing"),
            std::string::npos);
  EXPECT_NE(error_of([] { load_model_file(data + "/bad/overflow.json"); }).find("overflows"),
            std::string::npos);
  EXPECT_NE(error_of([] { load_model_file(data + "/bad/no-such-file.json"); }).find("cannot open"),
            std::string::npos);
}

struct hf_case {
  const char* file;
  std::int64_t params;  // the model card's count
  std::int64_t kv_heads;
  mlp_kind mlp;
};

TEST(HuggingFace, EachFamilyImportsWithItsPublishedCount) {
  const hf_case cases[] = {
      {"llama2-7b.json", 6'738'415'616, 32, mlp_kind::swiglu},
      {"mistral-7b.json", 7'241'732'096, 8, mlp_kind::swiglu},
      {"qwen2-7b.json", 7'615'616'512, 4, mlp_kind::swiglu},
      {"gpt2.json", 124'439'808, 12, mlp_kind::gelu},
      {"gpt-neox-20b.json", 20'554'567'680, 64, mlp_kind::gelu},
      {"bloom-560m.json", 559'214'592, 16, mlp_kind::gelu},
      {"opt-125m.json", 125'239'296, 12, mlp_kind::gelu},
      {"falcon-7b.json", 6'921'720'704, 1, mlp_kind::gelu},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    auto m = load_hf_config(data + "/hf/" + c.file);
    EXPECT_EQ(count_params(m).total, c.params);
    EXPECT_EQ(m.kv_heads, c.kv_heads);
    EXPECT_EQ(m.mlp, c.mlp);
  }
}

TEST(HuggingFace, MissingFieldAndUnknownTypeNameTheProblem) {
  auto msg = error_of([] { load_hf_config(data + "/bad/hf_missing_field.json"); });
  EXPECT_NE(msg.find("intermediate_size: missing"), std::string::npos) << msg;
  nlohmann::json j = {{"model_type", "t5"}};
  EXPECT_NE(error_of([&] { model_from_hf_config(j, "config.json"); }).find("unsupported 't5'"),
            std::string::npos);
  EXPECT_NE(
      error_of([] { model_from_hf_config(nlohmann::json::object(), "config.json"); }).find("model_type"),
      std::string::npos);
}

}  // namespace
}  // namespace headroom
