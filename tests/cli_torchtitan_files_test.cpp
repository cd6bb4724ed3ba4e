// cli_torchtitan_files_test.cpp: torchtitan's own job files as they ship (tests/data/torchtitan/train_configs,
// every train_configs/*.toml of pytorch/torchtitan @ 238fa995, SOURCES.md there) through the built `headroom`:
// each plans from the file alone as the model its [model] names, with the file's degrees, or is refused in
// one line naming what is not modelled; a file whose model contradicts the command line's is refused naming
// both; 2024-era files with their degrees under [training] / [experimental] read as torchtitan read them.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_support.hpp"

namespace {

const std::string shipped = data + "/torchtitan/train_configs/";

// Returns the integer keys of [parallelism] as the file writes them, read line by line here, apart from the
// importer: "key = 8  # comment" gives {key, 8}.
std::map<std::string, long> parallelism_of(const std::string& path) {
  std::ifstream in(path);
  std::map<std::string, long> out;
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.rfind("[", 0) == 0) section = line.substr(1, line.find(']') - 1);
    const auto eq = line.find('=');
    if (section != "parallelism" || eq == std::string::npos) continue;
    std::string key = line.substr(0, eq);
    key.erase(key.find_last_not_of(' ') + 1);
    try {
      out[key] = std::stol(line.substr(eq + 1));
    } catch (const std::exception&) {  // a string value: not a degree
    }
  }
  return out;
}

long degree(const std::map<std::string, long>& p, const char* key) {
  auto it = p.find(key);
  return it == p.end() ? 1 : it->second;
}

struct shipped_file {
  const char* file;
  int gpus;
  const char* model;    // the model the plan names ("" when refused)
  const char* refusal;  // what the one-line refusal names ("" when planned)
};

// Every file, with a GPU count its degrees divide (the file does not state one: torchtitan's launcher does).
const shipped_file files[] = {
    {"deepseek_v3/debug_model.toml", 8, "torchtitan deepseek_v3/debugmodel", ""},
    {"deepseek_v3/deepseek_v3_16b.toml", 8, "torchtitan deepseek_v3/16B", ""},
    {"deepseek_v3/deepseek_v3_671b.toml", 256, "torchtitan deepseek_v3/671B", ""},
    {"flux/debug_model.toml", 8, "", "[model] flux/flux-debug"},
    {"flux/flux_dev_model.toml", 8, "", "[model] flux/flux-dev"},
    {"flux/flux_schnell_model.toml", 8, "", "[model] flux/flux-schnell"},
    {"gpt_oss/debug_model.toml", 8, "", "[model] gpt_oss/debugmodel"},
    {"llama3/debug_model.toml", 8, "torchtitan llama3/debugmodel", ""},
    {"llama3/llama3_8b.toml", 8, "torchtitan llama3/8B", ""},
    {"llama3/llama3_70b.toml", 64, "torchtitan llama3/70B", ""},
    {"llama3/llama3_405b.toml", 512, "torchtitan llama3/405B", ""},
    {"llama3_ft/debug_model.toml", 8, "", "fault_tolerance.num_fragments"},
    {"llama4/debug_model.toml", 8, "torchtitan llama4/debugmodel", ""},
    {"llama4/llama4_17bx16e.toml", 64, "torchtitan llama4/17bx16e", ""},
    {"llama4/llama4_17bx128e.toml", 64, "torchtitan llama4/17bx128e", ""},
    {"qwen3/qwen3_0.6b.toml", 8, "torchtitan qwen3/0.6B", ""},
    {"qwen3/qwen3_1.7b.toml", 8, "torchtitan qwen3/1.7B", ""},
    {"qwen3/qwen3_32b.toml", 8, "torchtitan qwen3/32B", ""},
    {"qwen3/qwen3_moe_debug.toml", 8, "torchtitan qwen3/debugmodel_moe", ""},
    {"experiments/vlm/debug_model.toml", 8, "", "[model] vlm/debugmodel"},
};

TEST(TorchtitanFiles, EveryShippedFilePlansItsModelWithItsDegreesOrNamesWhatIsNotModelled) {
  for (const auto& f : files) {
    SCOPED_TRACE(f.file);
    const std::string path = shipped + f.file;
    const result r = run("plan --torchtitan-config " + path + " --gpus " + std::to_string(f.gpus) + " --json -");
    if (*f.refusal) {
      EXPECT_EQ(r.status, 2) << r.err;
      EXPECT_EQ(lines(r.err), 1) << r.err;
      EXPECT_NE(r.err.find(f.refusal), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("not modelled"), std::string::npos) << r.err;
      continue;
    }
    ASSERT_TRUE(r.status == 0 || r.status == 3) << r.status << " " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["model"]["name"], f.model);
    const auto p = parallelism_of(path);
    const long tp = degree(p, "tensor_parallel_degree"), pp = degree(p, "pipeline_parallel_degree");
    const long cp = degree(p, "context_parallel_degree"), ep = degree(p, "expert_parallel_degree");
    EXPECT_EQ(j["layout"]["tp"], tp);
    EXPECT_EQ(j["layout"]["pp"], pp);
    EXPECT_EQ(j["layout"]["cp"], cp);
    EXPECT_EQ(j["layout"]["dp"], f.gpus / (tp * pp * cp));  // data_parallel_shard_degree -1: the rest
    EXPECT_EQ(j["layout"].value("ep", 1), ep);
    EXPECT_EQ(j["layout"]["gpus"], f.gpus);
  }
}

// The model the file names is planned, not another: a command-line model of another shape is refused naming
// both; one of the same shape is planned and said.
TEST(TorchtitanFiles, AModelThatContradictsTheFileIsRefusedNamingBoth) {
  const result r = run("plan --preset llama3-70b --gpus 64 --torchtitan-config " + shipped +
                       "llama4/llama4_17bx16e.toml");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  for (const char* part : {"[model] llama4/17bx16e", "--preset llama3-70b", "layers 48 and 80", "drop --preset"})
    EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
  // torchtitan's DeepSeek-V3 builds no multi-token-prediction module; the preset (the release) has one.
  const result mtp = run("plan --preset deepseek-v3 --gpus 256 --torchtitan-config " + shipped +
                         "deepseek_v3/deepseek_v3_671b.toml");
  EXPECT_EQ(mtp.status, 2);
  EXPECT_NE(mtp.err.find("MTP layers 0 and 1"), std::string::npos) << mtp.err;
  const result hf = run("plan --hf-config " + data + "/hf/mixtral-8x7b.json --gpus 8 --torchtitan-config " +
                        shipped + "qwen3/qwen3_moe_debug.toml");
  EXPECT_EQ(hf.status, 2);
  EXPECT_NE(hf.err.find("--hf-config"), std::string::npos) << hf.err;
  const result same = run("plan --preset llama3-8b --gpus 8 --explain --torchtitan-config " + shipped +
                          "llama3/llama3_8b.toml");
  EXPECT_TRUE(same.status == 0 || same.status == 3) << same.err;
  EXPECT_NE(same.out.find("the same shape as [model] llama3/8B"), std::string::npos) << same.out;
}

TEST(TorchtitanFiles, UnknownFlavorsGetTheNearestAndAnUnknownModelNeedsOneNamed) {
  const std::string typo = scratch("typo.toml");
  std::ofstream(typo) << "[model]\nname = \"llama3\"\nflavor = \"8b\"\n";
  const result r = run("plan --gpus 8 --torchtitan-config " + typo);
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("'8b' is not a flavor of llama3 (did you mean '8B'?)"), std::string::npos) << r.err;
  // A model torchtitan does not ship (registered by the user's own code): planned only as a model named here.
  const std::string own = scratch("own.toml");
  std::ofstream(own) << "[model]\nname = \"my_llama\"\nflavor = \"8B\"\n";
  const result alone = run("plan --gpus 8 --torchtitan-config " + own);
  EXPECT_EQ(alone.status, 2);
  EXPECT_NE(alone.err.find("'my_llama' is not a model of torchtitan"), std::string::npos) << alone.err;
  EXPECT_NE(alone.err.find("--preset"), std::string::npos) << alone.err;
  const result named = run("plan --preset llama3-8b --gpus 8 --explain --torchtitan-config " + own);
  EXPECT_TRUE(named.status == 0 || named.status == 3) << named.err;
  EXPECT_NE(named.out.find("unchecked against the file"), std::string::npos) << named.out;
  // A file that names no model, alone: the model is asked for.
  const std::string none = scratch("none.toml");
  std::ofstream(none) << "[training]\nseq_len = 4096\n";
  const result no_model = run("plan --gpus 8 --torchtitan-config " + none);
  EXPECT_EQ(no_model.status, 2);
  EXPECT_NE(no_model.err.find("--torchtitan-config whose [model] names a flavor"), std::string::npos)
      << no_model.err;
}

// Before torchtitan 785c34c99 (PR #980, 2025-03-18) the degrees lived under [training] and [experimental].
TEST(TorchtitanFiles, DegreesUnderTrainingAndExperimentalReadAsTorchtitanReadThem) {
  const std::string old = scratch("old.toml");
  std::ofstream(old) << "[model]\nname = \"llama3\"\nflavor = \"70B\"\n"
                        "[training]\nbatch_size = 1\nseq_len = 8192\ndata_parallel_shard_degree = -1\n"
                        "tensor_parallel_degree = 8\n"
                        "[experimental]\npipeline_parallel_degree = 2\ncontext_parallel_degree = 2\n"
                        "[activation_checkpoint]\nmode = \"full\"\n";
  const result r = run("plan --gpus 64 --json - --torchtitan-config " + old);
  ASSERT_TRUE(r.status == 0 || r.status == 3) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["layout"]["tp"], 8);
  EXPECT_EQ(j["layout"]["pp"], 2);
  EXPECT_EQ(j["layout"]["cp"], 2);
  EXPECT_EQ(j["layout"]["dp"], 2);
  const result ex = run("plan --gpus 64 --explain --torchtitan-config " + old);
  EXPECT_NE(ex.out.find("read from training.tensor_parallel_degree, where torchtitan kept it until 785c34c99"),
            std::string::npos)
      << ex.out;
  // Both places, disagreeing: which one ran depends on the torchtitan version, so neither is guessed.
  const std::string both = scratch("both.toml");
  std::ofstream(both) << "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\ntensor_parallel_degree = 4\n"
                         "[parallelism]\ntensor_parallel_degree = 2\n";
  const result clash = run("plan --gpus 8 --torchtitan-config " + both);
  EXPECT_EQ(clash.status, 2);
  EXPECT_EQ(lines(clash.err), 1) << clash.err;
  EXPECT_NE(clash.err.find("training.tensor_parallel_degree: is 4 here and 2 in [parallelism]"), std::string::npos)
      << clash.err;
  // The old micro-batch count is a count, not the size that replaced it: named, not guessed.
  const std::string count = scratch("count.toml");
  std::ofstream(count) << "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[experimental]\npipeline_parallel_degree = 2\n"
                          "pipeline_parallel_microbatches = 4\n";
  const result c = run("plan --gpus 8 --torchtitan-config " + count);
  EXPECT_EQ(c.status, 2);
  EXPECT_NE(c.err.find("experimental.pipeline_parallel_microbatches"), std::string::npos) << c.err;
}

}  // namespace
