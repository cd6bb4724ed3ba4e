// launch_levers.cpp: see launch_levers.hpp.
#include "launch_levers.hpp"

#include <algorithm>
#include <string>

namespace headroom::cli {

namespace {

// Megatron-LM's flags for a setting (arguments.py): "" when Megatron has none.
std::string megatron_flags(std::string_view flag, const std::string& v) {
  if (flag == "--recompute" && v == "full")  // a layer's input kept, every layer recomputed
    return "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1";
  if (flag == "--recompute" && v == "selective") return "--recompute-granularity selective";
  if (flag == "--cp") return "--context-parallel-size " + v;
  if (flag == "--seq") return "--seq-length " + v;
  if (flag == "--micro-batch") return "--micro-batch-size " + v;
  if (flag == "--offload-optimizer") return "--optimizer-cpu-offload";
  return "";
}

// torchtitan's job-file key for a setting (job_config.py): "" when it has none.
std::string torchtitan_key(std::string_view flag, const std::string& v) {
  if (flag == "--recompute" && (v == "full" || v == "none")) return "activation_checkpoint.mode=" + v;
  if (flag == "--cp") return "parallelism.context_parallel_degree=" + v;
  if (flag == "--seq") return "training.seq_len=" + v;
  if (flag == "--micro-batch") return "training.local_batch_size=" + v;
  return "";
}

// DeepSpeed's JSON key for a setting (runtime/config.py, runtime/zero/config.py): "" when it has none.
std::string deepspeed_key(std::string_view flag, const std::string& v) {
  if (flag == "--zero") return "zero_optimization.stage " + v;
  if (flag == "--offload-optimizer") return "zero_optimization.offload_optimizer.device \"cpu\"";
  if (flag == "--micro-batch") return "train_micro_batch_size_per_gpu " + v;
  return "";
}

}  // namespace

flag_spelling launch_spelling(const plan_options& o) {
  if (o.imported.empty()) return {};
  const std::vector<std::string> stated = o.imported;
  const int kind = !o.megatron_args.empty() ? 0 : !o.torchtitan_config.empty() ? 1 : 2;
  return [stated, kind](std::string_view flag, std::string_view value) -> std::string {
    const std::string v(value);
    const std::string plain = v.empty() ? std::string(flag) : std::string(flag) + " " + v;
    if (std::find(stated.begin(), stated.end(), flag) == stated.end()) return plain;
    if (kind == 0) {
      const std::string m = megatron_flags(flag, v);
      return m.empty() ? "" : "append " + m + " to --megatron-args";
    }
    if (kind == 1) {
      const std::string k = torchtitan_key(flag, v);
      return k.empty() ? "" : "--torchtitan-override " + k;
    }
    const std::string k = deepspeed_key(flag, v);
    return k.empty() ? "" : "set " + k + " in the DeepSpeed JSON";
  };
}

}  // namespace headroom::cli
