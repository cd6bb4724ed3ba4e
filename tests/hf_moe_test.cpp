// hf_moe_test.cpp: HuggingFace config.json for the mixture-of-experts families (planner/model_files.cpp,
// planner/hf_families.hpp) and the MoE presets: fields equal to the released configs, the per-layer placement
// each family's modeling code builds, parameter totals against the published ones, and hostile configs.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "planner/errors.hpp"
#include "planner/model_files.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

std::string hf_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const bad_input& e) {
    return e.what();
  }
  return "";
}

model_spec hf(const std::string& file) {
  return load_hf_config(data + "/hf/" + file);
}

// Returns the indices of the MoE layers.
std::vector<std::int64_t> moe_layers(const model_spec& m) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < m.layers; ++i)
    if (m.is_moe_layer(i)) out.push_back(i);
  return out;
}

std::vector<std::int64_t> range(std::int64_t first, std::int64_t end, std::int64_t step = 1) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = first; i < end; i += step) out.push_back(i);
  return out;
}

// Each real config's fields, as the file states them (tests/data/hf/SOURCES.md names the files).
TEST(HfMoe, DeepSeekV3ReadsItsReleaseConfig) {
  const auto m = hf("deepseek-v3.json");
  EXPECT_EQ(m.layers, 61);
  EXPECT_EQ(m.hidden, 7168);
  EXPECT_EQ(m.heads, 128);
  EXPECT_EQ(m.kv_heads, 128);
  EXPECT_EQ(m.ffn_hidden, 18432);  // the dense layers' intermediate_size
  EXPECT_EQ(m.vocab, 129280);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_EQ(m.moe.experts, 256);
  EXPECT_EQ(m.moe.top_k, 8);
  EXPECT_EQ(m.moe.expert_ffn, 2048);
  EXPECT_EQ(m.moe.shared_ffn, 2048);  // n_shared_experts 1 x moe_intermediate_size
  EXPECT_FALSE(m.moe.shared_gate);
  EXPECT_TRUE(m.moe.router_bias);  // e_score_correction_bias
  EXPECT_FALSE(m.moe.expert_bias);
  EXPECT_EQ(m.moe.mtp_layers, 1);  // num_nextn_predict_layers
  EXPECT_EQ(m.mla.q_lora_rank, 1536);
  EXPECT_EQ(m.mla.kv_lora_rank, 512);
  EXPECT_EQ(m.mla.qk_nope_head_dim, 128);
  EXPECT_EQ(m.mla.qk_rope_head_dim, 64);
  EXPECT_EQ(m.mla.v_head_dim, 128);
  // first_k_dense_replace 3, moe_layer_freq 1: layers 0-2 dense, 3-60 MoE.
  EXPECT_EQ(moe_layers(m), range(3, 61));
}

TEST(HfMoe, MixtralQwenGptOssReadTheirConfigs) {
  const auto mx = hf("mixtral-8x7b.json");
  EXPECT_EQ(mx.layers, 32);
  EXPECT_EQ(mx.kv_heads, 8);
  EXPECT_EQ(mx.moe.experts, 8);
  EXPECT_EQ(mx.moe.top_k, 2);
  EXPECT_EQ(mx.moe.expert_ffn, 14336);
  EXPECT_EQ(mx.moe.shared_ffn, 0);
  EXPECT_EQ(moe_layers(mx), range(0, 32));
  const auto q = hf("qwen3-30b-a3b.json");
  EXPECT_EQ(q.layers, 48);
  EXPECT_EQ(q.head_dim, 128);  // stated, not 2048 / 32
  EXPECT_TRUE(q.head_dim_stated);
  EXPECT_EQ(q.kv_heads, 4);
  EXPECT_EQ(q.ffn_hidden, 6144);
  EXPECT_EQ(q.moe.experts, 128);
  EXPECT_EQ(q.moe.top_k, 8);
  EXPECT_EQ(q.moe.expert_ffn, 768);
  EXPECT_FALSE(q.linear_bias);
  EXPECT_FALSE(q.qkv_bias_only);
  EXPECT_EQ(moe_layers(q), range(0, 48));
  const auto g = hf("gpt-oss-20b.json");
  EXPECT_EQ(g.layers, 24);
  EXPECT_EQ(g.hidden, 2880);
  EXPECT_EQ(g.head_dim, 64);
  EXPECT_EQ(g.moe.experts, 32);
  EXPECT_EQ(g.moe.top_k, 4);
  EXPECT_EQ(g.moe.expert_ffn, 2880);
  EXPECT_TRUE(g.moe.router_bias);
  EXPECT_TRUE(g.moe.expert_bias);
  EXPECT_TRUE(g.attention_sinks);
  EXPECT_TRUE(g.linear_bias);  // attention_bias: Q, K, V and output
  EXPECT_EQ(moe_layers(g), range(0, 24));
}

// Llama 4: the text model under text_config; MoE layers range(step - 1, L, step) (configuration_llama4.py),
// the rest dense of intermediate_size_mlp, one shared expert of the expert width.
TEST(HfMoe, Llama4ReadsTextConfigAndInterleaves) {
  const auto scout = hf("llama4-scout.json");
  EXPECT_EQ(scout.layers, 48);
  EXPECT_EQ(scout.hidden, 5120);
  EXPECT_EQ(scout.vocab, 202048);
  EXPECT_EQ(scout.moe.experts, 16);
  EXPECT_EQ(scout.moe.top_k, 1);
  EXPECT_EQ(scout.moe.expert_ffn, 8192);
  EXPECT_EQ(scout.moe.shared_ffn, 8192);
  EXPECT_EQ(moe_layers(scout), range(0, 48));
  const auto step4 = hf("llama4-step4.json");
  EXPECT_EQ(moe_layers(step4), range(3, 48, 4));  // 3, 7, ..., 47: phase step - 1
  EXPECT_EQ(step4.ffn_hidden, 16384);             // the dense layers' intermediate_size_mlp
  // An explicit moe_layers list wins over the step.
  auto j = nlohmann::json::parse(std::ifstream(data + "/hf/llama4-step4.json"));
  j["text_config"]["moe_layers"] = {0, 5};
  EXPECT_EQ(moe_layers(model_from_hf_config(j, "config.json")), (std::vector<std::int64_t>{0, 5}));
}

// A Qwen2-MoE-shaped config (the fields of configuration_qwen2_moe.py) with the Qwen3-235B widths.
nlohmann::json qwen_moe(const char* type) {
  return {{"model_type", type},         {"hidden_size", 4096},           {"num_hidden_layers", 12},
          {"num_attention_heads", 64},  {"num_key_value_heads", 4},      {"head_dim", 128},
          {"intermediate_size", 12288}, {"moe_intermediate_size", 1536}, {"num_experts", 128},
          {"num_experts_per_tok", 8},   {"vocab_size", 151936}};
}

// Qwen2/3-MoE: MoE iff i not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0
// (modular_qwen2_moe.py, Qwen2MoeDecoderLayer): with step 2, layers 1, 3, 5, ...
TEST(HfMoe, QwenSparseStepAndMlpOnlyLayers) {
  auto j = qwen_moe("qwen3_moe");
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3, 4};
  const auto m = model_from_hf_config(j, "config.json");
  EXPECT_EQ(moe_layers(m), (std::vector<std::int64_t>{1, 5, 7, 9, 11}));
  // Qwen2-MoE: one shared expert of shared_expert_intermediate_size behind a sigmoid gate, and Q, K, V biases.
  auto q2 = qwen_moe("qwen2_moe");
  q2["shared_expert_intermediate_size"] = 5632;
  const auto m2 = model_from_hf_config(q2, "config.json");
  EXPECT_EQ(m2.moe.shared_ffn, 5632);
  EXPECT_TRUE(m2.moe.shared_gate);
  EXPECT_TRUE(m2.qkv_bias_only);
  EXPECT_FALSE(m2.linear_bias);
  EXPECT_EQ(moe_layers(m2), range(0, 12));
}

// DBRX keeps its widths in ffn_config and attn_config; OLMoE's expert width is intermediate_size.
TEST(HfMoe, DbrxNestedAndOlmoe) {
  const nlohmann::json dbrx = {
      {"model_type", "dbrx"},
      {"d_model", 6144},
      {"n_heads", 48},
      {"n_layers", 40},
      {"max_seq_len", 32768},
      {"vocab_size", 100352},
      {"attn_config", {{"kv_n_heads", 8}, {"clip_qkv", 8}}},
      {"ffn_config", {{"ffn_hidden_size", 10752}, {"moe_num_experts", 16}, {"moe_top_k", 4}}}};
  const auto d = model_from_hf_config(dbrx, "config.json");
  EXPECT_EQ(d.hidden, 6144);
  EXPECT_EQ(d.kv_heads, 8);
  EXPECT_EQ(d.moe.experts, 16);
  EXPECT_EQ(d.moe.top_k, 4);
  EXPECT_EQ(d.moe.expert_ffn, 10752);
  EXPECT_EQ(d.max_positions, 32768);
  EXPECT_EQ(moe_layers(d), range(0, 40));
  // DBRX's published count: 132 B total, 36 B active (databricks/dbrx MODEL_CARD_dbrx_base.md).
  EXPECT_NEAR(count_params(d).total / 1e9, 132, 0.5);
  EXPECT_NEAR(count_params(d).active / 1e9, 36, 0.5);
  auto no_ffn = dbrx;
  no_ffn["ffn_config"] = 5;
  EXPECT_NE(hf_error_of([&] {
              model_from_hf_config(no_ffn, "config.json");
            }).find("config.json.ffn_config: must be an object"),
            std::string::npos);
  const nlohmann::json olmoe = {{"model_type", "olmoe"},     {"hidden_size", 2048},
                                {"num_hidden_layers", 16},   {"num_attention_heads", 16},
                                {"intermediate_size", 1024}, {"num_experts", 64},
                                {"num_experts_per_tok", 8},  {"vocab_size", 50304}};
  const auto o = model_from_hf_config(olmoe, "config.json");
  EXPECT_EQ(o.moe.expert_ffn, 1024);
  EXPECT_EQ(o.kv_heads, 16);
  EXPECT_TRUE(o.qk_norm);  // OLMoE's whole-width q_norm / k_norm (modeling_olmoe.py), priced as qk_norm
  // "7B, 1B per token" (huggingface/transformers:docs/source/en/model_doc/olmoe.md): 6.9 B and 1.3 B counted.
  EXPECT_NEAR(count_params(o).total / 1e9, 6.92, 0.01);
  EXPECT_NEAR(count_params(o).active / 1e9, 1.28, 0.01);
}

// Parameter totals against the published ones, to the precision published. The config files and the presets
// must agree with each other too: one model, two ways in.
struct published {
  const char* preset;
  const char* config;  // nullptr: no real config file found (tests/data/hf/SOURCES.md)
  double total_b, total_tol, active_b, active_tol;
};

TEST(HfMoe, TotalsMatchPublishedCounts) {
  const published cases[] = {
      // Mixtral: 46.7 B / 12.9 B (Azure/azureml-assets .../mistralai-Mixtral-8x7B-Instruct-v01/description.md);
      // 46.70 / 12.88 by Megatron's own formula (docs: moe-and-imports.md section 1.1).
      {"mixtral-8x7b", "mixtral-8x7b.json", 46.70, 0.005, 12.88, 0.005},
      // Mixtral-8x22B: 141 B total, 39 B active (mistral.ai/news/mixtral-8x22b); 140.6 B by the HF layer shapes.
      {"mixtral-8x22b", "mixtral-8x22b.json", 140.6, 0.05, 39.0, 0.5},
      // DeepSeek-V3: 671 B without MTP, 37 B activated (arXiv 2412.19437, abstract).
      {"deepseek-v3", "deepseek-v3.json", 671.0, 0.05, 37.0, 0.6},
      // Qwen3-30B-A3B: 30.5 B / 3.3 B (model card); 30.53 B by Megatron's formula.
      {"qwen3-30b-a3b", "qwen3-30b-a3b.json", 30.53, 0.005, 3.3, 0.06},
      // Qwen3-235B-A22B: 235 B / 22 B (model card).
      {"qwen3-235b-a22b", nullptr, 235.0, 0.5, 22.0, 0.5},
      // gpt-oss-120b: 116.83 B total (arXiv 2508.10925, Table 1); 5.13 B active there excludes the input
      // embedding (201088 x 2880 = 0.58 B), counted here as active.
      {"gpt-oss-120b", nullptr, 116.83, 0.005, 5.13 + 0.579, 0.005},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.preset);
    const auto p = count_params(load_preset(c.preset, preset_dir()));
    EXPECT_NEAR((p.total - p.mtp_total) / 1e9, c.total_b, c.total_tol);
    EXPECT_NEAR(p.active / 1e9, c.active_b, c.active_tol);
    if (c.config) {
      const auto h = count_params(hf(c.config));
      EXPECT_EQ(h.total, p.total) << c.config;
      EXPECT_EQ(h.active, p.active) << c.config;
    }
  }
  // gpt-oss-20b: 20.91 B total, 3.61 B active without the input embedding (arXiv 2508.10925, Table 1).
  const auto g = count_params(hf("gpt-oss-20b.json"));
  EXPECT_NEAR(g.total / 1e9, 20.91, 0.005);
  EXPECT_NEAR((g.active - 201088LL * 2880) / 1e9, 3.61, 0.005);
  // DeepSeek-V3's MTP module exists and is part of total; the published 671 B excludes it.
  const auto ds = count_params(hf("deepseek-v3.json"));
  EXPECT_GT(ds.mtp_total, 11'000'000'000);
  EXPECT_LT(ds.mtp_total, 12'000'000'000);
}

nlohmann::json mixtral() {
  return nlohmann::json::parse(std::ifstream(data + "/hf/mixtral-8x7b.json"));
}

// Hostile configs: one clear line naming the key, never a crash or a silently dense model.
TEST(HfMoe, HostileConfigsNameTheKey) {
  const auto msg = [](const nlohmann::json& j) {
    return hf_error_of([&] { model_from_hf_config(j, "config.json"); });
  };
  auto j = mixtral();
  j["num_local_experts"] = 1e15;
  EXPECT_NE(msg(j).find("config.json.num_local_experts: must be between 0 and"), std::string::npos) << msg(j);
  j = mixtral();
  j["num_experts_per_tok"] = 9;
  EXPECT_NE(msg(j).find("config.json.num_experts_per_tok: must be at most the number of experts "
                        "(num_local_experts 8), got 9: lower it"),
            std::string::npos)
      << msg(j);
  // No expert to route to: torch.topk over 0 experts never runs; the line says what to state instead.
  j = mixtral();
  j["num_local_experts"] = 0;
  EXPECT_NE(msg(j).find("config.json.num_local_experts: 0 routed experts"), std::string::npos) << msg(j);
  // A misspelt required key: the key the config holds is named.
  j = mixtral();
  j["num_local_expert"] = 8;
  j.erase("num_local_experts");
  EXPECT_NE(msg(j).find("the config has 'num_local_expert': did you mean it?"), std::string::npos) << msg(j);
  j = mixtral();
  j["num_local_experts"] = "eight";
  EXPECT_NE(msg(j).find("num_local_experts: must be an integer"), std::string::npos) << msg(j);
  auto q = qwen_moe("qwen3_moe");
  q.erase("moe_intermediate_size");
  EXPECT_NE(msg(q).find("config.json.moe_intermediate_size: missing"), std::string::npos) << msg(q);
  q = qwen_moe("qwen3_moe");
  q["mlp_only_layers"] = {0, 99};
  EXPECT_NE(msg(q).find("mlp_only_layers: must hold layer indices in [0, 12)"), std::string::npos) << msg(q);
  q = qwen_moe("qwen3_moe");
  q["decoder_sparse_step"] = -2;
  EXPECT_NE(msg(q).find("decoder_sparse_step: must be between 1"), std::string::npos) << msg(q);
  // (i + 1) % 13 == 0 for no i < 12: a step past the 12 layers leaves no MoE layer (modeling_qwen3_moe.py).
  q = qwen_moe("qwen3_moe");
  q["decoder_sparse_step"] = 13;
  EXPECT_NE(msg(q).find("config.json.decoder_sparse_step: places no mixture-of-experts layer among the 12 layers"),
            std::string::npos)
      << msg(q);
  auto l = nlohmann::json::parse(std::ifstream(data + "/hf/llama4-scout.json"));
  l["text_config"] = "not an object";
  EXPECT_NE(msg(l).find("config.json.text_config: must be an object"), std::string::npos) << msg(l);
  l["text_config"] = nlohmann::json::array({1, 2});
  EXPECT_NE(msg(l).find("config.json.text_config: must be an object"), std::string::npos) << msg(l);
  auto ds = nlohmann::json::parse(std::ifstream(data + "/hf/deepseek-v3.json"));
  ds["first_k_dense_replace"] = 1000;
  EXPECT_NE(msg(ds).find("first_k_dense_replace: must be between 0 and 61"), std::string::npos) << msg(ds);
  ds = nlohmann::json::parse(std::ifstream(data + "/hf/deepseek-v3.json"));
  ds["kv_lora_rank"] = 0;
  EXPECT_NE(msg(ds).find("kv_lora_rank: must be between 1"), std::string::npos) << msg(ds);
  // DeepSeek-V2-Lite states q_lora_rank null: queries projected straight from h.
  ds = nlohmann::json::parse(std::ifstream(data + "/hf/deepseek-v3.json"));
  ds["q_lora_rank"] = nullptr;
  EXPECT_EQ(model_from_hf_config(ds, "config.json").mla.q_lora_rank, 0);
  // MoE keys a family's code does not read are refused, not dropped: a custom model.
  j = mixtral();
  j["n_shared_experts"] = 2;
  EXPECT_NE(msg(j).find(
                "config.json.n_shared_experts: mixture-of-experts key that this family's code does not read"),
            std::string::npos)
      << msg(j);
  // Families this version does not read stay refused.
  EXPECT_NE(msg({{"model_type", "jamba"}})
                .find("'jamba' is a mixture-of-experts family this version does not read"),
            std::string::npos);
}

// The presets load, and their placement is the one their configs state.
TEST(HfMoe, PresetsCarryTheirPlacement) {
  const auto ds = load_preset("deepseek-v3", preset_dir());
  EXPECT_EQ(moe_layers(ds), range(3, 61));
  EXPECT_EQ(ds.moe.mtp_layers, 1);
  const auto g = load_preset("gpt-oss-120b", preset_dir());
  EXPECT_TRUE(g.attention_sinks);
  EXPECT_EQ(moe_layers(g), range(0, 36));
}

}  // namespace
}  // namespace headroom
