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
  // --attention-backend (megatron/training/arguments.py): unfused keeps the s x s scores, flash does not.
  if (flag == "--attention" && (v == "eager" || v == "flash"))
    return "--attention-backend " + std::string(v == "eager" ? "unfused" : "flash");
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

// Returns how a launch of `kind` (0 Megatron arguments, 1 a torchtitan file, 2 a DeepSpeed JSON) changes
// setting `flag` to `v`, "" when it cannot state it.
std::string change_in(int kind, std::string_view flag, const std::string& v) {
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
}

int launch_kind(const plan_options& o) {
  return !o.megatron_args.empty() ? 0 : !o.torchtitan_config.empty() ? 1 : 2;
}

}  // namespace

std::string launch_change(const plan_options& o, std::string_view flag, std::string_view value) {
  return change_in(launch_kind(o), flag, std::string(value));
}

flag_spelling launch_spelling(const plan_options& o) {
  if (o.imported.empty()) return {};
  const std::vector<std::string> stated = o.imported;
  const int kind = launch_kind(o);
  return [stated, kind](std::string_view flag, std::string_view value) -> std::string {
    const std::string v(value);
    if (std::find(stated.begin(), stated.end(), flag) == stated.end())
      return v.empty() ? std::string(flag) : std::string(flag) + " " + v;
    return change_in(kind, flag, v);
  };
}

}  // namespace headroom::cli
