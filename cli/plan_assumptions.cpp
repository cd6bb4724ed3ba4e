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

}  // namespace

std::string assumption_lines(const problem& p, const plan_options& o) {
  std::string capacity = gib_str(p.device.capacity, 1) + " GiB";
  if (given(o, "--gpu-mem"))
    capacity += o.app && o.app->count("--gpu-mem") ? " (--gpu-mem)" : " (from the launch file)";
  else if (!p.device.gpu_type.empty())
    capacity += ", " + printable(p.device.gpu_type) + "'s total as the driver reports it (--gpu-type, --gpu-mem)";
  else
    capacity += ", the default, a 192 GiB-class GPU (--gpu-type or --gpu-mem)";
  const char* attention =
      p.training.attention == attention_kind::eager
          ? "eager: the s x s scores are kept for backward (--attention flash)"
      : p.training.attention == attention_kind::flex
          ? "flex: compiled flex_attention, no s x s scores are kept (--attention flash, eager)"
          : "flash: no s x s scores are kept (--attention eager)";
  const char* loss = p.training.loss == loss_kind::fused
                         ? "fused: Megatron's vocab-parallel cross-entropy, 6 bytes per logit (--loss unfused)"
                         : "unfused: F.cross_entropy on upcast logits, 12 bytes per logit at its peak, 16 under tp (--loss fused)";
  const auto& r = p.device.reserve;
  std::string reserve = r.fixed_only() ? gib_str(r.fixed, 1) + " GiB, " + printable(r.source)
                                       : "calibrated: " + printable(r.source);
  reserve += " (--reserve, --calibration)";
  std::string s = "assumptions (each changes the answer; the flag after it changes it):\n";
  s += "  GPU memory  " + capacity + "\n";
  s += "  attention   " + std::string(attention) + "\n";
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
  return s;
}

}  // namespace headroom::cli
