// ledger.hpp: the one inventory of the tensors a transformer layer keeps for its backward pass.
// The planner sums it (activations), `--explain` prints it, and the probes replay it, so that predicted
// and measured always speak of the same tensors. Formulas: Korthikanti et al., arXiv 2205.05198, and
// docs/model.md section 4, which derives each line.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "layout.hpp"
#include "model_spec.hpp"

namespace headroom {

enum class act_role {
  layer_input,     // the layer's input: the one tensor full recomputation keeps
  saved,           // kept without recomputation and with selective recomputation
  attention_core,  // the attention core's internals: dropped by selective recomputation
};

// The keep-rule of each recompute mode, stated once: none keeps every tensor for backward, selective all
// but the attention core (Korthikanti et al.'s selective recomputation), full only the layer's input.
inline bool kept_for_backward(act_role role, recompute_mode r) {
  if (r == recompute_mode::none) return true;
  if (r == recompute_mode::selective) return role != act_role::attention_core;
  return role == act_role::layer_input;
}

struct ledger_entry {
  std::string name;                 // "attn.softmax.output"
  std::string formula;              // closed form of `bytes` on one rank, e.g. "2*a*s^2*b/t"
  std::vector<std::int64_t> shape;  // the tensor's shape on one rank, after tp / sp / cp division
  std::int64_t dtype_bytes = 2;
  std::int64_t bytes = 0;  // product of shape times dtype_bytes
  act_role role = act_role::saved;
};

// What the per-layer ledger depends on besides the model.
struct ledger_shape {
  std::int64_t seq = 2048;
  std::int64_t micro_batch = 1;
  int tp = 1;
  bool sp = false;  // sequence parallel: the tensors outside the tp-split regions are divided by tp too
  int cp = 1;
  attention_kind attention = attention_kind::eager;
  std::int64_t activation_bytes = 2;
  loss_kind loss = loss_kind::fused;
};

// Returns the ledger shape of one layout of a problem.
ledger_shape shape_of(const problem& p, const layout& l);

// Returns, in order of creation in the forward pass, the tensors one layer keeps for backward for one
// micro-batch on one rank, without recomputation. Throws bad_input if a byte count would overflow.
std::vector<ledger_entry> layer_ledger(const model_spec& m, const ledger_shape& s);

// Bytes one layer keeps per micro-batch under each recompute mode.
struct activation_sums {
  std::int64_t none = 0;
  std::int64_t selective = 0;  // without the attention core
  std::int64_t full = 0;       // the layer input only
  // Returns the bytes kept under `r`.
  std::int64_t of(recompute_mode r) const {
    return r == recompute_mode::none ? none : r == recompute_mode::selective ? selective : full;
  }
};

// Returns the per-layer sums of a ledger under each recompute mode, in bytes.
activation_sums sum_ledger(const std::vector<ledger_entry>& ledger);

// Returns the tensors alive together during one layer's backward pass besides the saved activations:
// the tensors the recompute mode dropped (recomputed now), the gradients flowing through the layer
// (w.r.t. its output and input, its widest MLP activation and, eager, the attention probabilities), and,
// when `unsharded_grad_bytes` > 0 (ZeRO >= 2), the layer's parameter gradients before reduce-scatter.
// The reference case leaves this working set to the reserve; the planner reports it and the probes replay it.
std::vector<ledger_entry> backward_working_set(const model_spec& m, const ledger_shape& s, recompute_mode r,
                                               std::int64_t unsharded_grad_bytes);

// Returns the output layer's tensors alive together at the peak of the loss on the last stage, as the
// loss holds them (ledger_shape::loss). fused (Megatron's vocab-parallel cross-entropy): the fp32 softmax
// saved for backward and turned into the gradient in place, the bf16 gradient cast for the output layer's
// backward, and per token the loss, target mask and masked target: 6 bytes per logit. unfused (PyTorch's
// F.cross_entropy on upcast logits): bf16 logits, their fp32 copy, log_softmax's saved fp32 output, and in
// backward the fp32 gradients of both: 18 bytes per logit. docs/model.md gives the sources.
std::vector<ledger_entry> output_phase_tensors(const model_spec& m, const ledger_shape& s);

// What the step peak adds to the saved activations, per micro-batch on one rank: the backward working set
// of one layer under each recompute mode (without ZeRO's unsharded gradients, which depend on the
// layout) and the last stage's output phase. The search precomputes these per (tp, sp, cp).
struct peak_sums {
  std::array<std::int64_t, 3> working_set{};  // indexed by recompute_mode
  std::int64_t output_phase = 0;
  std::int64_t first_stage = 0;  // first_stage_tensors, per micro-batch in flight
  std::int64_t working_set_of(recompute_mode r) const { return working_set[static_cast<std::size_t>(r)]; }
};

// Returns the peak sums of one layer shape.
peak_sums sum_peaks(const model_spec& m, const ledger_shape& s);

// Returns what the first stage keeps per micro-batch besides its layers: the embedding output's dropout
// mask, s*b*h bytes (/t with sequence parallelism) when the model uses dropout (Korthikanti et al.,
// section 4.3: sbhp/t on the first stage with p micro-batches in flight). Kept under every recompute mode:
// recomputation covers the transformer layers, not the embedding.
std::vector<ledger_entry> first_stage_tensors(const model_spec& m, const ledger_shape& s);

// Returns the sum of the entries' bytes.
std::int64_t total_bytes(const std::vector<ledger_entry>& entries);

// Returns the bytes of one fp32 copy of the logits on the last stage (tokens x vocab / tp x 4). The reference
// total leaves logits to the reserve; the planner reports them but does not add them.
std::int64_t logits_bytes(const model_spec& m, const ledger_shape& s);

}  // namespace headroom
