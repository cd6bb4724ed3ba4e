// model_files_test.cpp: presets, model files and HuggingFace import, including every kind of bad file.
#include "test_support.hpp"
#include "planner/model_files.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "planner/errors.hpp"

namespace headroom {
namespace {


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

// An unknown preset names the three nearest names (edit distance) and where the rest are listed.
TEST(Presets, UnknownPresetNamesTheNearestOnes) {
  auto msg = error_of([] { load_preset("gpt3-175", preset_dir()); });
  EXPECT_NE(msg.find("unknown preset 'gpt3-175'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("closest: gpt3-175b"), std::string::npos) << msg;  // one edit: first
  EXPECT_NE(msg.find("headroom presets"), std::string::npos) << msg;
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

// Every reader opens through read_regular_file: a FIFO is refused at once (not waited on), a device or a
// directory is refused, the size cap holds, and a name too long is bad input, not a filesystem exception.
TEST(ReadRegularFile, RefusesWhatIsNotARegularFile) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / ("rrf_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string fifo = (dir / "f.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(error_of([&] { read_regular_file(fifo, 1024, "a test input"); }).find("not a regular file"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_json_file(fifo); }).find("not a regular file"), std::string::npos);
  EXPECT_NE(error_of([] { read_regular_file("/dev/zero", 1024, "a test input"); }).find("not a regular file"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_regular_file(dir.string(), 1024, "a test input"); }).find("is a directory"),
            std::string::npos);
  const std::string file = (dir / "ten.txt").string();
  std::ofstream(file) << "0123456789";
  EXPECT_EQ(read_regular_file(file, 10, "a test input"), "0123456789");
  EXPECT_NE(error_of([&] { read_regular_file(file, 9, "a test input"); }).find("a test input may be"),
            std::string::npos);
  const std::string long_name(5000, 'x');
  const std::string msg = error_of([&] { read_regular_file(long_name, 10, "a test input"); });
  EXPECT_NE(msg.find("file name too long"), std::string::npos) << msg;
  EXPECT_LT(msg.size(), 200u) << "the name is shown cut, not whole";
  EXPECT_NE(error_of([&] { read_regular_file((dir / "none").string(), 10, "x"); }).find("missing"),
            std::string::npos);
  EXPECT_EQ(shown_name("a\nb"), "a\\nb");  // escaped by planner/format.hpp's printable, as every printer does
  EXPECT_EQ(shown_name(std::string(200, 'y')).size(), 93u);
  std::filesystem::remove_all(dir);
}

TEST(Presets, NamesThatCannotBePresetsAreUnknown) {
  for (const std::string& name :
       {std::string(300, 'q'), std::string(100000, 'p'), std::string(".."), std::string("."),
        std::string(".hidden"), std::string("a/b"), std::string("a b"), std::string("-x"),
        std::string("gpt3-175b\n"), std::string("")}) {
    const auto msg = error_of([&] { load_preset(name, preset_dir()); });
    EXPECT_NE(msg.find("unknown preset"), std::string::npos) << msg;
    EXPECT_LT(msg.size(), 2000u);
    EXPECT_FALSE(is_preset_name(name));
  }
  EXPECT_TRUE(is_preset_name("gpt3-1.3b"));
  EXPECT_TRUE(is_preset_name(std::string(64, 'a')));
  EXPECT_FALSE(is_preset_name(std::string(65, 'a')));
}

// One validation of a model: a derived head_dim (hidden / heads) needs heads to divide hidden, in every
// family's config as in a model file; a config that states head_dim is taken as it says.
TEST(HuggingFace, HeadsMustDivideHiddenUnlessHeadDimIsStated) {
  const nlohmann::json configs[] = {
      {{"model_type", "gpt2"},
       {"n_embd", 100},
       {"n_head", 3},
       {"n_layer", 2},
       {"vocab_size", 1000},
       {"n_positions", 1024}},
      {{"model_type", "llama"},
       {"hidden_size", 100},
       {"num_attention_heads", 3},
       {"num_hidden_layers", 2},
       {"intermediate_size", 256},
       {"vocab_size", 1000}},
      {{"model_type", "gpt_neox"},
       {"hidden_size", 100},
       {"num_attention_heads", 3},
       {"num_hidden_layers", 2},
       {"intermediate_size", 256},
       {"vocab_size", 1000}},
      {{"model_type", "bloom"}, {"hidden_size", 100}, {"n_head", 3}, {"n_layer", 2}, {"vocab_size", 1000}},
      {{"model_type", "opt"},
       {"hidden_size", 100},
       {"num_attention_heads", 3},
       {"num_hidden_layers", 2},
       {"ffn_dim", 256},
       {"vocab_size", 1000},
       {"max_position_embeddings", 1024}},
      {{"model_type", "falcon"},
       {"hidden_size", 100},
       {"num_attention_heads", 3},
       {"num_hidden_layers", 2},
       {"vocab_size", 1000}},
  };
  for (const auto& c : configs) {
    const auto msg = error_of([&] { model_from_hf_config(c, "config.json"); });
    EXPECT_NE(msg.find("model.heads: must divide hidden (100), got 3"), std::string::npos)
        << c["model_type"] << ": " << msg;
  }
  auto stated = configs[1];
  stated["head_dim"] = 32;
  const auto m = model_from_hf_config(stated, "config.json");
  EXPECT_EQ(m.head_dim, 32);
  EXPECT_TRUE(m.head_dim_stated);
}

}  // namespace
}  // namespace headroom
