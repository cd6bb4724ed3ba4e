// launch_levers.cpp: see launch_levers.hpp.
#include "launch_levers.hpp"

#include <algorithm>
#include <string>

#include "planner/errors.hpp"
#include "planner/model_files.hpp"

namespace headroom::cli {

namespace {

// Megatron-LM's flags for a setting (arguments.py): "" when Megatron has none.
std::string megatron_flags(std::string_view flag, const std::string& v) {
  if (flag == "--recompute" && v == "full")  // a layer's input kept, every layer recomputed
    return "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1";
  if (flag == "--recompute" && v == "selective") return "--recompute-granularity selective";
  if (flag == "--tp") return "--tensor-model-parallel-size " + v;
  if (flag == "--pp") return "--pipeline-model-parallel-size " + v;
  if (flag == "--cp") return "--context-parallel-size " + v;
  if (flag == "--ep") return "--expert-model-parallel-size " + v;
  if (flag == "--etp") return "--expert-tensor-parallel-size " + v;
  if (flag == "--vpp") return "--num-virtual-stages-per-pipeline-rank " + v;
  if (flag == "--sequence-parallel" && v == "on") return "--sequence-parallel";
  if (flag == "--zero" && v == "1") return "--use-distributed-optimizer";  // ZeRO-1-like, its only stage
  if (flag == "--seq") return "--seq-length " + v;
  if (flag == "--micro-batch") return "--micro-batch-size " + v;
  if (flag == "--offload-optimizer") return "--optimizer-cpu-offload";
  if (flag == "--loss" && v == "compiled")  // language_module.py: the native implementation is the default
    return "--cross-entropy-loss-fusion --cross-entropy-fusion-impl native";
  // --attention-backend (megatron/training/arguments.py): unfused keeps the s x s scores, flash does not.
  if (flag == "--attention" && (v == "eager" || v == "flash"))
    return "--attention-backend " + std::string(v == "eager" ? "unfused" : "flash");
  return "";
}

// The Megatron-LM flag whose absence is the setting (a switch appending cannot undo): "" when none.
std::string megatron_absent(std::string_view flag, const std::string& v) {
  if (flag == "--sequence-parallel" && v == "off") return "--sequence-parallel";
  if (flag == "--recompute" && v == "none") return "--recompute-granularity and its --recompute-* flags";
  if (flag == "--zero" && v == "0") return "--use-distributed-optimizer";
  if (flag == "--loss" && v == "fused") return "--cross-entropy-loss-fusion";
  return "";
}

// torchtitan's job-file key for a setting (job_config.py): "" when it has none. Under a pipeline (`pipelined`:
// pp > 1) the micro-batch is parallelism.pipeline_parallel_microbatch_size, local_batch_size being the rank's
// batch that the schedule splits (planner/imports/torchtitan_config.cpp reads it so).
std::string torchtitan_key(std::string_view flag, const std::string& v, bool pipelined) {
  if (flag == "--recompute" && (v == "full" || v == "none")) return "activation_checkpoint.mode=" + v;
  if (flag == "--tp") return "parallelism.tensor_parallel_degree=" + v;
  if (flag == "--pp") return "parallelism.pipeline_parallel_degree=" + v;
  if (flag == "--cp") return "parallelism.context_parallel_degree=" + v;
  if (flag == "--ep") return "parallelism.expert_parallel_degree=" + v;
  if (flag == "--etp") return "parallelism.expert_tensor_parallel_degree=" + v;
  // FSDP (ZeRO-3-like) over the GPUs left, or plain replicas (job_config.py: one degree may be -1).
  if (flag == "--zero" && v == "3") return "parallelism.data_parallel_shard_degree=-1";
  if (flag == "--zero" && v == "0")
    return "parallelism.data_parallel_shard_degree=1 --torchtitan-override "
           "parallelism.data_parallel_replicate_degree=-1";
  if (flag == "--seq") return "training.seq_len=" + v;
  if (flag == "--micro-batch")
    return pipelined ? "parallelism.pipeline_parallel_microbatch_size=" + v : "training.local_batch_size=" + v;
  return "";
}

// DeepSpeed's JSON key for a setting (runtime/config.py, runtime/zero/config.py): "" when it has none.
std::string deepspeed_key(std::string_view flag, const std::string& v) {
  if (flag == "--zero") return "zero_optimization.stage " + v;
  if (flag == "--offload-optimizer") return "zero_optimization.offload_optimizer.device \"cpu\"";
  if (flag == "--micro-batch") return "train_micro_batch_size_per_gpu " + v;
  return "";
}

// Returns the Megatron flag a change of `flag` must drop for the one it appends: a vpp change appends
// --num-virtual-stages-per-pipeline-rank, which Megatron refuses beside the launch's own way of stating it
// (`vpp_flag`, launch_import::vpp_flag; arguments.py takes one of the three). "" when none.
std::string megatron_replaced(std::string_view flag, const std::string& vpp_flag) {
  return flag == "--vpp" ? vpp_flag : "";
}

// Returns how a launch of `kind` changes setting `flag` to `v`, "" when it cannot state it (`pipelined`: the
// layout it lands on has pp > 1; `vpp_flag`: how a Megatron launch states its vpp).
std::string change_in(launch_kind kind, std::string_view flag, const std::string& v, bool pipelined,
                      const std::string& vpp_flag) {
  if (kind == launch_kind::megatron) {
    if (const std::string a = megatron_absent(flag, v); !a.empty())
      return "drop " + a + " from --megatron-args";
    const std::string m = megatron_flags(flag, v), gone = megatron_replaced(flag, vpp_flag);
    if (m.empty()) return "";
    return "append " + m + " to --megatron-args" + (gone.empty() ? "" : " and drop " + gone + " from it");
  }
  if (kind == launch_kind::torchtitan) {
    const std::string k = torchtitan_key(flag, v, pipelined);
    return k.empty() ? "" : "--torchtitan-override " + k;
  }
  const std::string k = kind == launch_kind::deepspeed ? deepspeed_key(flag, v) : "";
  return k.empty() ? "" : "set " + k + " in the DeepSpeed JSON";
}

}  // namespace

launch_kind launch_of(const plan_options& o) {
  return !o.megatron_args.empty()       ? launch_kind::megatron
         : !o.torchtitan_config.empty() ? launch_kind::torchtitan
         : !o.deepspeed_config.empty()  ? launch_kind::deepspeed
                                        : launch_kind::none;
}

std::string launch_change(const plan_options& o, std::string_view flag, std::string_view value) {
  return change_in(launch_of(o), flag, std::string(value), o.pp > 1, o.megatron_vpp_flag);
}

std::string launch_changes(const plan_options& o,
                           const std::vector<std::pair<std::string, std::string>>& settings) {
  const launch_kind kind = launch_of(o);
  bool pipelined = o.pp > 1;  // the pp the settings land on
  for (const auto& [flag, v] : settings)
    if (flag == "--pp") pipelined = v != "1";
  std::string appended, dropped, overrides, keys, unstated;
  auto add = [](std::string& list, const std::string& item, const char* sep) {
    list += (list.empty() ? "" : sep) + item;
  };
  for (const auto& [flag, v] : settings) {
    if (change_in(kind, flag, v, pipelined, o.megatron_vpp_flag).empty())
      add(unstated, flag + " " + v, ", ");
    else if (kind == launch_kind::megatron && !megatron_absent(flag, v).empty())
      add(dropped, megatron_absent(flag, v), ", ");
    else if (kind == launch_kind::megatron) {
      add(appended, megatron_flags(flag, v), " ");
      if (const std::string gone = megatron_replaced(flag, o.megatron_vpp_flag); !gone.empty())
        add(dropped, gone, ", ");
    }
    else if (kind == launch_kind::torchtitan)
      add(overrides, "--torchtitan-override " + torchtitan_key(flag, v, pipelined), " ");
    else
      add(keys, deepspeed_key(flag, v), ", ");
  }
  std::string s;
  if (!appended.empty()) s = "append " + appended + " to --megatron-args";
  if (!dropped.empty())
    s += (s.empty() ? "" : " and ") + std::string("drop ") + dropped + " from --megatron-args";
  if (!overrides.empty()) s = overrides;
  if (!keys.empty()) s = "set " + keys + " in the DeepSpeed JSON";
  if (!unstated.empty()) s += (s.empty() ? "" : "; ") + unstated + " (the launch has no setting for it)";
  return s;
}

flag_spelling launch_spelling(const plan_options& o) {
  if (o.imported.empty()) return {};
  const std::vector<std::string> stated = o.imported;
  const launch_kind kind = launch_of(o);
  const bool pipelined = o.pp > 1;
  const std::string vpp_flag = o.megatron_vpp_flag;
  return [stated, kind, pipelined, vpp_flag](std::string_view flag, std::string_view value) -> std::string {
    const std::string v(value);
    if (std::find(stated.begin(), stated.end(), flag) == stated.end())
      return v.empty() ? std::string(flag) : std::string(flag) + " " + v;
    return change_in(kind, flag, v, pipelined, vpp_flag);
  };
}

void rethrow_for_launch(const plan_options& o, const bad_input& e) {
  const std::string flag = "--" + e.field();
  if (launch_of(o) == launch_kind::none || std::find(o.imported.begin(), o.imported.end(), flag) == o.imported.end())
    throw e;
  const std::string file = !o.megatron_args.empty()     ? o.megatron_args
                           : !o.torchtitan_config.empty() ? o.torchtitan_config
                                                          : o.deepspeed_config;
  const std::string change = launch_change(o, flag, "N");
  throw bad_input(shown_name(file) + ": " + e.field(),
                  e.problem() + " (the launch's " + flag +
                      "): plan another --gpus" + (change.empty() ? "" : ", or " + change));
}

}  // namespace headroom::cli
