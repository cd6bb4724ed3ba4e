// output_phase.cpp: the last stage's loss as each framework holds the logits (ledger.hpp,
// output_phase_tensors; docs/model.md section 10, "Output phase"): Megatron's vocab-parallel cross-entropy,
// plain or compiled, and PyTorch's F.cross_entropy on upcast logits as torchtitan runs it.
#include <algorithm>
#include <string>

#include "errors.hpp"
#include "ledger.hpp"

namespace headroom {

namespace {

// The output phase's tensors as output_phase_tensors lists them: logits-sized (tokens x the rank's vocabulary
// columns) or token-sized, each with the steps of the phase that make and free it.
struct phase_tensors {
  std::int64_t tokens, v, act;
  std::string cpdiv;
  std::vector<ledger_entry> out;

  void add(std::string name, std::string formula, std::vector<std::int64_t> shape, std::int64_t dtype,
           int made, int freed) {
    ledger_entry e{std::move(name), std::move(formula), shape, dtype, detail::entry_bytes(shape, dtype),
                   act_role::saved};
    e.made = made;
    e.freed = freed;
    out.push_back(std::move(e));
  }
  void logit(std::string name, std::int64_t dtype, int made, int freed) {
    add(std::move(name), std::to_string(dtype) + "*s*b*V/t" + cpdiv, {tokens, v}, dtype, made, freed);
  }
  void token(std::string name, std::int64_t dtype, int made, int freed) {
    add(std::move(name), std::to_string(dtype) + "*s*b" + cpdiv, {tokens}, dtype, made, freed);
  }
};

// The step after every other of either unfused order: tensors kept to the end of the phase.
constexpr int phase_end = 9;

// Megatron's vocab-parallel cross-entropy, plain or compiled (loss_kind fused, compiled).
void megatron_loss_tensors(phase_tensors& t, const model_spec& m, const ledger_shape& s) {
  const std::int64_t act = t.act;
  // Megatron's _VocabParallelCrossEntropy: logits.float() is exponentiated and normalised in place and
  // saved; backward turns it into the gradient in place; the output layer's backward gets it cast back.
  // The forward peak (bf16 logits + their fp32 copy) holds the same 6 bytes per logit, so one step.
  t.logit("output.softmax", 4, 0, 0);
  t.logit("output.logits.grad", act, 0, 0);
  // Under --cross-entropy-loss-fusion (native) the same steps run as torch.compile'd functions
  // (megatron/core/fusions/fused_cross_entropy.py, jit_fuser = torch.compile from PyTorch 2.2 on,
  // megatron/core/jit.py; both at d98e8a64), and one more fp32 logits-sized tensor is alive at the loss.
  // Measured: two Megatron-LM tests that differ by the flag (and checkpoint settings) peak 409,468,928 bytes
  // apart, 3.96 bytes per local logit (docs/validation.md, "Other sources"). The tensor that fits is the
  // compiled functions' own result: the compiler makes their in-place steps on the fp32 copy out of place
  // (functionalisation) and writes the result back into the copy, so both are alive during the call.
  if (s.loss == loss_kind::compiled) t.logit("output.softmax.compiled_result", 4, 0, 0);
  t.token("output.loss", 4, 0, 0);
  t.token("output.target_mask", 1, 0, 0);
  t.token("output.masked_target", 8, 0, 0);
  // Each MTP module's loss (process_mtp_loss, multi_token_prediction.py @ d98e8a64) runs the same fused
  // cross-entropy in forward, before the main loss: its softmax is saved until its backward, after the main
  // loss's, so every one is alive at the main loss's peak.
  for (int k = 0; k < m.moe.mtp_layers; ++k) {
    const std::string mtp = "output.mtp" + std::to_string(k) + ".";
    t.logit(mtp + "softmax", 4, 0, 0);
    t.token(mtp + "loss", 4, 0, 0);
    t.token(mtp + "target_mask", 1, 0, 0);
    t.token(mtp + "masked_target", 8, 0, 0);
  }
}

// PyTorch's F.cross_entropy on upcast logits as torchtitan runs it (loss_kind unfused).
void unfused_loss_tensors(phase_tensors& t, const model_spec& m, const ledger_shape& s) {
  const std::int64_t act = t.act;
  // torchtitan's final norm and output layer (pytorch/torchtitan@9dec370 models/norms.py RMSNorm,
  // parallelize_llama.py l.129-143): the norm saves its fp32 upcast input and its bf16 output (sequence-
  // sharded under tp), the output linear the gathered bf16 input (ColwiseParallel, input Shard(1) made
  // Replicate), all alive from the forward's end to the output layer's backward.
  const std::int64_t sp_tokens = s.tp > 1 && s.sp ? t.tokens / s.tp : t.tokens;
  auto hidden = [&](std::string name, std::int64_t dtype, std::int64_t rows, const char* rows_formula) {
    t.add(std::move(name), std::to_string(dtype) + "*" + rows_formula + "*h" + t.cpdiv, {rows, m.hidden},
          dtype, 0, phase_end);
  };
  const char* sp_formula = sp_tokens != t.tokens ? "s*b/t" : "s*b";
  hidden("output.norm.input.fp32", 4, sp_tokens, sp_formula);
  hidden("output.norm.output", act, sp_tokens, sp_formula);
  hidden("output.linear.input", act, t.tokens, "s*b");
  // An MTP module's loss, made before the main one, keeps its saved log_softmax until its backward.
  for (int k = 0; k < m.moe.mtp_layers; ++k) {
    t.logit("output.mtp" + std::to_string(k) + ".log_softmax", 4, 0, phase_end);
    t.token("output.mtp" + std::to_string(k) + ".loss", 4, 0, phase_end);
  }
  if (s.tp == 1) {
    // F.cross_entropy(pred.flatten(0, 1).float(), labels), then `del pred` before loss.backward()
    // (pytorch/torchtitan@9dec370 train.py l.130-134, l.303-308): forward makes the bf16 logits (step 0),
    // their fp32 copy (1) and log_softmax's output, the one tensor it saves (2); nll_loss makes the loss
    // (3), after which the copy and the logits are gone. Backward: nll_loss_backward makes the gradient of
    // the saved output (4), _log_softmax_backward_data the gradient of its input (5), after which the saved
    // output and the first gradient are freed; _to_copy's backward casts it to bf16 (6). PyTorch's autograd
    // measures 12 bytes per logit at the peak (tests/loss_phase_test.py).
    t.logit("output.logits", act, 0, 3);
    t.logit("output.logits.fp32", 4, 1, 3);
    t.logit("output.log_softmax", 4, 2, 5);
    t.token("output.loss", 4, 3, phase_end);
    t.logit("output.log_softmax.grad", 4, 4, 5);
    t.logit("output.logits.fp32.grad", 4, 5, 6);
    t.logit("output.logits.grad", act, 6, phase_end);
  } else {
    // tp > 1: torchtitan runs the loss under loss_parallel() on vocab-sharded logits (the output layer's
    // output_layouts=Shard(-1)), whose DTensor handlers compute it (pytorch/pytorch
    // torch/distributed/tensor/parallel/loss.py, _log_softmax and _nll_loss_and_log_softmax_backward):
    // forward shifted = x - max (step 2) and exp(shifted) for the sum, a temporary (2), then the result
    // (3), which log_softmax saves; backward a zeros_like gradient (5), exp(result) and the sum
    // (grad_input + exp) (6), then the product with the incoming gradient (7), returned through the
    // no-op log_softmax backward and cast to bf16 (8): 16 bytes per logit at the backward peak.
    t.logit("output.logits", act, 0, 4);
    t.logit("output.logits.fp32", 4, 1, 4);
    t.logit("output.log_softmax.shifted", 4, 2, 3);
    t.logit("output.log_softmax.exp", 4, 2, 2);
    t.logit("output.log_softmax", 4, 3, 7);
    t.token("output.loss", 4, 4, phase_end);
    t.logit("output.nll.grad_input", 4, 5, 7);
    t.logit("output.nll.exp", 4, 6, 6);
    t.logit("output.nll.sum", 4, 6, 7);
    t.logit("output.logits.fp32.grad", 4, 7, 8);
    t.logit("output.logits.grad", act, 8, phase_end);
  }
}

}  // namespace

std::vector<ledger_entry> output_phase_tensors(const model_spec& m, const ledger_shape& s) {
  phase_tensors t{detail::checked_mul(s.seq / s.cp, s.micro_batch, "logits"),
                  (m.vocab + s.tp - 1) / s.tp,
                  s.activation_bytes,
                  s.cp > 1 ? "/cp" : "",
                  {}};
  if (s.loss == loss_kind::unfused)
    unfused_loss_tensors(t, m, s);
  else
    megatron_loss_tensors(t, m, s);
  return std::move(t.out);
}

std::int64_t output_phase_peak(const std::vector<ledger_entry>& phase) {
  std::int64_t live = 0, peak = 0;
  walk_output_phase(
      phase,
      [&](std::size_t i) {
        live = detail::checked_add(live, phase[i].bytes, "output phase");
        peak = std::max(peak, live);
      },
      [&](std::size_t i) { live -= phase[i].bytes; });
  return peak;
}

std::int64_t logits_bytes(const model_spec& m, const ledger_shape& s) {
  std::int64_t tokens = detail::checked_mul(s.seq / s.cp, s.micro_batch, "logits");
  return detail::checked_mul(detail::checked_mul(tokens, (m.vocab + s.tp - 1) / s.tp, "logits"), 4, "logits");
}

}  // namespace headroom
