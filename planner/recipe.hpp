// recipe.hpp: precision recipes. A recipe is the list of per-parameter buffers a rank keeps (weights,
// gradients, master copy, optimizer states), each with its bytes per parameter and the ZeRO stage from
// which it is sharded over the data-parallel ranks.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace headroom {

enum class buffer_kind { params, grads, master, optimizer };

struct recipe_buffer {
  std::string name;    // "bf16 parameters"
  buffer_kind kind;    // what the buffer is, for offload and for the reference case's columns
  std::int64_t bytes;  // bytes per parameter
  int shard_from;      // ZeRO stage from which it is divided by dp (params 3, grads 2, master/optimizer 1;
                       // 4: never, as Megatron's fp32 main gradients)
};

struct recipe {
  std::string name;
  std::vector<recipe_buffer> buffers;
  std::int64_t activation_bytes = 2;  // bytes of one activation element (16-bit by default)
  // Bytes per parameter of a gathered (unsharded) copy under ZeRO-3 / FSDP; 0: the parameters buffer's own
  // bytes. FSDP2 keeps fp32 shards and gathers bf16 (fsdp2-bf16: 2).
  std::int64_t gather_bytes = 0;
  // Bit i set in linear_only: buffer i holds the transformer layers' linear weights only (TransformerEngine's
  // FP8 copies); in other_only: everything else only (the embedding, output head, norms and router, which stay
  // bf16 under --fp8-param-gather).
  std::uint32_t linear_only = 0, other_only = 0;
  // FP8 training (TransformerEngine): the linear layers' inputs are saved for backward in FP8, 1 byte.
  bool fp8_activations = false;
  // The linear layers run FP8 GEMMs (TransformerEngine, or torchao's Float8Linear, which saves its inputs in
  // bf16): set by every FP8 recipe; trains_in_fp8() is the one test of FP8 training.
  bool fp8_gemms = false;
  // Returns whether the recipe trains its linear layers in FP8.
  bool trains_in_fp8() const { return fp8_gemms || fp8_activations; }
  // Bytes per parameter of the gathered copy of what is not a layer's linear weight (embedding, output head,
  // norms, router); 0: gather_bytes. torchao's FP8 all-gather gathers the linear weights in FP8 (1 byte) and
  // the rest in bf16 (fsdp2-fp8-allgather: 1 and 2).
  std::int64_t gather_bytes_other = 0;
  // The ZeRO stages the recipe's framework runs it with (lowest_zero / highest_zero narrow them further), and
  // why, for the refusal of another stage ("" when the buffers alone decide).
  int min_zero = 0, max_zero = 3;
  std::string zero_note{};
  // Where the buffers' bytes come from (framework file and line, issue), for `headroom recipes`.
  std::string source{};
  // Returns the bytes per parameter of a gathered copy (of the linear weights where the two differ).
  std::int64_t gathered_bytes_per_param() const { return gather_bytes > 0 ? gather_bytes : bytes_of(buffer_kind::params); }
  // Returns the bytes of a gathered copy of `linear` linear-weight parameters and `other` other parameters.
  std::int64_t gathered_bytes(std::int64_t linear, std::int64_t other) const {
    return linear * gathered_bytes_per_param() +
           other * (gather_bytes_other > 0 ? gather_bytes_other : gathered_bytes_per_param());
  }

  // Returns the sum of bytes per parameter over all buffers (16 for the default recipe).
  std::int64_t bytes_per_param() const;
  // Returns the bytes per parameter of the buffers of one kind.
  std::int64_t bytes_of(buffer_kind k) const;
  // Returns the ZeRO stages the recipe's framework runs it with, [lowest, highest]: a recipe with a buffer
  // that is never sharded (Megatron's fp32 main gradients, DeepSpeed's BF16_Optimizer accumulation buffer)
  // runs up to ZeRO 1, since ZeRO 2 and 3 shard gradients; Megatron's distributed optimizer is ZeRO 1
  // itself; Megatron's DDP (megatron-fp8) shards nothing, ZeRO 0; FSDP2 (fsdp2-fp8*) shards everything,
  // ZeRO 3 (min_zero, max_zero). layout_error refuses a stage outside it where data parallelism shards; the
  // search tries only it.
  int lowest_zero() const;
  int highest_zero() const;
};

inline constexpr std::size_t max_recipe_buffers = 8;

// The built-in recipes: "bf16-adam" (the reference case's default, 2+2+4+4+4), "fp32-adam", "fp16-adam",
// "bf16-adam-fp32-grads", "bf16-adam8bit", the frameworks' own (Megatron, DeepSpeed, FSDP2) and their FP8
// variants. Returns their names in the order `headroom recipes` lists them.
std::vector<std::string> builtin_recipes();
// Returns "sharded from ZeRO-k" or "never sharded".
std::string describe_sharding(const recipe_buffer& b);

// Returns the recipe called `name_or_path`: a built-in name, or a path to a JSON recipe file.
// Throws bad_input naming the problem.
recipe load_recipe(const std::string& name_or_path);
recipe recipe_from_json(const nlohmann::json& j, const std::string& origin);
nlohmann::json recipe_to_json(const recipe& r);
const char* to_string(buffer_kind k);

}  // namespace headroom
