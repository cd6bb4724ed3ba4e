// model_spec.hpp: the shape of a transformer, as a preset, a model file or a HuggingFace config gives it,
// and the parameter counts that follow from it.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

namespace headroom {

enum class mlp_kind { gelu, swiglu };         // gelu: two matrices h->f->h; swiglu: gate, up, down
enum class norm_kind { layernorm, rmsnorm };  // layernorm has weight and bias, rmsnorm weight only
enum class position_kind { learned, rotary, alibi };

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
};

// Where a model's parameters live, in parameters (not bytes).
struct param_counts {
  std::int64_t per_layer = 0;    // one transformer layer
  std::int64_t embedding = 0;    // word (+ position, + embedding norm) table, on the first pipeline stage
  std::int64_t output = 0;       // final norm + output head (a copy of the embedding when tied and pp > 1)
  std::int64_t output_tied = 0;  // the part of `output` that exists only when tied weights are split by pp
  std::int64_t total = 0;        // Ψ: stated when the preset states it, else derived
  bool stated = false;           // Ψ was stated: it is spread evenly over layers, as the reference case does
};

// Returns the parameter counts of `m`. A stated Ψ is spread evenly over the layers (per_layer = Ψ/L,
// no separate embedding), because a stated total carries no placement. Throws bad_input on overflow.
param_counts count_params(const model_spec& m);

// Throws bad_input naming the first field that is missing, non-positive, absurd or inconsistent. The one
// validation of a model, whatever it came from (a preset, a model file, a HuggingFace config, a pack row):
// every reader ends with it, and estimate() runs it again on what it is given.
void validate(const model_spec& m);

// Reads the preset / model-file format (docs/model.md, "Model files"). Throws bad_input.
model_spec model_from_json(const nlohmann::json& j, const std::string& origin);
nlohmann::json model_to_json(const model_spec& m);

const char* to_string(mlp_kind k);
const char* to_string(norm_kind k);
const char* to_string(position_kind k);

}  // namespace headroom
