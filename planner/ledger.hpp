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
  // An op output only torchtitan's per-op policy keeps (a matmul's, SDPA's, a reduce-scatter's or an
  // all-to-all's output that the other modes hold only while the layer runs forward): counted under
  // selective_op alone.
  op_output,
};

// The keep-rule of each recompute mode, stated once: none keeps every tensor for backward, selective all
// but the attention core (Korthikanti et al.'s selective recomputation), full only the layer's input.
// selective_op keeps, by role alone, the layer input (the entry-wise rule below reads ledger_entry::op_saved).
// full_every_N answers as full, the rule of its recomputed layers: ask it of mode_of_layer(r, j) for layer j.
inline bool kept_for_backward(act_role role, recompute_mode r) {
  if (full_every(r) > 0) r = recompute_mode::full;
  if (role == act_role::op_output || r == recompute_mode::selective_op)
    return r == recompute_mode::selective_op && (role == act_role::layer_input || role == act_role::op_output);
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
  std::uint32_t modules = 0;  // the recompute modules (module_bit) whose recomputation drops this tensor
  // torchtitan's per-op policy keeps this tensor (selective_op): the layer input, and the op outputs on its
  // save list that are themselves ledger tensors (an odd-numbered matmul's output such as SwiGLU's gate,
  // SDPA's log-sum-exp). Every op_output entry is kept too.
  bool op_saved = false;
  // The output phase only (output_phase_tensors): the steps of the loss's order, forward then backward, in
  // which this tensor is alive: made at step `made`, freed after step `freed` (0, 0 for a layer's tensor).
  int made = 0, freed = 0;
};

// The keep-rule with Megatron's recompute modules: selective recomputation drops the tensors of every
// module in `modules` (the attention core's when core_attn is among them); none and full as above.
inline bool kept_for_backward(const ledger_entry& e, recompute_mode r, std::uint32_t modules) {
  if (full_every(r) > 0) r = recompute_mode::full;
  if (r == recompute_mode::selective_op) return e.op_saved || e.role == act_role::op_output;
  if (e.role == act_role::op_output) return false;  // a transient of the forward in every other mode
  if (r != recompute_mode::selective) return kept_for_backward(e.role, r);
  if (e.role == act_role::attention_core && (modules & module_bit(recompute_module::core_attn))) return false;
  return (e.modules & modules) == 0;
}

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
  ledger_shape() = default;
  // The dense shape, in this order (the MoE fields below keep their defaults).
  ledger_shape(std::int64_t seq_, std::int64_t micro_batch_, int tp_, bool sp_, int cp_, attention_kind attention_,
               std::int64_t activation_bytes_, loss_kind loss_ = loss_kind::fused)
      : seq(seq_), micro_batch(micro_batch_), tp(tp_), sp(sp_), cp(cp_), attention(attention_),
        activation_bytes(activation_bytes_), loss(loss_) {}
  int ep = 1;   // expert parallelism: only the all-gather dispatcher's transient depends on it
  int etp = 0;  // expert tensor parallelism (0: tp)
  moe_routing routing;
  std::uint32_t recompute_modules = default_recompute_modules;
  bool fp8 = false;  // FP8 training: the linear layers' saved inputs are 1 byte (recipe::fp8_activations)
  // The layout runs torchtitan's per-op policy (recompute_mode::selective_op): the ledger adds the op outputs
  // it keeps (act_role::op_output). Set by shape_of; the other modes' sums do not depend on it.
  bool op_policy = false;
  // Returns the bytes of a linear layer's saved input: 1 under FP8, else the activation bytes.
  std::int64_t linear_input_bytes() const { return fp8 ? 1 : activation_bytes; }
  // Returns the expert tp degree.
  int expert_tp() const { return etp > 0 ? etp : tp; }
};

// Returns the ledger shape of one layout of a problem.
ledger_shape shape_of(const problem& p, const layout& l);

// Returns the kv heads on one tensor-parallel rank: kv_heads / tp, or 1 when there are fewer kv heads than tp
// ranks (each rank keeps a replica of one).
std::int64_t kv_heads_on_rank(const model_spec& m, std::int64_t tp);

// Returns, in order of creation in the forward pass, the tensors one layer keeps for backward for one
// micro-batch on one rank, without recomputation: the attention (standard or multi-latent) and the MLP, a
// MoE one (router, dispatch, routed and shared experts) when `moe_layer`. Standard attention lists the
// per-head q/k norms' inputs and statistics when m.qk_norm. With s.op_policy, a layer (dense or MoE,
// standard or multi-latent attention, SDPA or flex) also lists the op outputs torchtitan's per-op policy
// keeps and marks the ledger tensors it keeps (op_policy_entries in ledger.cpp). Megatron's unfused paths the
// model runs (model_spec::unfused) add what their code keeps: RoPE's cos and sin, glu()'s silu output and
// up + offset, the softmax's fp32 probabilities and causal mask (docs/model.md, "Megatron's unfused paths").
// Throws bad_input if a byte count would overflow, or when `moe_layer` is asked of a dense model.
std::vector<ledger_entry> layer_ledger(const model_spec& m, const ledger_shape& s, bool moe_layer = false);

// Returns the routed rows one rank's experts process per micro-batch in a MoE layer (docs/model.md, "Routed
// tokens"): balanced k * tokens * etp, with tokens = s*b/(t*c) under sequence parallelism (s*b/c without),
// times the imbalance factor (rounded up); with a capacity factor and padding, every expert's padded capacity
// ceil(tokens * k * cf / E) times E * etp. Expert parallelism does not change it: the all-to-all trades
// tokens between ranks, it does not remove them.
std::int64_t routed_rows(const model_spec& m, const ledger_shape& s);

// Bytes one layer keeps per micro-batch under each recompute mode.
struct activation_sums {
  std::int64_t none = 0;
  std::int64_t selective = 0;  // without the attention core
  std::int64_t full = 0;       // the layer input only
  std::int64_t op = 0;         // torchtitan's per-op policy: its saved op outputs and the layer input
  // Returns the bytes kept under `r`; under full_every_N the mean over N layers, ((N-1) none + full) / N
  // rounded up (a stage's exact figure is layered_bytes).
  std::int64_t of(recompute_mode r) const {
    if (const int n = full_every(r)) return ((n - 1) * none + full + n - 1) / n;
    return r == recompute_mode::none        ? none
           : r == recompute_mode::selective ? selective
           : r == recompute_mode::full      ? full
                                            : op;
  }
  // Returns the bytes `layers` layers keep under `r`: under full_every_N, layers / N of them fully recomputed
  // and the rest not; otherwise layers x of(r). No overflow check (callers bound the sums).
  std::int64_t layered_bytes(recompute_mode r, std::int64_t layers) const {
    if (full_every(r) == 0) return layers * of(r);
    const std::int64_t k = fully_recomputed_layers(r, layers);
    return (layers - k) * none + k * full;
  }
};

// Returns the per-layer sums of a ledger under each recompute mode, in bytes; selective drops the tensors
// of the recompute modules in `modules`.
activation_sums sum_ledger(const std::vector<ledger_entry>& ledger,
                           std::uint32_t modules = default_recompute_modules);

// Returns the tensors alive together during one layer's backward pass besides the saved activations:
// the tensors the recompute mode dropped (recomputed now; op outputs are never among them), the gradients
// flowing through the layer (w.r.t. its output and input, its widest MLP activation and, eager, the attention
// probabilities), and, when `unsharded_grad_bytes` > 0 (ZeRO >= 2), the layer's parameter gradients before
// reduce-scatter.
// The reference case leaves this working set to the reserve; the planner reports it and the probes replay it.
std::vector<ledger_entry> backward_working_set(const model_spec& m, const ledger_shape& s, recompute_mode r,
                                               std::int64_t unsharded_grad_bytes, bool moe_layer = false);

// Returns the output layer's tensors on the last stage in the order the loss makes them, each with the
// steps it is alive in (ledger_entry::made, freed), as the loss holds them (ledger_shape::loss). fused
// (Megatron's vocab-parallel cross-entropy): the fp32 softmax saved for backward and turned into the
// gradient in place, the bf16 gradient cast for the output layer's backward, and per token the loss, target
// mask and masked target, all alive together: 6 bytes per logit. unfused (PyTorch's F.cross_entropy on
// upcast logits, the logits released before backward as torchtitan's train loop does): bf16 logits, their
// fp32 copy and log_softmax's saved fp32 output in forward; in backward nll_loss's gradient of that output
// and log_softmax's gradient of its input beside the saved output (the peak, 12 bytes per logit), then the
// bf16 gradient cast back. compiled (Megatron's --cross-entropy-loss-fusion): fused's tensors and one more fp32
// logits-sized result of the compiled steps, 10 bytes per logit. docs/model.md section 10 gives the sources and
// the measurements; output_phase.cpp holds the three.
std::vector<ledger_entry> output_phase_tensors(const model_spec& m, const ledger_shape& s);

// Walks the output phase in its order, the one rule for the planner's peak and the step trace: each step
// calls make(i) for the tensors it makes (ledger_entry::made), then free(i) for those whose last step it is
// (ledger_entry::freed); i indexes `phase`.
template <class Make, class Free>
void walk_output_phase(const std::vector<ledger_entry>& phase, Make&& make, Free&& free) {
  int last = 0;
  for (const auto& e : phase) last = e.freed > last ? e.freed : last;
  for (int step = 0; step <= last; ++step) {
    for (std::size_t i = 0; i < phase.size(); ++i)
      if (phase[i].made == step) make(i);
    for (std::size_t i = 0; i < phase.size(); ++i)
      if (phase[i].freed == step) free(i);
  }
}

// Returns the most bytes the output phase's tensors hold at once over its steps (walk_output_phase), in bytes.
std::int64_t output_phase_peak(const std::vector<ledger_entry>& phase);

// What the step peak adds to the saved activations, per micro-batch on one rank: the backward working set
// of one layer under each recompute mode (without ZeRO's unsharded gradients, which depend on the
// layout) and the last stage's output phase. The search precomputes these per (tp, sp, cp).
struct peak_sums {
  std::array<std::int64_t, recompute_mode_count> working_set{};  // indexed by recompute_mode
  std::int64_t output_phase = 0;
  std::int64_t first_stage = 0;  // first_stage_tensors, per micro-batch in flight
  activation_sums mtp_module;    // mtp_module_tensors, one MTP module's beyond its transformer layer
  // A MoE model's MoE layers (all zero for a dense model): what one keeps per micro-batch under each
  // recompute mode, and its backward working set (dispatch buffers included) under each.
  activation_sums moe_layer;
  std::array<std::int64_t, recompute_mode_count> moe_working_set{};
  std::int64_t working_set_of(recompute_mode r) const { return working_set[static_cast<std::size_t>(r)]; }
  // Returns the working set of a stage that holds MoE layers or not: the larger of the two layer kinds'.
  std::int64_t working_set_of(recompute_mode r, bool has_moe) const {
    const auto i = static_cast<std::size_t>(r);
    return has_moe && moe_working_set[i] > working_set[i] ? moe_working_set[i] : working_set[i];
  }
};

// Returns the peak sums of one layer shape.
peak_sums sum_peaks(const model_spec& m, const ledger_shape& s);

// Returns what the first stage keeps per micro-batch besides its layers: the embedding output's dropout
// mask, s*b*h bytes (/t with sequence parallelism) when the model uses dropout (Korthikanti et al.,
// section 4.3: sbhp/t on the first stage with p micro-batches in flight). Kept under every recompute mode:
// recomputation covers the transformer layers, not the embedding.
std::vector<ledger_entry> first_stage_tensors(const model_spec& m, const ledger_shape& s);

// Returns what one multi-token-prediction module keeps per micro-batch besides its transformer layer (a layer
// of the model's last layer's kind, priced from that layer's ledger), from Megatron-LM's
// MultiTokenPredictionLayer (megatron/core/transformer/multi_token_prediction.py @ d98e8a64,
// _concat_embeddings, _postprocess, process_mtp_loss): the inputs of enorm (the shifted tokens' embedding) and
// hnorm (the decoder's output), eh_proj's input (their concatenation, 2h wide), the final norm's input and
// the output layer's input for the module's logits, each s*b*h wide (/t with sequence parallelism), and the
// norms' fp32 statistics. Full recomputation (the module's checkpointed forward) keeps only the two inputs
// and the output layer's (outside the checkpoint). Empty without MTP layers.
std::vector<ledger_entry> mtp_module_tensors(const model_spec& m, const ledger_shape& s);

// Returns the sum of the entries' bytes.
std::int64_t total_bytes(const std::vector<ledger_entry>& entries);

namespace detail {
// Returns the bytes of a tensor of `shape` with `dtype` bytes per element; throws bad_input on overflow.
std::int64_t entry_bytes(const std::vector<std::int64_t>& shape, std::int64_t dtype);
}  // namespace detail

// Returns the bytes of one fp32 copy of the logits on the last stage (tokens x vocab / tp x 4). The reference
// total leaves logits to the reserve; the planner reports them but does not add them.
std::int64_t logits_bytes(const model_spec& m, const ledger_shape& s);

}  // namespace headroom
