// plan_assumptions.cpp: see plan_assumptions.hpp.
#include "plan_assumptions.hpp"

#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/units.hpp"

namespace headroom::cli {

namespace {

// Returns where the sequence length came from, and whether it passes the model's positions.
std::string sequence_phrase(const problem& p, const plan_options& o) {
  const std::int64_t seq = p.training.seq, positions = p.model.max_positions;
  std::string s = std::to_string(seq);
  if (given(o, "--seq"))
    s += o.app && o.app->count("--seq") ? " (--seq)" : " (from the launch file)";
  else if (!o.hf_config.empty() && positions > seq)
    s += ", the HF config's max_position_embeddings " + std::to_string(positions) + " capped at " +
         std::to_string(seq) + " (--seq to plan the longer one)";
  else if (!o.hf_config.empty())
    s += ", the HF config's max_position_embeddings (--seq)";
  else if (!o.preset.empty())
    s += ", the preset's (--seq)";
  else
    s += ", the model file's (--seq)";
  if (positions > 0 && seq > positions)
    s += "; above the model's " + std::to_string(positions) + " positions (it was not trained that long)";
  return s;
}

// Returns whether the model uses dropout, where that came from and how to change it: its masks are kept for
// backward (the ledger's dropout entries), so it changes the activations.
std::string dropout_phrase(const problem& p, const plan_options& o) {
  std::string s = p.model.dropout ? "on: its masks are kept for backward" : "off: no masks are kept";
  if (o.inline_model && !o.megatron_args.empty())
    s += p.model.dropout ? "; Megatron's --attention-dropout and --hidden-dropout, 0.1 each unless the launch "
                           "sets them (append --attention-dropout 0 --hidden-dropout 0 to --megatron-args)"
                         : "; the launch sets --attention-dropout and --hidden-dropout to 0";
  else if (!o.hf_config.empty())
    s += "; the HF config's dropout probabilities (attention_dropout and the family's others)";
  else if (!o.preset.empty())
    s += "; the preset's (a --model file with \"dropout\": " + std::string(p.model.dropout ? "false" : "true") +
         " changes it)";
  else
    s += "; the model's";
  return s;
}

}  // namespace

std::string assumption_lines(const problem& p, const plan_options& o) {
  std::string capacity = gib_str(p.device.capacity, 1) + " GiB";
  if (given(o, "--gpu-mem"))
    capacity += o.app && o.app->count("--gpu-mem") ? " (--gpu-mem)" : " (from the launch file)";
  else if (!p.device.gpu_type.empty())
    capacity += ", " + printable(p.device.gpu_type) + "'s total as the driver reports it (--gpu-type, --gpu-mem)";
  else
    capacity += " assumed, no --gpu-type or --gpu-mem given: a B200-class GPU (--gpu-type h100-80gb is 79.6; "
                "`headroom gpus` lists them)";
  std::string attention =
      p.training.attention == attention_kind::eager
          ? "eager: the s x s scores are kept for backward (--attention flash)"
      : p.training.attention == attention_kind::flex
          ? "flex: compiled flex_attention, no s x s scores are kept (--attention flash, eager)"
          : "flash: no s x s scores are kept (--attention eager)";
  if (hf_default_attention(o))
    attention += "; transformers' default, SDPA, for an --hf-config";
  const char* loss =
      p.training.loss == loss_kind::fused
          ? "fused: Megatron's vocab-parallel cross-entropy, 6 bytes per logit (--loss unfused)"
      : p.training.loss == loss_kind::compiled
          ? "compiled: Megatron's --cross-entropy-loss-fusion, the vocab-parallel cross-entropy under "
            "torch.compile, 10 bytes per logit (--loss fused)"
          : "unfused: F.cross_entropy on upcast logits, 12 bytes per logit at its peak, 16 under tp (--loss "
            "fused)";
  const auto& r = p.device.reserve;
  std::string reserve = r.fixed_only() ? gib_str(r.fixed, 1) + " GiB, " + printable(r.source)
                                       : "calibrated: " + printable(r.source);
  reserve += " (--reserve, --calibration)";
  std::string s = "assumptions (each changes the answer; the flag after it changes it):\n";
  s += "  GPU memory  " + capacity + "\n";
  s += "  attention   " + attention + "\n";
  s += "  dropout     " + dropout_phrase(p, o) + "\n";
  s += "  loss        " + std::string(loss) + "\n";
  s += "  sequence    " + sequence_phrase(p, o) + "\n";
  s += "  reserve     " + reserve + "\n";
  if (!o.alloc_conf.empty())  // an imported launch's environment (ModelZoo's ENV_VARS)
    s += "  allocator   PYTORCH_CUDA_ALLOC_CONF=" + printable(o.alloc_conf, 80) + ", from " +
         printable(o.alloc_conf_from, 80) +
         " (the allocator emulation runs under it; the analytic figures do not depend on it)\n";
  return s;
}

std::string calibration_lines(const calibrate::calibration& c, const problem& p, const layout* l,
                              const plan_options& o) {
  std::string s = "  calibration " + printable(o.calibration) + ": " + std::to_string(c.records.size()) +
                  " records" + (c.gpu.empty() ? "" : ", " + printable(c.gpu)) + "\n";
  const calibrate::target t{o.target_gpu, o.target_driver, "", o.gpu_type};
  std::vector<std::string> outside;
  if (!c.domain.stated) outside = calibrate::mismatches(c, t);  // a file before the domain: what it holds for
  if (l) {
    const auto more = calibrate::outside_domain(c, p, *l, t);
    outside.insert(outside.end(), more.begin(), more.end());
  }
  for (const auto& line : outside) {
    if (o.strict_calibration) throw bad_input("calibration", line + " (--strict-calibration)");
    s += "  warning: outside the calibration's domain: " + printable(line) + "\n";
  }
  if (!outside.empty())  // what was used, and the two ways not to
    s += "  the calibrated reserve is used all the same: --strict-calibration refuses a plan outside its domain, "
         "and dropping --calibration plans with the default reserve\n";
  return s;
}

}  // namespace headroom::cli
