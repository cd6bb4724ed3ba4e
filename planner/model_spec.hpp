// model_spec.hpp: the shape of a transformer, as a preset, a model file or a HuggingFace config gives it,
// and the parameter counts that follow from it.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "enum_names.hpp"

namespace headroom {

enum class mlp_kind { gelu, swiglu };         // gelu: two matrices h->f->h; swiglu: gate, up, down
enum class norm_kind { layernorm, rmsnorm };  // layernorm has weight and bias, rmsnorm weight only
enum class position_kind { learned, rotary, alibi };
// Megatron-Core code paths run with a fusion turned off whose autograd keeps other tensors than the fused
// kernel's (bits of model_spec::unfused; docs/model.md, "Megatron's unfused paths"): RoPE (--no-rope-fusion),
// SwiGLU (--no-bias-swiglu-fusion), the attention softmax in PyTorch in fp32 and the causal mask it makes.
// A set is a bitmask of 1 << path, as recompute_module's (layout.hpp); the names are the model JSON's.
enum class unfused_path : std::uint8_t { rope, swiglu, softmax_fp32, softmax_mask };
inline constexpr enum_name<unfused_path> unfused_path_names[] = {
    {unfused_path::rope, "rope"},
    {unfused_path::swiglu, "swiglu"},
    {unfused_path::softmax_fp32, "softmax_fp32"},
    {unfused_path::softmax_mask, "softmax_mask"}};
constexpr std::span<const enum_name<unfused_path>> name_table(unfused_path) {
  return unfused_path_names;
}
// Returns the bit of path `p` in model_spec::unfused.
constexpr std::uint32_t unfused_bit(unfused_path p) {
  return 1u << static_cast<unsigned>(p);
}

// Mixture-of-experts (docs/model.md, "Mixture of experts"). experts == 0: a dense model. Field names follow
// Megatron-Core's (num_moe_experts, moe_router_topk, moe_ffn_hidden_size, moe_shared_expert_intermediate_size).
struct moe_spec {
  std::int64_t experts = 0;     // routed experts in each MoE layer
  std::int64_t top_k = 0;       // experts each token is routed to
  std::int64_t expert_ffn = 0;  // one routed expert's ffn width (its MLP has the model's mlp kind)
  std::int64_t shared_ffn = 0;  // the shared experts' ffn width, summed over them (0: none)
  bool shared_gate = false;     // Qwen2-MoE: a sigmoid gate Linear(h, 1) on the shared expert's output
  bool router_bias = false;     // a bias of E on the router (DeepSeek-V3's e_score_correction_bias, GPT-OSS)
  bool expert_bias = false;     // biases inside each routed expert (GPT-OSS)
  // Per transformer layer, whether its MLP is MoE (size == model layers). Every reader expands its rule
  // (first_k_dense_replace, moe_layer_freq, decoder_sparse_step, ...) into this list: moe_layer_pattern().
  std::vector<bool> layers;
  std::int64_t mtp_layers = 0;  // multi-token-prediction layers (DeepSeek-V3), built on the last stage
  bool enabled() const { return experts > 0; }
};

// Multi-latent attention (DeepSeek-V2/V3; Megatron's MLATransformerConfig). kv_lora_rank == 0: none.
struct mla_spec {
  std::int64_t q_lora_rank = 0;  // 0: queries projected directly from h (DeepSeek-V2-Lite)
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;  // per head, the part of q and k without rotary embedding
  std::int64_t qk_rope_head_dim = 0;  // per head, the rotary part (k's is shared by all heads)
  std::int64_t v_head_dim = 0;
  bool enabled() const { return kv_lora_rank > 0; }
};

// Returns the per-layer MoE placement of `layers` layers: layer i (0-based) is MoE when i >= first_dense, i is
// not in `dense`, and i % every == phase. The families differ only in these numbers (docs/model.md):
// DeepSeek first_dense = first_k_dense_replace, every = moe_layer_freq, phase 0; Qwen2/3-MoE every =
// decoder_sparse_step, phase every - 1, dense = mlp_only_layers; Llama 4 every = interleave_moe_layer_step,
// phase every - 1; Megatron's --moe-layer-freq N phase 0 (layer 0 is MoE). Throws bad_input when every < 1
// or phase is outside [0, every).
std::vector<bool> moe_layer_pattern(std::int64_t layers, std::int64_t first_dense, std::int64_t every,
                                    std::int64_t phase, const std::vector<std::int64_t>& dense = {});
// Returns the per-layer pattern a Megatron list expression states ("[0]*3+[1]*58", "([1]*3+[0])*2",
// "[1,0,1,1]"): 1 MoE, 0 dense. Throws bad_input naming `origin` when it is not such an expression, is
// longer than 100,000 entries, or holds a value other than 0 or 1.
std::vector<bool> parse_layer_pattern(const std::string& expr, const std::string& origin);

struct model_spec {
  std::string name;
  std::string source;  // where the dimensions come from (paper, model card)
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;  // grouped-query attention; == heads for multi-head attention
  std::int64_t head_dim = 0;  // usually hidden / heads
  bool head_dim_stated =
      false;  // the source states head_dim; else it is hidden / heads and heads divide hidden
  std::int64_t ffn_hidden = 0;
  std::int64_t vocab = 0;
  std::int64_t seq = 2048;            // default training sequence length
  std::int64_t max_positions = 2048;  // learned position table size
  mlp_kind mlp = mlp_kind::gelu;
  norm_kind norm = norm_kind::layernorm;
  position_kind position = position_kind::learned;
  bool tied_embeddings = true;
  bool dropout = true;                        // dropout after attention softmax, attention and MLP outputs
  bool linear_bias = true;                    // biases on QKV, output projection and MLP
  bool qkv_bias_only = false;                 // Qwen2: biases on Q, K, V and nowhere else
  bool embedding_norm = false;                // BLOOM: a layer norm right after the word embedding
  int norms_per_layer = 2;                    // Falcon-7B: one norm feeds both attention and MLP
  bool parallel_residual = false;             // GPT-NeoX, Falcon: attention and MLP read the same layer input
  std::optional<std::int64_t> stated_params;  // a preset may state Ψ instead of deriving it (gpt3-175b)
  moe_spec moe;                               // mixture-of-experts; experts == 0 for a dense model
  mla_spec mla;                               // multi-latent attention; kv_lora_rank == 0 otherwise
  bool attention_sinks = false;               // GPT-OSS: one learned sink logit per head and layer
  // Qwen3's q_norm / k_norm, Megatron's --qk-layernorm: a norm over head_dim applied to each head of q and k
  // (one weight of head_dim each, shared by the heads). Ignored with multi-latent attention, whose latent
  // norms are always counted (docs/model.md, "Query and key norms").
  bool qk_norm = false;
  std::uint32_t unfused = 0;  // unfused_path bits: Megatron's unfused code paths the launch runs
  bool runs_unfused(unfused_path p) const { return (unfused & unfused_bit(p)) != 0; }
  // Returns whether layer i (0-based) has a MoE MLP.
  bool is_moe_layer(std::int64_t i) const {
    return moe.enabled() && i >= 0 && static_cast<std::size_t>(i) < moe.layers.size() &&
           moe.layers[static_cast<std::size_t>(i)];
  }
  // Returns whether an MTP module's transformer layer is a MoE layer: Megatron builds it with the decoder's
  // last layer's spec (multi_token_prediction.py), so it is of that layer's kind.
  bool mtp_layer_is_moe() const { return is_moe_layer(layers - 1); }
};

// One layer's parameters by how tensor and expert parallelism divide them (Megatron-Core's three buckets,
// docs/model.md "Parameters"): a count of parameters, not bytes.
struct layer_params {
  std::int64_t sharded = 0;     // divided by tp: attention, dense MLP, shared experts, column-parallel biases
  std::int64_t replicated = 0;  // on every tp rank: norms, router, shared-expert gate, row-parallel biases
  std::int64_t expert = 0;      // routed experts: divided by ep x expert tp
  constexpr std::int64_t total() const { return sharded + replicated + expert; }
};

// Where a model's parameters live, in parameters (not bytes).
struct param_counts {
  std::int64_t per_layer = 0;    // one dense transformer layer (Ψ/L when Ψ is stated)
  layer_params dense_layer;      // a layer with a dense MLP
  layer_params moe_layer;        // a layer with a MoE MLP (all zero for a dense model)
  layer_params mtp;              // every multi-token-prediction layer together, on the last stage
  std::int64_t embedding = 0;    // word (+ position, + embedding norm) table, on the first pipeline stage
  std::int64_t embedding_replicated = 0;  // the part of `embedding` not split by tp (position table, norm)
  std::int64_t output = 0;       // final norm + output head (a copy of the embedding when tied and pp > 1)
  std::int64_t output_replicated = 0;  // the part of `output` not split by tp (the final norm)
  std::int64_t output_tied = 0;  // the part of `output` that exists only when tied weights are split by pp
  std::int64_t total = 0;        // Ψ: stated when the preset states it, else derived (MTP included)
  std::int64_t mtp_total = 0;    // the multi-token-prediction layers' part of `total`
  std::int64_t active = 0;       // per token: every layer with top_k routed experts, embedding and output
  bool stated = false;           // Ψ was stated: it is spread evenly over layers, as the reference case does
  // moe_before[i]: MoE layers among layers 0 .. i-1 (size layers + 1; empty for a dense model).
  std::vector<std::int64_t> moe_before;
  // Returns the MoE layers among layers [first, first + count), clamped to the model.
  std::int64_t moe_layers_in(std::int64_t first, std::int64_t count) const {
    if (moe_before.empty() || count <= 0) return 0;
    const auto n = static_cast<std::int64_t>(moe_before.size()) - 1;
    const std::int64_t a = first < 0 ? 0 : first > n ? n : first;
    const std::int64_t b = first + count > n ? n : first + count;
    return b > a ? moe_before[static_cast<std::size_t>(b)] - moe_before[static_cast<std::size_t>(a)] : 0;
  }
};

// Returns the parameter counts of `m`. A stated Ψ is spread evenly over the layers (per_layer = Ψ/L,
// no separate embedding), because a stated total carries no placement. Throws bad_input on overflow.
param_counts count_params(const model_spec& m);

// Throws bad_input naming the first field that is missing, non-positive, absurd or inconsistent. The one
// validation of a model, whatever it came from (a preset, a model file, a HuggingFace config, a pack row):
// every reader ends with it, and estimate() runs it again on what it is given.
void validate(const model_spec& m);

// Returns the first way `a` and `b` differ in shape (what their parameters and activations are made of:
// layers, widths, heads, vocabulary, tied embeddings, MLP and norm kinds, q/k norms, experts and their
// placement, MTP layers, multi-latent attention), as "layers 80 and 48"; "" when they are the same model
// whatever their names, sources, default sequence, positions, dropout or biases. Two launches that name one
// model are checked with it before one is planned as the other.
std::string shape_difference(const model_spec& a, const model_spec& b);

// Reads the preset / model-file format (docs/model.md, "Model files"). Throws bad_input.
model_spec model_from_json(const nlohmann::json& j, const std::string& origin);
nlohmann::json model_to_json(const model_spec& m);

const char* to_string(mlp_kind k);
const char* to_string(norm_kind k);
const char* to_string(position_kind k);

}  // namespace headroom
