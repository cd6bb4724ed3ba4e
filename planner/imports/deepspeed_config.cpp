// deepspeed_config.cpp: reads a DeepSpeed JSON config into a launch_import (see deepspeed_config.hpp).
// Defaults, aliases and rules are DeepSpeed's (deepspeedai/DeepSpeed @ edaa7221, 2026-08-22) unless a
// comment names another source; "auto" is filled as Hugging Face transformers does
// (src/transformers/integrations/deepspeed.py @ 02348331: trainer_config_process, trainer_config_finalize).
#include "planner/imports/deepspeed_config.hpp"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <vector>

#include "planner/errors.hpp"
#include "planner/imports/config_file.hpp"
#include "planner/imports/deepspeed_keys.hpp"
#include "planner/json_fields.hpp"
#include "planner/model_files.hpp"

namespace headroom {

namespace {

using detail::key_rule;
using detail::key_use;
using nlohmann::json;
constexpr auto R = key_use::read;
constexpr auto U = key_use::unused;

std::string join(const std::string& a, const std::string& b) {
  return a.empty() ? b : a + "." + b;
}

// A count as a DeepSpeed file writes it: absent, "auto", or a whole number (5e8 is accepted: JSON has no
// integer exponent form, and DeepSpeed's pp_int fields take such doubles).
struct ds_count {
  bool present = false;
  bool is_auto = false;
  std::int64_t value = 0;
};

ds_count read_count(const json& obj, const std::string& key, const std::string& where, std::int64_t lo,
                    std::int64_t hi) {
  ds_count c;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return c;
  c.present = true;
  if (it->is_string()) {
    if (it->get<std::string>() != "auto")
      throw bad_input(join(where, key), "must be a whole number or \"auto\"");
    c.is_auto = true;
    return c;
  }
  c.value = *detail::opt_int_field(obj, key, where, lo, hi);
  return c;
}

// Returns the value of a key that DeepSpeed accepts under two names (`alias` is the JSON name, `field` the
// pydantic field name), refusing both at once.
ds_count read_aliased(const json& z, const char* alias, const char* field, std::int64_t lo, std::int64_t hi) {
  if (z.contains(alias) && z.contains(field))
    throw bad_input(join("zero_optimization", alias), std::string("given twice, also as '") + field + "'");
  return read_count(z, z.contains(alias) ? alias : field, "zero_optimization", lo, hi);
}

std::optional<bool> read_flag(const json& obj, const std::string& key, const std::string& where) {
  auto it = obj.find(key);
  if (it != obj.end() && it->is_string() && it->get<std::string>() == "auto") return std::nullopt;
  return detail::opt_bool_field(obj, key, where);
}

constexpr std::int64_t max_elements = std::int64_t{1} << 50;  // a bucket beyond 10^15 elements is a typo

struct offload {
  bool on = false;
  std::string device = "none";
};

// Reads offload_param / offload_optimizer (zero/offload_config.py l.14-105): device none, cpu or nvme.
offload read_offload(const json& z, const std::string& key, launch_import& imp) {
  offload o;
  auto it = z.find(key);
  if (it == z.end() || it->is_null()) return o;
  const std::string where = join("zero_optimization", key);
  if (!it->is_object()) throw bad_input(where, "must be an object such as {\"device\": \"cpu\"}");
  detail::classify_keys(*it, detail::deepspeed_offload_keys(), where, imp);
  o.device = detail::opt_string_field(*it, "device", where).value_or("none");
  if (o.device != "none" && o.device != "cpu" && o.device != "nvme")
    throw bad_input(where + ".device",
                    "must be \"none\", \"cpu\" or \"nvme\", got '" + shown_name(o.device) + "'");
  o.on = o.device != "none";
  if (o.device == "nvme")
    imp.unmodelled.push_back(where +
                             ".device: NVMe offload (ZeRO-Infinity) stages through GPU and host buffers");
  if (auto ratio = detail::opt_number_field(*it, "ratio", where); ratio && *ratio < 1.0)
    imp.unmodelled.push_back(where + ".ratio: partial optimizer offload keeps part of the state on the GPU");
  return o;
}

struct zero_settings {
  int stage = 0;
  offload opt, param;
};

// How the Hugging Face Trainer fills a hidden-size "auto" key (trainer_config_finalize): per_h2 * h^2 +
// per_h * h, truncated as DeepSpeed's integer field receives the Trainer's float. A null rule: the Trainer
// leaves the key alone, and DeepSpeedConfigModel drops an "auto" it finds (runtime/config_utils.py
// l.52-54) so the default applies.
struct auto_rule {
  double per_h2 = 0, per_h = 0;
  const char* why = "";
};

// Returns a bucket-like setting: the file's number, the Trainer's "auto", or DeepSpeed's default (noted).
std::int64_t bucket(const ds_count& c, const char* key, std::int64_t dflt, const char* dflt_src,
                    const auto_rule* rule, std::optional<std::int64_t> hidden, launch_import& imp) {
  if (c.present && !c.is_auto) return c.value;
  if (c.is_auto && rule) {
    if (!hidden)
      throw bad_input(join("zero_optimization", key),
                      "\"auto\" is filled from the model's hidden size by the Hugging Face Trainer; give the "
                      "model (--preset, --hf-config) or write a number");
    const double h = static_cast<double>(*hidden);
    const auto v = static_cast<std::int64_t>(rule->per_h2 * h * h + rule->per_h * h);
    imp.derived.push_back({key, std::to_string(v), rule->why});
    return v;
  }
  imp.derived.push_back({key, std::to_string(dflt),
                         std::string(c.is_auto ? "\"auto\" not filled by the Trainer here, so " : "") +
                             "DeepSpeed's default (" + dflt_src + ")"});
  return dflt;
}

const auto_rule reduce_auto{1.0, 0.0, "\"auto\": hidden^2 (transformers trainer_config_finalize)"};
const auto_rule prefetch_auto{0.9, 0.0,
                              "\"auto\": int(0.9 * hidden^2) (transformers trainer_config_finalize)"};
const auto_rule persist_auto{0.0, 10.0, "\"auto\": 10 * hidden (transformers trainer_config_finalize)"};

void read_buckets(const json& z, const zero_settings& s, std::optional<std::int64_t> hidden,
                  launch_import& imp);

zero_settings read_zero(const json& root, std::optional<std::int64_t> hidden, launch_import& imp) {
  zero_settings s;
  auto it = root.find("zero_optimization");
  if (it == root.end() || it->is_null()) return s;
  if (it->is_boolean()) {  // the old form (zero/config.py l.58-66): true means stage 1
    s.stage = it->get<bool>() ? 1 : 0;
    if (s.stage) {
      const auto ag = read_count(root, "allgather_size", "", 0, max_elements);
      imp.allgather_bucket = ag.present && !ag.is_auto ? ag.value : 500'000'000;
    }
    imp.zero = s.stage;
    return s;
  }
  if (!it->is_object()) throw bad_input("zero_optimization", "must be an object (or true/false)");
  const json& z = *it;
  detail::classify_keys(z, detail::deepspeed_zero_keys(), "zero_optimization", imp);
  // The stage is no "auto" value: the HF Trainer fills batch sizes, precision and buckets, never the stage
  // (transformers integrations/deepspeed.py, trainer_config_process), and DeepSpeed's ZeroStageEnum reads 0-3.
  const ds_count stage = read_count(z, "stage", "zero_optimization", 0, 3);
  if (stage.is_auto)
    throw bad_input("zero_optimization.stage", "\"auto\" is not a stage: neither the Hugging Face Trainer nor "
                                               "DeepSpeed fills it; write 0, 1, 2 or 3");
  s.stage = static_cast<int>(stage.value);
  imp.zero = s.stage;
  s.opt = read_offload(z, "offload_optimizer", imp);
  s.param = read_offload(z, "offload_param", imp);
  // The deprecated booleans (zero/config.py l.180-206) turn into a cpu offload; DeepSpeed refuses one
  // given with its replacement (runtime/config_utils.py l.85-89).
  for (auto [old_key, new_key, target] : {std::tuple{"cpu_offload", "offload_optimizer", &s.opt},
                                          std::tuple{"cpu_offload_param", "offload_param", &s.param}}) {
    if (!z.contains(old_key)) continue;
    if (z.contains(new_key))
      throw bad_input(join("zero_optimization", old_key), std::string("deprecated, and given with '") +
                                                              new_key + "' which replaces it: keep one");
    if (detail::opt_bool_field(z, old_key, "zero_optimization").value_or(false)) *target = {true, "cpu"};
  }
  imp.offload_optimizer = s.opt.on && s.stage >= 1;
  if (s.param.on && s.stage < 3)
    imp.unused.push_back("zero_optimization.offload_param (only read by ZeRO-3)");
  imp.offload_params = s.param.on && s.stage == 3;
  read_buckets(z, s, hidden, imp);
  return s;
}

void read_buckets(const json& z, const zero_settings& s, std::optional<std::int64_t> hidden,
                  launch_import& imp) {
  const std::string w = "zero_optimization";
  const bool z3 = s.stage == 3;
  std::int64_t reduce = bucket(read_count(z, "reduce_bucket_size", w, 0, max_elements), "reduce_bucket_size",
                               500'000'000, "zero/config.py l.113", &reduce_auto, hidden, imp);
  // What the reduce bucket holds on the GPU (elements, all copies together):
  // - ZeRO-1/2 (stage_1_and_2.py l.2497-2513): with contiguous_gradients one flat buffer of
  //   reduce_bucket_size elements per gradient dtype, two when overlap_comm also holds (double buffering);
  //   without contiguous_gradients none (gradients stay where autograd put them until reduced). Optimizer
  //   offload forces contiguous_gradients on (l.260).
  // - ZeRO-3 (stage3.py l.731-735): one flat buffer when contiguous_gradients; overlap_comm only moves the
  //   copy and the reduction to another stream (l.336, l.1545-1560), no second buffer.
  // overlap_comm defaults to true only under ZeRO-3 (zero/config.py l.383-386).
  const bool contiguous = read_flag(z, "contiguous_gradients", w).value_or(true) || (s.opt.on && !z3);
  const bool overlap = read_flag(z, "overlap_comm", w).value_or(z3);
  if (s.stage >= 1) {
    const std::int64_t copies = !contiguous ? 0 : (!z3 && overlap ? 2 : 1);
    imp.reduce_bucket = detail::checked_mul(reduce, copies, "zero_optimization.reduce_bucket_size");
    imp.derived.push_back({"reduce_bucket", std::to_string(*imp.reduce_bucket),
                           std::to_string(copies) + " x reduce_bucket_size " + std::to_string(reduce) +
                               " (contiguous_gradients " + (contiguous ? "on" : "off") + ", overlap_comm " +
                               (overlap ? "on" : "off") +
                               "; stage_1_and_2.py l.2497-2513, stage3.py l.731-735)"});
  }
  if (s.stage == 1 || s.stage == 2) {
    // With all_gather_into_tensor (any recent PyTorch) the updated partitions are gathered in place into the
    // flat 16-bit parameters and the bucket size is not used (runtime/utils.py l.1016-1019): no buffer.
    imp.allgather_bucket =
        bucket(read_count(z, "allgather_bucket_size", w, 0, max_elements), "allgather_bucket_size",
               500'000'000, "zero/config.py l.132", nullptr, hidden, imp);
  }
  if ((s.stage == 0 || z3) && z.contains("allgather_bucket_size"))
    imp.unused.push_back("zero_optimization.allgather_bucket_size (only read by ZeRO-1/2)");
  const auto prefetch =
      read_aliased(z, "stage3_prefetch_bucket_size", "prefetch_bucket_size", 0, max_elements);
  const auto persist =
      read_aliased(z, "stage3_param_persistence_threshold", "param_persistence_threshold", 0, max_elements);
  const auto live = read_aliased(z, "stage3_max_live_parameters", "max_live_parameters", 0, max_elements);
  if (!z3) {
    for (const char* k :
         {"stage3_prefetch_bucket_size", "prefetch_bucket_size", "stage3_param_persistence_threshold",
          "param_persistence_threshold", "stage3_max_live_parameters", "max_live_parameters"})
      if (z.contains(k)) imp.unused.push_back(join(w, k) + " (only read by ZeRO-3)");
    if (z.contains("sub_group_size"))
      imp.unused.push_back("zero_optimization.sub_group_size (only read by ZeRO-3)");
    return;
  }
  imp.zero3_prefetch_bucket = bucket(prefetch, "stage3_prefetch_bucket_size", 50'000'000,
                                     "zero/config.py l.215", &prefetch_auto, hidden, imp);
  imp.zero3_live_params =
      bucket(live, "stage3_max_live_parameters", 1'000'000'000, "zero/config.py l.238", nullptr, hidden, imp);
  // launch_import has no field for the persistence threshold yet: it is recorded for --explain.
  const std::int64_t threshold = bucket(persist, "stage3_param_persistence_threshold", 100'000,
                                        "zero/config.py l.221", &persist_auto, hidden, imp);
  if (persist.present && !persist.is_auto)
    imp.derived.push_back(
        {"stage3_param_persistence_threshold", std::to_string(threshold),
         "parameters smaller than this stay whole on every rank (zero/config.py l.221-226)"});
  // Without optimizer offload the ZeRO-3 step turns one sub-group's gradient partition into fp32 at a time
  // (stage3.py l.2398-2408, l.2420-2425): a transient of up to sub_group_size elements x 4 bytes.
  if (z.contains("sub_group_size")) {
    if (s.opt.on)
      imp.unused.push_back("zero_optimization.sub_group_size (optimizer offloaded)");
    else
      imp.unmodelled.push_back(
          "zero_optimization.sub_group_size: the ZeRO-3 step holds an fp32 copy of one "
          "sub-group's gradients (up to sub_group_size x 4 bytes)");
  }
}

// Returns "bf16", "fp16" or "fp32": the precision the config runs in. Both bf16 and fp16 on is refused by
// DeepSpeed (runtime/config.py l.826-828); an "auto" takes the Trainer's --bf16 / --fp16
// (trainer_config_process) and is refused when that is not known.
std::string read_precision(const json& root, const hf_trainer_args& trainer, launch_import& imp) {
  // "bfloat16" is the old name of "bf16", read only when "bf16" is absent (precision_config.py l.34-38).
  const char* bf16_key = root.contains("bf16") || !root.contains("bfloat16") ? "bf16" : "bfloat16";
  if (root.contains("bf16") && root.contains("bfloat16")) imp.unused.push_back("bfloat16 (\"bf16\" wins)");
  auto enabled = [&](const char* section, const std::vector<key_rule>& table) -> bool {
    auto it = root.find(section);
    if (it == root.end() || it->is_null()) return false;
    if (!it->is_object()) throw bad_input(section, "must be an object such as {\"enabled\": true}");
    detail::classify_keys(*it, table, section, imp);
    auto e = it->find("enabled");
    if (e != it->end() && e->is_string() && e->get<std::string>() == "auto") {
      if (!trainer.precision)
        throw bad_input(std::string(section) + ".enabled",
                        "\"auto\" is the Hugging Face Trainer's --bf16/--fp16, not known here; pass "
                        "--trainer-precision bf16|fp16|fp32, or write true or false");
      return std::string(section).rfind("bf", 0) == 0 ? *trainer.precision == "bf16"
                                                      : *trainer.precision == "fp16";
    }
    return detail::opt_bool_field(*it, "enabled", section).value_or(false);
  };
  const bool bf16 = enabled(bf16_key, detail::deepspeed_bf16_keys());
  const bool fp16 = enabled("fp16", detail::deepspeed_fp16_keys());
  if (bf16 && fp16)
    throw bad_input("bf16.enabled", "bf16 and fp16 cannot both be enabled (DeepSpeed refuses it)");
  return bf16 ? "bf16" : fp16 ? "fp16" : "fp32";
}

// Chooses the built-in recipe DeepSpeed's engine runs (engine.py l.1485-1496 get_data_types,
// l.1978-2020 _do_optimizer_sanity_check, l.2359-2420 _configure_zero_optimizer):
// - fp16: ZeRO's optimizer or FP16_Optimizer, fp16 weights and gradients, fp32 master and Adam: fp16-adam.
// - bf16 with ZeRO-1, data_types.grad_accum_dtype "fp32" and no optimizer offload: BF16_Optimizer, whose
//   fp32 gradient accumulation buffer is as large as the model: deepspeed-bf16.
// - bf16 otherwise under ZeRO 1-3 (gradients accumulate in bf16, the default since DeepSpeed PR #2742):
//   bf16-adam. Under stage 0, DeepSpeed >= 0.17.6 (PR #7515) runs FP16_Optimizer in bf16 (bf16-adam);
//   earlier releases defaulted to fp32 accumulation and BF16_Optimizer (deepspeed-bf16).
// - neither: fp32 weights and Adam: fp32-adam.
void choose_recipe(const json& root, const std::string& precision, zero_settings& z, launch_import& imp) {
  std::string accum;
  if (auto it = root.find("data_types"); it != root.end() && it->is_object()) {
    detail::classify_keys(*it, {{"grad_accum_dtype", R}, {"param_dtype", R}, {"buffer_dtype", U}},
                          "data_types", imp);
    accum = detail::opt_string_field(*it, "grad_accum_dtype", "data_types").value_or("");
    if (auto p = detail::opt_string_field(*it, "param_dtype", "data_types"); p && *p != precision)
      imp.unmodelled.push_back("data_types.param_dtype: differs from the bf16/fp16 setting");
  } else if (it != root.end() && !it->is_null()) {
    throw bad_input("data_types", "must be an object such as {\"grad_accum_dtype\": \"fp32\"}");
  }
  const bool fp32_accum = accum == "fp32" || accum == "float32" || accum == "float";
  std::string recipe = precision == "fp16" ? "fp16-adam" : precision == "fp32" ? "fp32-adam" : "bf16-adam";
  std::string why = "DeepSpeed's " + precision + " path (engine.py l.1978-2020)";
  if (precision == "bf16" && fp32_accum && z.stage <= 1 && !z.opt.on) {
    recipe = "deepspeed-bf16";
    why = "BF16_Optimizer: bf16 with fp32 gradient accumulation under ZeRO " + std::to_string(z.stage) +
          " (engine.py l.1994-1996)";
    if (z.stage == 0) {  // BF16_Optimizer partitions master weights and Adam over data parallelism
      z.stage = 1;
      imp.zero = 1;
      imp.derived.push_back({"zero", "1", "BF16_Optimizer shards fp32 master weights and Adam like ZeRO-1"});
    }
  } else if (precision == "bf16" && fp32_accum && z.stage >= 2) {
    imp.unmodelled.push_back("data_types.grad_accum_dtype: fp32 gradient accumulation under ZeRO-2/3");
  } else if (precision == "bf16" && z.stage == 0) {
    why += "; DeepSpeed <= 0.17.5 ran BF16_Optimizer here (deepspeed-bf16)";
  }
  imp.recipe = recipe;
  imp.derived.push_back({"recipe", recipe, why});
}

// Optimizer: Adam and AdamW hold the two fp32 moments the recipes count; any other changes the state.
void read_optimizer(const json& root, launch_import& imp) {
  auto it = root.find("optimizer");
  if (it == root.end() || it->is_null()) return;
  if (!it->is_object()) throw bad_input("optimizer", "must be an object such as {\"type\": \"AdamW\"}");
  detail::classify_keys(*it, {{"type", R}, {"params", U}, {"legacy_fusion", U}}, "optimizer", imp);
  std::string type = detail::opt_string_field(*it, "type", "optimizer").value_or("adamw");
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::tolower(c); });
  if (type == "adam" || type == "adamw" || type == "fusedadam" || type == "cpuadam")
    imp.unused.push_back("optimizer.type");
  else
    imp.unmodelled.push_back("optimizer.type: " + shown_name(type) +
                             " keeps other state than Adam's two moments");
}

// The batch rule: train_batch_size = micro * accumulation * world (runtime/config.py l.925-986). Two of the
// three give the third when the world size is known (DeepSpeed floors the division, then asserts the
// product: so a remainder is refused here); all three without a world size give the data-parallel size.
void settle_batch(const json& root, std::optional<int> world, const hf_trainer_args& trainer,
                  launch_import& imp) {
  constexpr std::int64_t most = std::int64_t{1} << 40;
  // `flag` is the Trainer's argument, `ours` the headroom flag that gives it.
  auto get = [&](const char* key, std::optional<std::int64_t> from_trainer, const char* flag,
                 const char* ours) -> std::optional<std::int64_t> {
    const ds_count c = read_count(root, key, "", 1, most);
    if (!c.present) return std::nullopt;
    if (!c.is_auto) return c.value;
    if (!from_trainer)
      throw bad_input(key, std::string("\"auto\" is the Hugging Face Trainer's ") + flag +
                               ", not known here; pass " + ours + " N or write a number");
    imp.derived.push_back(
        {key, std::to_string(*from_trainer), std::string("\"auto\": the Trainer's ") + flag});
    return from_trainer;
  };
  auto micro = get("train_micro_batch_size_per_gpu", trainer.per_device_train_batch_size,
                   "--per_device_train_batch_size", "--micro-batch");
  auto gas = get("gradient_accumulation_steps", trainer.gradient_accumulation_steps,
                 "--gradient_accumulation_steps", "--gradient-accumulation-steps");
  // An absent micro-batch is what the training script passes (the Trainer's --per_device_train_batch_size,
  // or the batch size of its data loader): --micro-batch gives it, and DeepSpeed's rule then derives the rest
  // as from a stated one (runtime/config.py l.942-986).
  if (!micro && trainer.per_device_train_batch_size && !root.contains("train_micro_batch_size_per_gpu")) {
    micro = trainer.per_device_train_batch_size;
    imp.derived.push_back({"train_micro_batch_size_per_gpu", std::to_string(*micro),
                           "absent from the file: --micro-batch, as the training script passes it"});
  }
  std::optional<std::int64_t> train;
  const ds_count tc = read_count(root, "train_batch_size", "", 1, most);
  if (tc.present && !tc.is_auto) train = tc.value;
  if (tc.is_auto) {  // the Trainer computes it: world * per-device batch * accumulation
    if (!micro || !gas || !world)
      throw bad_input(
          "train_batch_size",
          "\"auto\" is world size x micro-batch x accumulation, not all known here; "
          "pass --gpus N and --micro-batch N (--gradient-accumulation-steps N), or write a number");
  }
  if (!train && !micro)
    throw bad_input(
        "train_batch_size",
        "neither train_batch_size nor train_micro_batch_size_per_gpu is given "
        "(DeepSpeed requires one, runtime/config.py l.982-986); pass --micro-batch N or write one");
  const auto mul = [](std::int64_t a, std::int64_t b) {
    return detail::checked_mul(a, b, "train_batch_size");
  };
  // DeepSpeed's _batch_assertion (runtime/config.py l.942-986): train = micro x accumulation x world.
  auto divide = [&](std::int64_t num, std::int64_t den, const char* field, const char* what) {
    if (num % den != 0)
      throw bad_input(field, std::to_string(num) + " is not a multiple of " + std::to_string(den) + " (" + what +
                                 "), as DeepSpeed requires (runtime/config.py _batch_assertion): write a multiple");
    return num / den;
  };
  if (train && micro && gas) {
    const std::int64_t per_step = mul(*micro, *gas);
    const std::int64_t dp = world && *train != mul(per_step, *world)
                                ? -1  // all three and the world stated: compared as DeepSpeed compares them
                                : divide(*train, per_step, "train_batch_size", "micro x accumulation x data-parallel size");
    if (world && dp != *world)
      throw bad_input("train_batch_size", std::to_string(*train) + " != " + std::to_string(*micro) + " x " +
                                              std::to_string(*gas) + " x " + std::to_string(*world) +
                                              " GPUs, which DeepSpeed refuses (runtime/config.py _batch_assertion): "
                                              "drop it to derive it, or fix the three");
    if (!world) {
      imp.dp = static_cast<int>(std::min<std::int64_t>(dp, INT32_MAX));
      imp.derived.push_back({"dp", std::to_string(dp), "train_batch_size / (micro x accumulation)"});
    }
  } else if (world) {
    const char* why = "train_batch_size = micro x accumulation x world (runtime/config.py l.942-980)";
    if (train && micro)
      gas = divide(*train, mul(*micro, *world), "train_batch_size", "micro x world");
    else if (train && gas)
      micro = divide(*train, mul(*gas, *world), "train_batch_size", "accumulation x world");
    else if (micro && gas)
      train = mul(mul(*micro, *gas), *world);
    else if (train) {
      gas = 1;
      micro = divide(*train, *world, "train_batch_size", "world");
    } else {
      gas = 1;
      train = mul(*micro, *world);
    }
    imp.derived.push_back({"batch",
                           std::to_string(*train) + " = " + std::to_string(*micro) + " x " +
                               std::to_string(*gas) + " x " + std::to_string(*world),
                           why});
  }
  imp.micro_batch = micro;
  imp.global_batch = train;
}

void read_activation_checkpointing(const json& root, launch_import& imp) {
  auto it = root.find("activation_checkpointing");
  if (it == root.end() || it->is_null()) return;
  if (!it->is_object()) throw bad_input("activation_checkpointing", "must be an object");
  detail::classify_keys(*it, detail::deepspeed_ac_keys(), "activation_checkpointing", imp);
}

launch_import import_config(const json& root, const std::string& origin, std::optional<std::int64_t> hidden,
                            std::optional<int> world, const hf_trainer_args& trainer) {
  if (!root.is_object()) throw bad_input("config", "expected a JSON object");
  if (hidden && (*hidden < 1 || *hidden > (std::int64_t{1} << 24))) throw bad_input("hidden", "out of range");
  if (world && *world < 1) throw bad_input("world size", "must be at least 1");
  if (trainer.precision && *trainer.precision != "bf16" && *trainer.precision != "fp16" &&
      *trainer.precision != "fp32")
    throw bad_input("precision", "must be bf16, fp16 or fp32");
  launch_import imp;
  imp.origin = origin;
  imp.change_hint = "in the JSON (a copy of it)";
  detail::classify_keys(root, detail::deepspeed_top_keys(), "", imp);
  zero_settings z = read_zero(root, hidden, imp);
  choose_recipe(root, read_precision(root, trainer, imp), z, imp);
  // ZeRO-3 allocates its reduce bucket in the communication dtype (stage3.py l.731-735, one bucket per
  // dtype); ZeRO-1/2 in the model dtype whatever it is (stage_1_and_2.py l.2501).
  if (auto c = detail::opt_string_field(root, "communication_data_type", ""); c) {
    if (z.stage < 3 || imp.recipe->rfind(*c, 0) == 0)
      imp.unused.push_back("communication_data_type");
    else
      imp.unmodelled.push_back("communication_data_type: ZeRO-3 reduce bucket in " + shown_name(*c));
  }
  read_optimizer(root, imp);
  read_activation_checkpointing(root, imp);
  settle_batch(root, world, trainer, imp);
  if (world) imp.gpus = *world;
  return imp;
}

}  // namespace

launch_import deepspeed_config_from_json(const nlohmann::json& config, const std::string& origin,
                                         std::optional<std::int64_t> hidden, std::optional<int> world_size,
                                         const hf_trainer_args& trainer) {
  try {
    return import_config(config, origin, hidden, world_size, trainer);
  } catch (const bad_input& e) {
    throw bad_input(origin, e.what());
  } catch (const nlohmann::json::exception& e) {  // a value of the wrong kind deep in a section
    throw bad_input(origin, std::string("unreadable value (") + e.what() + ")");
  }
}

namespace {
// Returns the dotted path of the first key that one object of the JSON `text` holds twice, "" when none.
// nlohmann keeps the last of them silently; DeepSpeed refuses the file (runtime/config.py DeepSpeedConfig
// loads it with object_pairs_hook=dict_raise_error_on_duplicate_keys, runtime/config_utils.py).
std::string first_duplicate_key(const std::string& text) {
  struct frame {
    bool object;
    std::set<std::string> keys;
    std::string key;
  };
  std::vector<frame> stack;
  std::string dup;
  const auto note = [&](int, json::parse_event_t ev, json& parsed) {
    using e = json::parse_event_t;
    if (ev == e::object_start || ev == e::array_start) stack.push_back({ev == e::object_start, {}, ""});
    if ((ev == e::object_end || ev == e::array_end) && !stack.empty()) stack.pop_back();
    if (ev == e::key && !stack.empty() && parsed.is_string()) {
      frame& top = stack.back();
      top.key = parsed.get<std::string>();
      if (!top.keys.insert(top.key).second && dup.empty())
        for (const auto& f : stack)
          if (f.object) dup += (dup.empty() ? "" : ".") + f.key;
    }
    // Values and finished containers are dropped: only the keys matter here, not a second copy of the file.
    return ev == e::key || ev == e::object_start || ev == e::array_start;
  };
  const json dropped = json::parse(text, note, /*allow_exceptions=*/false);
  (void)dropped;
  return dup;
}
}  // namespace

launch_import load_deepspeed_config(const std::string& path, std::optional<std::int64_t> hidden,
                                    std::optional<int> world_size, const hf_trainer_args& trainer) {
  const std::string shown = shown_name(path);
  const std::string text = read_regular_file(path, max_json_file_bytes, "a JSON input");
  const json config = parse_json_text(text, shown);  // malformed or too deep: refused before the walk below
  if (const std::string dup = first_duplicate_key(text); !dup.empty())
    throw bad_input(shown + ": " + shown_name(dup),
                    "given twice; DeepSpeed refuses duplicate keys (runtime/config_utils.py "
                    "dict_raise_error_on_duplicate_keys): keep one");
  return deepspeed_config_from_json(config, shown, hidden, world_size, trainer);
}

}  // namespace headroom
