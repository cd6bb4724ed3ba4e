// layout.cpp: validation and naming of layouts.
#include "layout.hpp"

#include "errors.hpp"
#include "schedule.hpp"

namespace headroom {

const char* to_string(recompute_mode r) {
  return name_of(r);
}

const char* to_string(attention_kind a) {
  return name_of(a);
}

const char* to_string(loss_kind k) {
  return name_of(k);
}
const char* to_string(dispatcher_kind k) {
  return name_of(k);
}
const char* to_string(recompute_module m) {
  return name_of(m);
}

std::string axes_string(const layout& l) {
  std::string s =
      "tp=" + std::to_string(l.tp) + " pp=" + std::to_string(l.pp) + " dp=" + std::to_string(l.dp());
  if (l.cp > 1) s += " cp=" + std::to_string(l.cp);
  if (l.vpp > 1) s += " vpp=" + std::to_string(l.vpp);
  if (l.sp()) s += " sp";
  if (l.ep > 1) s += " ep=" + std::to_string(l.ep);
  if (l.etp > 0 && l.etp != l.tp) s += " etp=" + std::to_string(l.etp);
  if (l.dp_replicate > 1) s += " replicas=" + std::to_string(l.dp_replicate);
  return s;
}

std::string zero_name(const layout& l) {
  std::string s = l.zero == 0 ? (l.shard_degree() > 1 ? "DDP" : "no DP") : "ZeRO-" + std::to_string(l.zero);
  if (l.offload_optimizer) s += "+offload";
  if (l.offload_params) s += "+param offload";
  return s;
}

void validate(const training_spec& t, const device_spec& d) {
  if (t.seq <= 0) throw bad_input("seq", "must be positive, got " + std::to_string(t.seq));
  if (t.seq > 100'000'000) throw bad_input("seq", "is absurd (" + std::to_string(t.seq) + ")");
  if (t.micro_batch <= 0)
    throw bad_input("micro-batch", "must be positive, got " + std::to_string(t.micro_batch));
  if (t.micro_batch > 1'000'000)
    throw bad_input("micro-batch", "is absurd (" + std::to_string(t.micro_batch) + ")");
  if (t.global_batch <= 0) throw bad_input("global-batch", "must be positive");
  if (t.global_batch > 1'000'000'000) throw bad_input("global-batch", "is absurd");
  if (d.capacity <= 0) throw bad_input("gpu-mem", "must be positive");
  if (d.reserve.fixed < 0) throw bad_input("reserve", "must not be negative");
  if (d.reserve.fixed >= d.capacity) throw bad_input("reserve", "must be smaller than gpu-mem");
  if (!(d.reserve.fragmentation >= 0) || d.reserve.fragmentation > 100 || !(d.reserve.per_token >= 0) ||
      d.reserve.per_token > 1e12)
    throw bad_input("calibration", "reserve terms must be finite and non-negative");
  if (!(d.reserve.activation_extra >= -0.9) || d.reserve.activation_extra > 100)
    throw bad_input("calibration", "the activation term must be finite and between -0.9 and 100 bytes per byte");
  if (d.fixed_overheads < 0) throw bad_input("fixed-overheads", "must not be negative");
  if (d.allocator_workspaces < 0 || d.allocator_workspaces >= d.capacity)
    throw bad_input("allocator-workspaces", "must be between 0 and gpu-mem");
  if (d.fixed_overheads >= d.capacity) throw bad_input("fixed-overheads", "must be smaller than gpu-mem");
  if (d.gpus_per_node <= 0 || d.gpus_per_node > max_gpus_per_node)
    throw bad_input("gpus-per-node", "must be between 1 and " + std::to_string(max_gpus_per_node) +
                                         " (the largest NVLink domain is 72 GPUs), got " +
                                         std::to_string(d.gpus_per_node));
}

std::optional<bad_input> sharding_error(const layout& l) {
  if (l.zero < 0 || l.zero > 3)
    return bad_input("zero", "must be 0, 1, 2 or 3, got " + std::to_string(l.zero));
  if (l.zero3_live_params < 0) return bad_input("zero3-live-params", "must not be negative");
  if (l.zero3_inflight_units < 1 || l.zero3_inflight_units > 1000)
    return bad_input("zero3-inflight-units",
                     "must be between 1 and 1000 (the layer in use is always gathered), got " +
                         std::to_string(l.zero3_inflight_units));
  if (l.offload_params && l.zero != 3)
    return bad_input("offload-params", "needs ZeRO 3 (--zero 3): parameter offload moves the sharded parameters, got " +
                                           std::to_string(l.zero));
  if (l.offload_optimizer && l.zero == 0)
    return bad_input("offload-optimizer",
                     "needs ZeRO 1, 2 or 3 (--zero), got 0: ZeRO-Offload moves the sharded optimizer state");
  return std::nullopt;
}

bad_input recipe_zero_error(const recipe& r, int zero) {
  const int lo = r.lowest_zero(), hi = r.highest_zero();
  return bad_input("zero", "recipe '" + r.name.substr(0, 60) + "' runs with ZeRO " + std::to_string(lo) +
                               (lo == hi ? "" : " to " + std::to_string(hi)) + ", got " + std::to_string(zero) +
                               (!r.zero_note.empty() ? " (" + r.zero_note + ")"
                                : zero > hi && hi < r.max_zero
                                    ? std::string(" (a buffer it never shards contradicts ZeRO 2 and 3)")
                                    : std::string(" (the stages the recipe states, zero_stages)")));
}

std::optional<bad_input> sequence_error(const model_spec& m, const training_spec& t) {
  if (m.position != position_kind::learned || t.seq <= m.max_positions) return std::nullopt;
  return bad_input("seq", std::to_string(t.seq) + " is beyond " + m.name + "'s " + std::to_string(m.max_positions) +
                              " learned positions (its position table has no row past them): --seq " +
                              std::to_string(m.max_positions) + " or less");
}

std::optional<bad_input> layout_error(const problem& p, const layout& l) {
  const auto& m = p.model;
  for (auto [v, f] : {std::pair{l.tp, "tp"}, {l.pp, "pp"}, {l.cp, "cp"}, {l.vpp, "vpp"}, {l.gpus, "gpus"}})
    if (v <= 0 || v > max_gpus)
      return bad_input(f, "must be between 1 and " + std::to_string(max_gpus) + ", got " + std::to_string(v));
  if (auto e = sharding_error(l)) return e;
  if (l.zero > p.precision.highest_zero() || (l.zero < p.precision.lowest_zero() && l.shard_degree() > 1))
    return recipe_zero_error(p.precision, l.zero);
  const std::int64_t tpc = static_cast<std::int64_t>(l.tp) * l.pp * l.cp;
  if (tpc > l.gpus || l.gpus % tpc != 0)
    return bad_input(
        "gpus", "tp*pp*cp = " + std::to_string(tpc) + " does not divide " + std::to_string(l.gpus) + " GPUs");
  if (l.tp > p.device.gpus_per_node)
    return bad_input("tp", "tp=" + std::to_string(l.tp) + " crosses a node of " +
                               std::to_string(p.device.gpus_per_node) +
                               " GPUs (tensor parallelism stays inside a node)");
  if (m.heads % l.tp != 0)
    return bad_input("tp",
                     "heads (" + std::to_string(m.heads) + ") not divisible by tp=" + std::to_string(l.tp));
  if (m.kv_heads % l.tp != 0 && l.tp % m.kv_heads != 0)
    return bad_input("tp", "kv heads (" + std::to_string(m.kv_heads) + ") and tp=" + std::to_string(l.tp) +
                               ": neither divides the other");
  if (m.ffn_hidden % l.tp != 0)
    return bad_input("tp", "ffn hidden (" + std::to_string(m.ffn_hidden) +
                               ") not divisible by tp=" + std::to_string(l.tp));
  if (l.vpp > 1 && l.pp == 1) return bad_input("vpp", "interleaving needs pp > 1");
  if (l.pp > m.layers + 2)  // cheap bound before the split is walked (2: a counted embedding and loss)
    return bad_input("pp", "layers (" + std::to_string(m.layers) + ") fewer than pp=" + std::to_string(l.pp));
  if (auto e = split_error(p, l)) return e;
  if (p.training.seq % l.cp != 0)
    return bad_input("cp", "sequence (" + std::to_string(p.training.seq) +
                               ") not divisible by cp=" + std::to_string(l.cp));
  if (l.sp() && (p.training.seq / l.cp) % l.tp != 0)
    return bad_input("tp", "sequence parallelism needs the sequence per cp rank (" +
                               std::to_string(p.training.seq / l.cp) +
                               ") divisible by tp=" + std::to_string(l.tp));
  // torchtitan's layer policy counts blocks once per process, across every chunk a rank holds
  // (activation_checkpoint.py at 238fa995, _layer_sac_count), while this version counts them per chunk:
  // with interleaved chunks the two disagree, so the pair is refused rather than priced either way.
  if (full_every(l.recompute) > 0 && l.vpp > 1)
    return bad_input("recompute", std::string(to_string(l.recompute)) + " with interleaved chunks (vpp " +
                                      std::to_string(l.vpp) +
                                      ") is not modelled by this version: torchtitan counts the blocks across "
                                      "a rank's chunks");
  if (l.recompute == recompute_mode::selective_op) {
    // The per-op policy's saved tensors are derived for torchtitan's blocks, standard or multi-latent
    // attention, dense or MoE, under SDPA (flash) or compiled flex attention (ledger.cpp, op_policy_entries;
    // docs/model.md "torchtitan's per-op policy").
    const char* why = p.training.attention == attention_kind::eager
                          ? "eager attention (torchtitan runs SDPA or flex: --attention flash or flex)"
                      : p.precision.trains_in_fp8() ? "FP8 linear layers (torch._scaled_mm is not on its save list)"
                                                    : nullptr;
    if (why)
      return bad_input("recompute", std::string("selective-op (torchtitan's per-op policy) is not modelled for ") +
                                        why + " by this version");
  }
  return expert_error(p, l);
}

std::optional<bad_input> expert_error(const problem& p, const layout& l) {
  const auto& m = p.model;
  if (l.ep < 1 || l.ep > max_gpus) return bad_input("ep", "must be between 1 and " + std::to_string(max_gpus));
  if (l.etp < 0 || l.etp > max_gpus) return bad_input("etp", "must be between 1 and " + std::to_string(max_gpus));
  if (l.dp_replicate < 1 || l.dp_replicate > max_gpus)
    return bad_input("dp-replicate", "must be between 1 and " + std::to_string(max_gpus));
  const std::int64_t dp_cp = static_cast<std::int64_t>(l.dp()) * l.cp;
  if (dp_cp % l.dp_replicate != 0)
    return bad_input("dp-replicate", std::to_string(l.dp_replicate) + " replicas do not divide dp*cp = " +
                                         std::to_string(dp_cp) + " data-parallel ranks");
  if (!m.moe.enabled()) {
    if (l.ep != 1 || (l.etp != 0 && l.etp != l.tp))
      return bad_input(l.ep != 1 ? "ep" : "etp",
                       "expert parallelism needs a mixture-of-experts model; '" + m.name.substr(0, 60) +
                           "' has no routed experts");
    return std::nullopt;
  }
  const int etp = l.expert_tp();
  if (m.moe.experts % l.ep != 0)
    return bad_input("ep", "routed experts (" + std::to_string(m.moe.experts) + ") not divisible by ep=" +
                               std::to_string(l.ep));
  if (m.moe.expert_ffn % etp != 0)
    return bad_input("etp", "expert ffn (" + std::to_string(m.moe.expert_ffn) + ") not divisible by expert tp=" +
                                std::to_string(etp));
  if (m.moe.shared_ffn % l.tp != 0)
    return bad_input("tp", "shared-expert ffn (" + std::to_string(m.moe.shared_ffn) +
                               ") not divisible by tp=" + std::to_string(l.tp));
  if (etp > p.device.gpus_per_node)
    return bad_input("etp", "expert tp=" + std::to_string(etp) + " crosses a node of " +
                                std::to_string(p.device.gpus_per_node) + " GPUs");
  const std::int64_t ranks = dp_cp * l.tp, expert = static_cast<std::int64_t>(l.ep) * etp;
  if (ranks % expert != 0)
    return bad_input("ep", "ep x expert tp = " + std::to_string(expert) + " does not divide dp*tp*cp = " +
                               std::to_string(ranks) + " ranks of a pipeline stage (Megatron-Core's expert grid)");
  if ((ranks / expert) % l.dp_replicate != 0)
    return bad_input("dp-replicate", std::to_string(l.dp_replicate) +
                                         " replicas do not divide the expert data-parallel ranks (" +
                                         std::to_string(ranks / expert) + ")");
  if (l.tp > 1 && !l.sequence_parallel)
    return bad_input("sp", "mixture-of-experts layers with tp > 1 need sequence parallelism (Megatron-Core's "
                           "moe_layer.py asserts it)");
  return std::nullopt;
}

std::optional<bad_input> schedule_error(const problem& p, const layout& l) {
  const std::int64_t tpc = static_cast<std::int64_t>(l.tp) * l.pp * l.cp;
  if (tpc <= 0 || l.gpus < tpc) return std::nullopt;  // layout_error's to report
  if (!batch_splits(p, l)) {
    const std::int64_t mb = p.training.micro_batch, per_round = mb * l.dp();
    const std::string sizes = "micro-batch x dp = " + std::to_string(mb) + " x " + std::to_string(l.dp()) +
                              " = " + std::to_string(per_round);
    const std::string gb = "global batch " + std::to_string(p.training.global_batch);
    if (per_round > p.training.global_batch)
      return bad_input("global-batch", gb + " is smaller than " + sizes + ": a data-parallel rank would get no sample");
    return bad_input("global-batch", gb + " is not divisible by " + sizes + " (Megatron-LM asserts it)");
  }
  const std::int64_t m = microbatches_per_step(p, l);
  if (!schedule_runs(l, m))
    return bad_input("vpp", "the interleaved schedule needs micro-batches per step (" + std::to_string(m) +
                                ") divisible by pp=" + std::to_string(l.pp));
  return std::nullopt;
}

void validate(const problem& p, const layout& l) {
  if (auto e = layout_error(p, l)) throw *e;
  if (auto e = schedule_error(p, l)) throw *e;
}

problem default_problem(model_spec m) {
  problem p;
  p.training.seq = m.seq;
  p.model = std::move(m);
  p.precision = load_recipe(default_recipe);
  return p;
}

}  // namespace headroom
