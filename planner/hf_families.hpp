// hf_families.hpp: the HuggingFace config.json families as data, one row each: which keys hold each field of a
// model_spec, what a field is when its keys are absent, how MoE layers are placed, and the family's quirks.
// Read by model_from_hf_config (model_files.cpp), the only includer. Defaults are those of each family's HF
// configuration class (huggingface/transformers src/transformers/models/<family>/configuration_<family>.py, at
// the commit named on the row): from_pretrained fills an absent key with them.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "model_spec.hpp"

namespace headroom::detail::hf {

// What a field is when the config states none of its keys.
enum class absent { required, value, four_hidden, heads, hidden_per_head };

// Where a field lives: its keys, tried in order (the family's name, then HF attribute_map aliases; "a.b" is key b
// of the nested object a), and its value when none is present.
struct int_rule {
  std::array<const char*, 3> keys{};
  absent when = absent::required;
  std::int64_t value = 0;
};
struct bool_rule {
  const char* key = nullptr;
  bool value = false;
};

// How the shared experts' summed width is stated.
enum class shared_kind {
  none,
  width,       // Qwen2-MoE: shared_expert_intermediate_size, one shared MLP with a sigmoid gate
  count,       // DeepSeek: n_shared_experts MLPs of the routed expert's width
  one_expert,  // Llama 4: one shared MLP of the routed expert's width
};

// Which layers are MoE, as moe_layer_pattern's numbers (model_spec.hpp): layer i is MoE when i >= first_dense,
// i % every == phase and i is not in the dense list; or, when the moe list is given, exactly the layers it names.
struct placement_rule {
  int_rule first_dense{.when = absent::value, .value = 0};
  int_rule every{.when = absent::value, .value = 1};
  bool phase_last = false;           // phase = every - 1 (Qwen, Llama 4), else 0 (DeepSeek)
  const char* dense_list = nullptr;  // Qwen mlp_only_layers
  const char* moe_list = nullptr;    // Llama 4 moe_layers
};

struct family_row {
  std::array<const char*, 3> types{};
  const char* nested = nullptr;  // the object holding the text model, when the config has one (Llama 4)
  int_rule layers{}, hidden{}, heads{}, kv_heads{}, head_dim{}, ffn{}, vocab{}, max_positions{};
  std::int64_t position_offset = 0;  // OPT: two extra rows in the position table
  mlp_kind mlp = mlp_kind::swiglu;
  norm_kind norm = norm_kind::rmsnorm;
  position_kind position = position_kind::rotary;
  bool_rule tied{"tie_word_embeddings", false};
  bool_rule bias{};            // biases on every linear layer
  bool qkv_bias_only = false;  // with bias: on Q, K and V only (Qwen2)
  bool embedding_norm = false;
  bool_rule parallel_residual{};
  std::array<const char*, 3> dropout{"attention_dropout", "hidden_dropout"};
  // Mixture of experts (experts.keys[0] == nullptr: a dense family).
  int_rule experts{}, top_k{}, expert_ffn{}, shared{};
  shared_kind shared_as = shared_kind::none;
  placement_rule placement{};
  bool router_bias = false, expert_bias = false, attention_sinks = false;
  // Norms on q and k before attention, which the config implies rather than states (model_spec::qk_norm).
  bool qk_norm = false;
  const char* mtp = nullptr;
  bool mla = false;  // multi-latent attention: q_lora_rank, kv_lora_rank, qk_{nope,rope}_head_dim, v_head_dim
  void (*quirk)(const nlohmann::json& s, const std::string& origin, model_spec& m) = nullptr;
};

constexpr int_rule req(const char* a, const char* b = nullptr, const char* c = nullptr) {
  return {{a, b, c}};
}
constexpr int_rule opt(const char* a, std::int64_t v) {
  return {{a}, absent::value, v};
}
constexpr int_rule opt(const char* a, absent when) {
  return {{a}, when};
}

// falcon (RefinedWeb)'s kv heads, norms and positions (model_files.cpp).
void falcon_quirk(const nlohmann::json& s, const std::string& origin, model_spec& m);

// The families. MoE rows cite the configuration class whose defaults fill absent keys, and the modeling code
// whose layer rule they state.
inline const std::vector<family_row> family_rows = {
    // Dense families.
    {.types = {"llama", "mistral"},
     .layers = req("num_hidden_layers"),
     .hidden = req("hidden_size"),
     .heads = req("num_attention_heads"),
     .kv_heads = opt("num_key_value_heads", absent::heads),
     .head_dim = opt("head_dim", absent::hidden_per_head),
     .ffn = req("intermediate_size"),
     .vocab = req("vocab_size"),
     .max_positions = opt("max_position_embeddings", 4096),
     .bias = {"attention_bias", false}},
    {.types = {"qwen2"},
     .layers = req("num_hidden_layers"),
     .hidden = req("hidden_size"),
     .heads = req("num_attention_heads"),
     .kv_heads = opt("num_key_value_heads", absent::heads),
     .head_dim = opt("head_dim", absent::hidden_per_head),
     .ffn = req("intermediate_size"),
     .vocab = req("vocab_size"),
     .max_positions = opt("max_position_embeddings", 4096),
     .bias = {nullptr, true},
     .qkv_bias_only = true},
    {.types = {"gpt2"},
     .layers = req("n_layer"),
     .hidden = req("n_embd"),
     .heads = req("n_head"),
     .kv_heads = opt(nullptr, absent::heads),
     .head_dim = opt(nullptr, absent::hidden_per_head),
     .ffn = opt("n_inner", absent::four_hidden),
     .vocab = req("vocab_size"),
     .max_positions = req("n_positions", "n_ctx"),
     .mlp = mlp_kind::gelu,
     .norm = norm_kind::layernorm,
     .position = position_kind::learned,
     .tied = {"tie_word_embeddings", true},
     .bias = {nullptr, true},
     .dropout = {"resid_pdrop", "attn_pdrop", "embd_pdrop"}},
    {.types = {"gpt_neox"},
     .layers = req("num_hidden_layers"),
     .hidden = req("hidden_size"),
     .heads = req("num_attention_heads"),
     .kv_heads = opt(nullptr, absent::heads),
     .head_dim = opt(nullptr, absent::hidden_per_head),
     .ffn = req("intermediate_size"),
     .vocab = req("vocab_size"),
     .max_positions = opt("max_position_embeddings", 2048),
     .mlp = mlp_kind::gelu,
     .norm = norm_kind::layernorm,
     .bias = {nullptr, true},
     .parallel_residual = {"use_parallel_residual", true}},
    {.types = {"bloom"},
     .layers = req("n_layer", "num_hidden_layers"),
     .hidden = req("hidden_size", "n_embed"),
     .heads = req("n_head", "num_attention_heads"),
     .kv_heads = opt(nullptr, absent::heads),
     .head_dim = opt(nullptr, absent::hidden_per_head),
     .ffn = opt(nullptr, absent::four_hidden),
     .vocab = req("vocab_size"),
     .max_positions = opt("seq_length", 2048),
     .mlp = mlp_kind::gelu,
     .norm = norm_kind::layernorm,
     .position = position_kind::alibi,
     .tied = {"tie_word_embeddings", true},
     .bias = {nullptr, true},
     .embedding_norm = true},
    {.types = {"opt"},
     .layers = req("num_hidden_layers"),
     .hidden = req("hidden_size"),
     .heads = req("num_attention_heads"),
     .kv_heads = opt(nullptr, absent::heads),
     .head_dim = opt(nullptr, absent::hidden_per_head),
     .ffn = req("ffn_dim"),
     .vocab = req("vocab_size"),
     .max_positions = req("max_position_embeddings"),
     .position_offset = 2,
     .mlp = mlp_kind::gelu,
     .norm = norm_kind::layernorm,
     .position = position_kind::learned,
     .tied = {"tie_word_embeddings", true},
     .bias = {nullptr, true},
     .dropout = {"dropout", "attention_dropout"}},
    {.types = {"falcon", "RefinedWeb", "RefinedWebModel"},
     .layers = req("num_hidden_layers", "n_layer"),
     .hidden = req("hidden_size"),
     .heads = req("num_attention_heads", "n_head"),
     .kv_heads = opt(nullptr, absent::heads),
     .head_dim = opt(nullptr, absent::hidden_per_head),
     .ffn = opt("ffn_hidden_size", absent::four_hidden),
     .vocab = req("vocab_size"),
     .max_positions = opt("max_position_embeddings", 2048),
     .mlp = mlp_kind::gelu,
     .norm = norm_kind::layernorm,
     .tied = {"tie_word_embeddings", true},
     .bias = {"bias", false},
     .parallel_residual = {"parallel_attn", true},
     .quirk = falcon_quirk},
    // Mixtral: every layer MoE, the expert width is intermediate_size, no shared expert
    // (configuration_mixtral.py @ 008e5743: 8 experts, top 2, 8 kv heads, 4096*32 positions).
    {.types = {"mixtral"},
     .layers = req("num_hidden_layers"),
     .hidden = req("hidden_size"),
     .heads = req("num_attention_heads"),
     .kv_heads = opt("num_key_value_heads", 8),
     .head_dim = opt("head_dim", absent::hidden_per_head),
     .ffn = req("intermediate_size"),
     .vocab = req("vocab_size"),
     .max_positions = opt("max_position_embeddings", 4096 * 32),
     .experts = req("num_local_experts", "num_experts"),
     .top_k = opt("num_experts_per_tok", 2),
     .expert_ffn = req("intermediate_size")},
    // Qwen2-MoE: one gated shared expert; MoE iff i not in mlp_only_layers and (i+1) % decoder_sparse_step
    // == 0 (modular_qwen2_moe.py @ 001f85b3, Qwen2MoeDecoderLayer); Q, K, V biases by qkv_bias
    // (configuration_qwen2_moe.py @ 008e5743: 60 experts, top 4, qkv_bias true, 8192 positions).
    {.types = {"qwen2_moe"},
     .layers = req("num_hidden_layers"),
     .hidden = req("hidden_size"),
     .heads = req("num_attention_heads"),
     .kv_heads = opt("num_key_value_heads", absent::heads),
     .head_dim = opt("head_dim", absent::hidden_per_head),
     .ffn = req("intermediate_size"),
     .vocab = req("vocab_size"),
     .max_positions = opt("max_position_embeddings", 8192),
     .bias = {"qkv_bias", true},
     .qkv_bias_only = true,
     .experts = req("num_experts"),
     .top_k = opt("num_experts_per_tok", 4),
     .expert_ffn = req("moe_intermediate_size"),
     .shared = opt("shared_expert_intermediate_size", 0),
     .shared_as = shared_kind::width,
     .placement = {.every = opt("decoder_sparse_step", 1),
                   .phase_last = true,
                   .dense_list = "mlp_only_layers"}},
    // Qwen3-MoE: Qwen2-MoE's placement, no shared expert, stated head_dim (configuration_qwen3_moe.py @
    // 008e5743: 128 experts, top 8, 4 kv heads, 32768 positions, attention_bias false).
    {.types = {"qwen3_moe"},
     .layers = req("num_hidden_layers"),
     .hidden = req("hidden_size"),
     .heads = req("num_attention_heads"),
     .kv_heads = opt("num_key_value_heads", 4),
     .head_dim = opt("head_dim", absent::hidden_per_head),
     .ffn = req("intermediate_size"),
     .vocab = req("vocab_size"),
     .max_positions = opt("max_position_embeddings", 32768),
     .bias = {"attention_bias", false},
     .experts = req("num_experts"),
     .top_k = opt("num_experts_per_tok", 8),
     .expert_ffn = req("moe_intermediate_size"),
     .placement = {.every = opt("decoder_sparse_step", 1),
                   .phase_last = true,
                   .dense_list = "mlp_only_layers"},
     .qk_norm = true},  // Qwen3MoeAttention's q_norm / k_norm: RMSNorm(head_dim) per head (modeling_qwen3_moe.py)
    // DeepSeek-V2: MLA; n_shared_experts MLPs of the expert width; MoE iff i >= first_k_dense_replace and
    // i % moe_layer_freq == 0 (DeepSeek's own modeling_deepseek.py, DeepseekV2DecoderLayer)
    // (configuration_deepseek_v2.py @ 008e5743: 2 shared, first_k_dense_replace 0, MLA 1536/512/128/64/128).
    {.types = {"deepseek_v2"},
     .layers = req("num_hidden_layers"),
     .hidden = req("hidden_size"),
     .heads = req("num_attention_heads"),
     .kv_heads = opt("num_key_value_heads", absent::heads),
     .head_dim = opt(nullptr, absent::hidden_per_head),
     .ffn = req("intermediate_size"),
     .vocab = req("vocab_size"),
     .max_positions = opt("max_position_embeddings", 2048),
     .experts = req("n_routed_experts", "num_experts"),
     .top_k = req("num_experts_per_tok"),
     .expert_ffn = req("moe_intermediate_size"),
     .shared = opt("n_shared_experts", 2),
     .shared_as = shared_kind::count,
     .placement = {.first_dense = opt("first_k_dense_replace", 0), .every = opt("moe_layer_freq", 1)},
     .mla = true},
    // DeepSeek-V3: V2's layout plus a router bias (e_score_correction_bias, modular_deepseek_v3.py @ 000c33fd
    // DeepseekV3TopkRouter) and num_nextn_predict_layers MTP layers (configuration_deepseek_v3.py @ 001f85b3:
    // 1 shared, top 8, first_k_dense_replace 3, 128 kv heads, 4096 positions).
    {.types = {"deepseek_v3"},
     .layers = req("num_hidden_layers"),
     .hidden = req("hidden_size"),
     .heads = req("num_attention_heads"),
     .kv_heads = opt("num_key_value_heads", 128),
     .head_dim = opt(nullptr, absent::hidden_per_head),
     .ffn = req("intermediate_size"),
     .vocab = req("vocab_size"),
     .max_positions = opt("max_position_embeddings", 4096),
     .experts = req("n_routed_experts", "num_local_experts"),
     .top_k = opt("num_experts_per_tok", 8),
     .expert_ffn = req("moe_intermediate_size"),
     .shared = opt("n_shared_experts", 1),
     .shared_as = shared_kind::count,
     .placement = {.first_dense = opt("first_k_dense_replace", 3), .every = opt("moe_layer_freq", 1)},
     .router_bias = true,
     .mtp = "num_nextn_predict_layers",
     .mla = true},
    // GPT-OSS: every layer MoE; biases on attention, router and experts; one sink logit per head
    // (modular_gpt_oss.py @ 0261a467; configuration_gpt_oss.py @ 02b8f42b: 128 experts, top 4, head_dim 64,
    // 8 kv heads, attention_bias true, 131072 positions).
    {.types = {"gpt_oss"},
     .layers = req("num_hidden_layers"),
     .hidden = req("hidden_size"),
     .heads = req("num_attention_heads"),
     .kv_heads = opt("num_key_value_heads", 8),
     .head_dim = opt("head_dim", 64),
     .ffn = req("intermediate_size"),
     .vocab = req("vocab_size"),
     .max_positions = opt("max_position_embeddings", 131072),
     .bias = {"attention_bias", true},
     .experts = req("num_local_experts", "num_experts"),
     .top_k = {{"num_experts_per_tok", "experts_per_token"}, absent::value, 4},
     .expert_ffn = req("intermediate_size"),
     .router_bias = true,
     .expert_bias = true,
     .attention_sinks = true},
    // Llama 4: the text model under text_config; one shared expert of the expert width; MoE layers are
    // moe_layers, else range(step - 1, L, step); dense layers use intermediate_size_mlp (modeling_llama4.py @
    // 000c33fd; configuration_llama4.py @ 008e5743: 16 experts, top 1, step 1, head_dim 128, 16384 dense).
    {.types = {"llama4", "llama4_text"},
     .nested = "text_config",
     .layers = req("num_hidden_layers"),
     .hidden = req("hidden_size"),
     .heads = req("num_attention_heads"),
     .kv_heads = opt("num_key_value_heads", 8),
     .head_dim = opt("head_dim", 128),
     .ffn = opt("intermediate_size_mlp", 16384),
     .vocab = req("vocab_size"),
     .max_positions = opt("max_position_embeddings", 4096 * 32),
     .bias = {"attention_bias", false},
     .experts = req("num_local_experts"),
     .top_k = opt("num_experts_per_tok", 1),
     .expert_ffn = req("intermediate_size"),
     .shared_as = shared_kind::one_expert,
     .placement = {.every = opt("interleave_moe_layer_step", 1),
                   .phase_last = true,
                   .moe_list = "moe_layers"}},
    // OLMoE: every layer MoE, expert width intermediate_size (configuration_olmoe.py @ 008e5743: 64 experts,
    // top 8, 4096 positions). Its q_norm and k_norm (modeling_olmoe.py) are RMSNorms over the whole q and k
    // widths, not per head: the same saved inputs as qk_norm prices, with h + kv x d weights where qk_norm
    // counts 2 x head_dim (3,840 parameters a layer fewer, 61,440 in OLMoE-1B-7B's 16 layers).
    {.types = {"olmoe"},
     .layers = req("num_hidden_layers"),
     .hidden = req("hidden_size"),
     .heads = req("num_attention_heads"),
     .kv_heads = opt("num_key_value_heads", absent::heads),
     .head_dim = opt(nullptr, absent::hidden_per_head),
     .ffn = req("intermediate_size"),
     .vocab = req("vocab_size"),
     .max_positions = opt("max_position_embeddings", 4096),
     .bias = {"attention_bias", false},
     .experts = req("num_experts"),
     .top_k = opt("num_experts_per_tok", 8),
     .expert_ffn = req("intermediate_size"),
     .qk_norm = true},
    // DBRX: every layer MoE; widths nested in ffn_config and attn_config; norms are LayerNorm without bias (a
    // weight of h, priced as rmsnorm); untied (configuration_dbrx.py @ 032b32ab: kv_n_heads 1, 4 experts, top 1,
    // max_seq_len 2048).
    {.types = {"dbrx"},
     .layers = req("n_layers"),
     .hidden = req("d_model"),
     .heads = req("n_heads"),
     .kv_heads = opt("attn_config.kv_n_heads", 1),
     .head_dim = opt(nullptr, absent::hidden_per_head),
     .ffn = req("ffn_config.ffn_hidden_size"),
     .vocab = req("vocab_size"),
     .max_positions = opt("max_seq_len", 2048),
     .tied = {nullptr, false},
     .dropout = {"resid_pdrop", "emb_pdrop", "attn_config.attn_pdrop"},
     .experts = req("ffn_config.moe_num_experts"),
     .top_k = opt("ffn_config.moe_top_k", 1),
     .expert_ffn = req("ffn_config.ffn_hidden_size")},
};

}  // namespace headroom::detail::hf
