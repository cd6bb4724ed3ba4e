// layout.hpp: how a job is laid out over GPUs (tp, pp, cp, dp, ZeRO stage, recompute) and the training
// and device settings a plan is made for. One `problem` plus one `layout` is one plan.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "errors.hpp"
#include "model_spec.hpp"
#include "recipe.hpp"
#include "reserve.hpp"
#include "units.hpp"

namespace headroom {

enum class recompute_mode { none, selective, full };
enum class attention_kind { eager, flash };
// How the loss holds the logits (docs/model.md, "The output phase"): fused = Megatron's vocab-parallel
// cross-entropy (an fp32 copy turned into the softmax in place, saved for backward); unfused = PyTorch's
// F.cross_entropy on upcast logits (log_softmax keeps its own fp32 output, backward makes two more).
enum class loss_kind { fused, unfused };

// How the layers are cut into pipeline stages (planner/schedule.hpp). All defaults: a balanced split.
struct pipeline_split {
  std::vector<std::int64_t> layers;  // --pp-layout: one count per stage
  std::int64_t first_stage = 0;      // --first-stage-layers (Megatron's decoder-first-pipeline-num-layers)
  std::int64_t last_stage = 0;       // --last-stage-layers
  bool embedding_as_layer = false;   // Megatron's account-for-embedding-in-pipeline-split, BLOOM's partition
  bool loss_as_layer = false;        // Megatron's account-for-loss-in-pipeline-split
  // Returns whether this is the default: DeepSpeed's uniform split of the transformer layers alone.
  bool is_balanced() const {
    return layers.empty() && first_stage == 0 && last_stage == 0 && !embedding_as_layer && !loss_as_layer;
  }
};

struct training_spec {
  std::int64_t seq = 2048;
  std::int64_t micro_batch = 1;
  std::int64_t global_batch =
      1536;  // sequences per step; sets the micro-batches per step (GPT-3: 1536 x 2048)
  attention_kind attention = attention_kind::eager;
  loss_kind loss = loss_kind::fused;
  pipeline_split split;
};

struct device_spec {
  std::int64_t capacity = 192 * gib;  // bytes of one GPU
  reserve_model
      reserve;  // kept back for context, NCCL, fragmentation (planner/reserve.hpp; the seed's 10 GiB)
  // Memory outside the allocator that the step peak must leave room for: CUDA context (512 MiB), cuBLAS
  // workspace (32 MiB), NCCL buffers (512 MiB): a documented default until `probe --overheads` measures it.
  std::int64_t fixed_overheads = 1056 * mib;
  int gpus_per_node = 8;
};

struct layout {
  int gpus = 1;
  int tp = 1;
  int pp = 1;
  int cp = 1;
  int vpp = 1;  // virtual (interleaved) stages per pipeline rank
  int zero = 0;
  recompute_mode recompute = recompute_mode::none;
  bool sequence_parallel = true;   // only meaningful when tp > 1
  bool offload_optimizer = false;  // ZeRO-Offload: master and optimizer states in host memory
  int zero3_inflight_units = 2;    // unsharded layers gathered at once under ZeRO-3
  // DeepSpeed's stage3_max_live_parameters: gathered parameters alive at once (0: no limit); it caps the
  // layers in flight at the whole layers that fit in it.
  std::int64_t zero3_live_params = 0;
  // FSDP's reshard_after_forward: false keeps every gathered layer from its forward to its backward, so the
  // stage's whole unsharded parameters are the transient (ZeRO-2-like parameter memory).
  bool reshard_after_forward = true;

  // Returns the data-parallel degree N / (tp * pp * cp).
  int dp() const { return gpus / (tp * pp * cp); }
  // Returns the number of ranks ZeRO shards over (dp * cp, as Megatron's distributed optimizer does).
  int shard_degree() const { return dp() * cp; }
  bool sp() const { return sequence_parallel && tp > 1; }
};

struct problem {
  model_spec model;
  recipe precision;  // bytes per parameter of each buffer, and of activations
  training_spec training;
  device_spec device;
};

// Returns the first field of the layout that does not fit the model or the GPU count, as the bad_input
// to throw, or nullopt: heads or kv heads not divisible by tp, layers not divisible by pp (or by pp * vpp),
// tp * pp * cp not dividing N, tp beyond one node, sequence not divisible by cp (or by tp under sequence
// parallelism). The one statement of what a valid layout is; --suggest enumerates by it.
std::optional<bad_input> layout_error(const problem& p, const layout& l);
// Throws layout_error(p, l) when there is one.
void validate(const problem& p, const layout& l);

// Returns a problem for `m` with the seed's defaults: the bf16-adam recipe (16 bytes per parameter), the
// model's own sequence length, micro-batch 1, 192 GiB GPUs with a 10 GiB reserve.
problem default_problem(model_spec m);
// Throws bad_input when the training or device settings are non-positive or absurd.
void validate(const training_spec& t, const device_spec& d);

const char* to_string(recompute_mode r);
const char* to_string(attention_kind a);
const char* to_string(loss_kind k);
// Returns "tp=2 pp=1 dp=16" plus " cp=2", " vpp=2", " sp" when they apply.
std::string axes_string(const layout& l);
// Returns the seed's strategy name: "DDP", "ZeRO-1".."ZeRO-3" (+ " + offload").
std::string zero_name(const layout& l);

}  // namespace headroom
