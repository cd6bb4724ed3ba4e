// explain.cpp: --explain, the proof when nothing fits, and the minimum-GPU derivation (see explain.hpp).
#include "explain.hpp"

#include <cmath>
#include <sstream>

#include "format.hpp"
#include "schedule.hpp"
#include "units.hpp"

namespace headroom {

namespace {

std::string padr(std::string s, std::size_t w) {
  if (s.size() < w) s.append(w - s.size(), ' ');
  return s;
}

std::string shape_str(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string psi_str(const param_counts& pc) {
  return eng(static_cast<double>(pc.total));
}

}  // namespace

namespace {

// (a): the recipe's bytes per parameter, Psi, the whole state, and this rank's share of each buffer.
void explain_state(std::ostream& o, const problem& p, const breakdown& b) {
  const auto& m = p.model;
  const auto& l = b.where;
  const auto& pc = b.basis.params;
  const auto& w = b.worst_stage();
  const double cap = to_gib(p.device.capacity);
  const std::int64_t bpp = p.precision.bytes_per_param();
  o << "(a) State memory\n";
  o << "  per parameter (" << printable(p.precision.name) << "): ";
  for (std::size_t i = 0; i < p.precision.buffers.size(); ++i)
    o << (i ? " + " : "") << printable(p.precision.buffers[i].name) << " " << p.precision.buffers[i].bytes;
  o << " = " << bpp << " bytes\n";
  if (pc.stated)
    o << "  Psi = " << psi_str(pc) << " parameters, as the preset states it (spread evenly over the "
      << m.layers << " layers)\n";
  else if (m.moe.enabled()) {
    const std::int64_t moe = pc.moe_before.back(), dense = m.layers - moe;
    o << "  Psi = dense layers*layer + MoE layers*MoE layer + embedding + output + MTP = " << dense << " * "
      << pc.dense_layer.total() << " + " << moe << " * " << pc.moe_layer.total() << " + " << pc.embedding << " + "
      << pc.output << " + " << pc.mtp_total << " = " << psi_str(pc) << " parameters (from the dimensions; "
      << eng(static_cast<double>(pc.active)) << " active per token)\n";
    o << "  a MoE layer: " << pc.moe_layer.sharded << " split by tp + " << pc.moe_layer.replicated
      << " replicated + " << pc.moe_layer.expert << " routed experts split by ep x expert tp ("
      << "docs/model.md section 11c)\n";
  } else {
    o << "  Psi = L*layer + embedding + output = " << m.layers << " * " << pc.per_layer << " + "
      << pc.embedding << " + " << pc.output << " = " << psi_str(pc) << " parameters (from the dimensions)\n";
  }
  const double state = static_cast<double>(pc.total) * static_cast<double>(bpp);
  o << "  state = " << psi_str(pc) << " * " << bpp << " = " << eng(state) << " bytes = " << eng(state)
    << " / 2^30 = " << fixed(state / gib, 1) << " GiB\n";
  o << "        = " << fixed(state / gib, 1) << " / " << trim(cap, 1) << " = " << fixed(state / gib / cap, 1)
    << " GPUs of pure state\n";
  o << "  this rank (stage " << w.stage << " of " << l.pp
    << "): " << eng(static_cast<double>(w.params_on_rank)) << " parameters after tp=" << l.tp
    << ", pp=" << l.pp << "; ZeRO-" << l.zero << " shards over dp*cp = " << l.shard_degree() << "\n";
  for (std::size_t i = 0; i < p.precision.buffers.size(); ++i) {
    const auto& buf = p.precision.buffers[i];
    const bool sharded = l.zero >= buf.shard_from;
    const bool off = offloaded(buf, l);
    o << "    " << padr(printable(buf.name), 34) << buf.bytes << " B x " << eng(static_cast<double>(w.params_on_rank))
      << (sharded ? " / " + std::to_string(l.shard_degree()) : std::string(" (not sharded)")) << " = ";
    if (off)
      o << "in host memory (--offload-optimizer)\n";
    else
      o << gib_str(w.buffer_bytes[i]) << " GiB\n";
  }
  if (l.zero == 3 && l.shard_degree() > 1 && !l.reshard_after_forward)
    o << "  ZeRO-3 transient without resharding after forward: every layer of the stage stays gathered, "
      << w.params_on_rank << " parameters x " << p.precision.gathered_bytes_per_param()
      << " B (the gathered copy's bytes" << (p.precision.gather_bytes_other > 0 ? " for the linear weights" : "")
      << ") = " << gib_str(w.transient) << " GiB\n";
  else if (l.zero == 3 && l.shard_degree() > 1 && pc.moe_before.empty() && l.zero3_live_params > 0 &&
           zero3_gather_bytes(p, pc, l) <
               pc.per_layer * p.precision.gathered_bytes_per_param() / (static_cast<std::int64_t>(l.tp) * l.pp))
    o << "  ZeRO-3 transient: stage3_max_live_parameters " << eng(static_cast<double>(l.zero3_live_params))
      << " is below one layer's " << eng(static_cast<double>(pc.per_layer))
      << " parameters: DeepSpeed gathers module by module, at most the limit plus the largest weight (fc1) at "
         "once, in the proportion of a layer / (tp*pp = "
      << l.tp * l.pp << "): " << eng(static_cast<double>(w.transient)) << " bytes = " << gib_str(w.transient)
      << " GiB\n";
  else if (l.zero == 3 && l.shard_degree() > 1)
    o << "  ZeRO-3 transient: " << zero3_units(pc, l, largest_chunk_layers(p, l, w.stage))
      << " layers in flight x "
      << eng(static_cast<double>(pc.per_layer)) << " parameters x "
      << p.precision.gathered_bytes_per_param() << " B / (tp*pp = " << l.tp * l.pp
      << ") = " << eng(static_cast<double>(w.transient)) << " bytes = " << gib_str(w.transient) << " GiB\n";
  o << "  state = " << gib_str(w.persistent)
    << (w.transient ? " + " + gib_str(w.transient) + " transient" : "") << " = " << gib_str(w.state)
    << " GiB\n\n";
}

// Prints the tensors of one layer's ledger, one line each.
void explain_ledger_lines(std::ostream& o, const std::vector<ledger_entry>& ledger) {
  for (const auto& e : ledger) {
    o << "    " << padr(e.name, 30) << padr(e.formula, 22) << padr(shape_str(e.shape), 28) << e.bytes
      << " bytes"
      << (e.role == act_role::attention_core ? "  (attention core)"
          : e.role == act_role::layer_input  ? "  (layer input)"
          : e.role == act_role::op_output    ? "  (op output: kept by selective-op only)"
                                             : "")
      << (e.op_saved && e.role != act_role::layer_input ? "  (kept by selective-op)" : "") << "\n";
  }
}

// Prints a ledger's sum (s*b*h*x plus the attention core) and what the recompute mode keeps of it per layer.
void explain_ledger_sum(std::ostream& o, const problem& p, const layout& l, std::int64_t stage_layers,
                        const std::vector<ledger_entry>& ledger, const activation_sums& sums) {
  std::int64_t core = 0;
  for (const auto& e : ledger)
    if (e.role == act_role::attention_core) core += e.bytes;
  const std::int64_t s = p.training.seq, mb = p.training.micro_batch, h = p.model.hidden, a = p.model.heads;
  const double sbh = static_cast<double>(s) * mb * h;
  const double x = static_cast<double>(sums.none - core) / sbh;
  if (p.training.attention == attention_kind::eager) {
    const double y = static_cast<double>(core) / (static_cast<double>(a) * s * s * mb);
    const double yash = y * a * s / h;
    o << "  sum = s*b*h*(" << trim(x) << " + " << trim(y) << "*a*s/h), " << trim(y) << "*a*s/h = " << trim(y)
      << " * " << a << " * " << s << " / " << h << " = " << trim(y * a * s) << " / " << h << " = "
      << trim(yash) << "\n";
    o << "  per layer = s*b*h*(" << trim(x) << " + " << trim(yash) << ") = " << s << " * " << mb << " * " << h
      << " * " << trim(x + yash) << " = " << eng(sbh) << " * " << trim(x + yash) << " = "
      << eng(static_cast<double>(sums.none)) << " bytes = " << gib_str(sums.none, 3) << " GiB\n";
  } else {
    o << "  sum = s*b*h*" << trim(x) << " + log-sum-exp " << core
      << " bytes = " << eng(static_cast<double>(sums.none)) << " bytes = " << gib_str(sums.none, 3)
      << " GiB per layer\n";
  }
  o << "  recompute " << to_string(l.recompute) << " keeps ";
  if (l.recompute == recompute_mode::none)
    o << "every tensor: ";
  else if (l.recompute == recompute_mode::selective)
    o << "all but the attention core: ";
  else if (l.recompute == recompute_mode::selective_op)
    o << "the layer input and the op outputs torchtitan's per-op policy saves (every other matmul's, "
      << (p.training.attention == attention_kind::flex
              ? "the compiled flex region's output, log-sum-exp and inputs q, k, v, "
              : "SDPA's, ")
      << "the reduce-scatters'): ";
  else if (const int n = full_every(l.recompute))
    o << "every tensor of N-1 layers in N and the input of the N-th (N = " << n << ": " << stage_layers << " / "
      << n << " = " << fully_recomputed_layers(l.recompute, stage_layers)
      << " of this stage's layers recomputed), mean ";
  else
    o << "only the layer input: ";
  o << eng(static_cast<double>(sums.of(l.recompute))) << " bytes = " << gib_str(sums.of(l.recompute), 3)
    << " GiB per layer\n";
}

// The layer activations a stage keeps alive, by layer kind, as estimate.cpp (evaluate_stage) counts them.
struct explain_layer_counts {
  std::int64_t dense = 0, moe = 0;
};
explain_layer_counts explain_alive_by_kind(const stage_breakdown& s) {
  return {s.layer_activations - s.moe_layer_activations, s.moe_layer_activations};
}

// Returns a stage's layer activations by kind as a sum, "12 * 0.055 + 52 * 0.055" (alive dense layers x the
// dense layer's GiB + alive MoE layers x the MoE layer's), omitting a kind with none alive.
std::string explain_kinds_sum(const breakdown& b, const stage_breakdown& s) {
  const auto alive = explain_alive_by_kind(s);
  const recompute_mode r = b.where.recompute;
  std::string out;
  if (alive.dense > 0) out = std::to_string(alive.dense) + " * " + gib_str(b.basis.per_layer.of(r), 3);
  if (alive.moe > 0)
    out += (out.empty() ? "" : " + ") + std::to_string(alive.moe) + " * " +
           gib_str(b.basis.peaks.moe_layer.of(r), 3);
  return out;
}

// (b), MoE model: the ledger of each layer kind the stage holds, and the stage's activations as
// dense layers x the dense ledger + MoE layers x the MoE ledger (+ the embedding's on the first stage).
void explain_moe_activations(std::ostream& o, const problem& p, const breakdown& b) {
  const auto& l = b.where;
  const auto& w = b.worst_stage();
  const std::int64_t dense_layers = w.layers - w.moe_layers;
  const activation_sums& moe_sums = b.basis.peaks.moe_layer;
  if (dense_layers > 0) {
    o << "  a dense layer (" << dense_layers << " of stage " << w.stage << "'s " << w.layers << " layers):\n";
    explain_ledger_lines(o, b.basis.ledger);
    explain_ledger_sum(o, p, l, w.layers, b.basis.ledger, b.basis.per_layer);
  }
  if (w.moe_layers > 0) {
    o << "  a MoE layer (" << w.moe_layers << " of stage " << w.stage << "'s " << w.layers
      << " layers; routed rows per docs/model.md, \"Routed tokens\"):\n";
    explain_ledger_lines(o, b.basis.moe_ledger);
    explain_ledger_sum(o, p, l, w.layers, b.basis.moe_ledger, moe_sums);
  }
  const auto alive = explain_alive_by_kind(w);
  const std::int64_t a = b.basis.per_layer.of(l.recompute), m = moe_sums.of(l.recompute);
  const std::int64_t sum = alive.dense * a + alive.moe * m + w.embedding_activations + w.mtp_activations;
  o << "  stage " << w.stage << " holds " << w.layers << " layers (" << dense_layers << " dense, " << w.moe_layers
    << " MoE)";
  if (l.pp > 1)
    o << " and, in " << (l.vpp > 1 ? "interleaved " : "") << "1F1B with " << b.basis.microbatches
      << " micro-batches per step, keeps " << w.layer_activations << " layer activations alive ("
      << alive.dense << " dense, " << alive.moe << " MoE)";
  o << ": " << explain_kinds_sum(b, w);
  if (w.embedding_activations) o << " + embedding " << gib_str(w.embedding_activations, 3);
  if (w.mtp_activations)
    o << " + MTP modules " << gib_str(w.mtp_activations, 3)
      << " (each a layer of the last layer's kind, its norms' and eh_proj's inputs, and its output layer's input)";
  o << " = " << gib_str(sum) << " GiB";
  if (sum != w.activations) o << " (the stage's figure is " << gib_str(w.activations) << " GiB)";
  o << "\n";
}

// Prints what the layout would hold with sequence parallelism toggled, when the toggled layout is one a
// framework runs; when it is not (Megatron-Core refuses MoE layers at tp > 1 without it: layout.cpp), why
// there is no such line.
void explain_sp_toggle(std::ostream& o, const problem& p, const layout& l) {
  layout other = l;
  other.sequence_parallel = !l.sp();
  o << "  with sequence parallel " << (l.sp() ? "off" : "on") << " instead: ";
  try {
    const auto alt = estimate(p, other);
    o << "activations " << gib_str(alt.worst_stage().activations) << " GiB, total "
      << gib_str(alt.worst_stage().total) << " GiB\n";
  } catch (const bad_input& e) {
    o << "not a layout that can run (" << printable(e.what()) << ")\n";
  }
}

// (b): the ledger of one layer, its sum, what recomputation keeps, and the stage's layers in flight; for a
// MoE model, the ledger of each layer kind the stage holds (explain_moe_activations).
void explain_activations(std::ostream& o, const problem& p, const breakdown& b) {
  const auto& m = p.model;
  const auto& l = b.where;
  const auto& w = b.worst_stage();
  o << "(b) Activation memory: the ledger of " << (b.basis.moe_ledger.empty() ? "one layer" : "each layer kind")
    << ", one micro-batch, this rank ("
    << (p.training.attention == attention_kind::flex
            ? std::string("flex attention (compiled flex_attention: no s x s tensor)")
            : std::string(to_string(p.training.attention)) + " attention")
    << ", "
    << (m.dropout ? "dropout" : "no dropout") << ", " << to_string(m.mlp) << ", tp=" << l.tp
    << (l.sp() ? " with sequence parallel" : "") << (l.cp > 1 ? ", cp=" + std::to_string(l.cp) : "") << ")\n";
  if (!b.basis.moe_ledger.empty()) {
    explain_moe_activations(o, p, b);
  } else {
    const auto& sums = b.basis.per_layer;
    explain_ledger_lines(o, b.basis.ledger);
    explain_ledger_sum(o, p, l, w.layers, b.basis.ledger, sums);
    o << "  stage " << w.stage << " holds " << w.layers << " layers";
    if (l.pp > 1)
      o << " and, in " << (l.vpp > 1 ? "interleaved " : "") << "1F1B with " << b.basis.microbatches
        << " micro-batches per step, keeps " << w.layer_activations << " layer activations alive";
    // The reference case's form (docs/reference-case.md (b)): the first stage's embedding dropout masks, a
    // few MiB, are in the total but not in the line.
    o << ": " << w.layer_activations << " * " << gib_str(sums.of(l.recompute), 3) << " = " << gib_str(w.activations)
      << " GiB\n";
  }
  if (l.tp > 1) explain_sp_toggle(o, p, l);
}

// (c): the reserve term by term, both totals, which decides, and the headroom.
void explain_total(std::ostream& o, const problem& p, const breakdown& b) {
  const auto& m = p.model;
  const auto& l = b.where;
  const auto& w = b.worst_stage();
  const double cap = to_gib(p.device.capacity);
  const std::int64_t s = p.training.seq, mb = p.training.micro_batch;
  o << "\n(c) Total\n";
  {
    // The reserve, term by term (planner/reserve.hpp).
    const auto& r = p.device.reserve;
    const std::int64_t churn = w.terms().churn();
    const std::int64_t tokens = reserve_tokens(p, b.where);
    o << "  reserve (" << r.source << "):\n";
    if (r.fixed_only() && r.source == reserve_model{}.source)
      o << "    not calibrated: what the reference case leaves for the CUDA context, NCCL and fragmentation "
           "(docs/reference-case.md); `headroom calibrate` fits it from measurements\n";
    o << "    fixed                          " << gib_str(r.fixed, 2) << " GiB\n";
    if (!r.fixed_only()) {
      o << "    fragmentation " << fixed(r.fragmentation, 4) << " x churn " << gib_str(churn, 2)
        << " GiB = " << gib_str(static_cast<std::int64_t>(r.fragmentation * static_cast<double>(churn)), 2)
        << " GiB\n";
      o << "    per token " << bytes_str(r.per_token) << " x " << tokens
        << " tokens = " << gib_str(static_cast<std::int64_t>(r.per_token * static_cast<double>(tokens)), 2)
        << " GiB\n";
      if (r.activation_extra != 0)
        o << "    activations " << fixed(r.activation_extra, 4) << " x " << gib_str(w.activations, 2) << " GiB = "
          << gib_str(static_cast<std::int64_t>(r.activation_extra * static_cast<double>(w.activations)), 2)
          << " GiB (the fitted activation factor less one)\n";
      o << "    (churn = transient + activations + max(working set, output phase))\n";
    }
  }
  o << "  total = state " << gib_str(w.state) << " + activations " << gib_str(w.activations) << " + reserve "
    << gib_str(w.reserve) << " = " << gib_str(w.total) << " GiB (the reference total)\n";
  o << "  step peak = " << (w.allocator_workspaces ? "library workspaces " + gib_str(w.allocator_workspaces, 2) + " + " : "")
    << "persistent " << gib_str(w.persistent) << " + transient " << gib_str(w.transient)
    << " + activations " << gib_str(w.activations) << " + max(backward working set " << gib_str(w.working_set)
    << ", output phase " << gib_str(w.output_phase) << ") = " << gib_str(w.step_peak) << " GiB\n";
  if (w.output_phase)
    o << "    output phase, " << to_string(p.training.loss) << " loss: " << s / l.cp << " * " << mb
      << " tokens * " << (m.vocab + l.tp - 1) / l.tp << " logits * "
      << (p.training.loss == loss_kind::fused
              ? "(4 fp32 softmax + " + std::to_string(p.precision.activation_bytes) + " gradient)"
          : p.training.loss == loss_kind::compiled
              ? "(4 fp32 softmax + 4 the compiled step's result + " +
                    std::to_string(p.precision.activation_bytes) + " gradient)"
          : l.tp > 1 ? "(4 saved log_softmax + 4 zeros gradient + 4 exp + 4 their sum: loss_parallel's "
                       "backward peak)"
                     : "(4 saved log_softmax + 4 its gradient + 4 the input's gradient: the backward peak)")
      << " bytes"
      << (m.moe.mtp_layers > 0 ? " + " + std::to_string(m.moe.mtp_layers) +
                                     " MTP module(s) * 4 bytes per logit (each one's saved " +
                                     (p.training.loss != loss_kind::unfused ? "softmax" : "log_softmax") + ")"
                               : "")
      << " + per-token loss terms"
      << (p.training.loss == loss_kind::unfused ? " + the final norm's and output layer's saved inputs" : "")
      << " = " << gib_str(w.output_phase, 2) << " GiB\n";
  o << "  step peak + fixed overheads " << gib_str(w.fixed_overheads, 2)
    << " (context, NCCL) = " << gib_str(w.peak_total) << " GiB\n";
  o << "  decided by: " << (w.peak_decides() ? "the step peak + fixed overheads (" : "the reference total (")
    << gib_str(w.decisive_total()) << " GiB, the larger of the two)\n";
  o << "  headroom = " << trim(cap, 1) << " - " << gib_str(w.decisive_total()) << " = " << gib_str(w.headroom)
    << " GiB (" << fixed(100.0 * static_cast<double>(w.headroom) / static_cast<double>(w.capacity), 1)
    << "%): "
    << (w.fits ? (w.tight() ? "fits, but under 5% headroom is too tight to trust" : "fits") : "does not fit")
    << "\n";
  if (l.pp > 1) o << "  the worst rank is stage " << w.stage << "; it decides whether the layout fits\n";
}

// Returns whether stage `s` could be the worst one: the first (most activations in flight, the embedding) and
// the last (the output layer and the loss) can be under other settings, and so can any stage within 10% of
// the worst's decisive total.
bool can_be_worst(const breakdown& b, const stage_breakdown& s) {
  const std::int64_t worst = b.worst_stage().decisive_total();
  return s.stage == 0 || s.stage == b.where.pp - 1 || s.decisive_total() * 10 >= worst * 9;
}

// (d): every other stage that can be the worst, term by term, and how far it is from the worst.
void explain_other_stages(std::ostream& o, const breakdown& b) {
  const auto& l = b.where;
  const auto& w = b.worst_stage();
  const std::int64_t per_layer = b.basis.per_layer.of(l.recompute);
  bool heading = false;
  for (const auto& s : b.stages) {
    if (s.stage == w.stage || !can_be_worst(b, s)) continue;
    if (!heading) o << "\n(d) The other stages that can be the worst (first, last, and any within 10%)\n";
    heading = true;
    o << "  stage " << s.stage << ": " << s.layers << " layers"
      << (s.moe_layers ? " (" + std::to_string(s.moe_layers) + " MoE)" : "") << ", "
      << eng(static_cast<double>(s.params_on_rank)) << " parameters on the rank"
      << (s.stage == l.pp - 1 ? " with the output layer" : s.stage == 0 ? " with the embedding" : "") << "\n";
    o << "    state = ";
    if (s.transient) o << gib_str(s.persistent) << " + " << gib_str(s.transient) << " transient = ";
    o << gib_str(s.state) << " GiB (persistent: parameters, gradients, master weights, optimizer states)\n";
    o << "    activations = " << s.layer_activations << " layer activations";
    if (const auto alive = explain_alive_by_kind(s); !b.basis.moe_ledger.empty() && s.moe_layers)
      o << " (" << alive.dense << " dense, " << alive.moe << " MoE: " << explain_kinds_sum(b, s) << ")";
    else
      o << " * " << gib_str(per_layer, 3) << " GiB";
    if (s.embedding_activations) o << " + embedding " << gib_str(s.embedding_activations, 2) << " GiB";
    if (s.mtp_activations) o << " + MTP modules " << gib_str(s.mtp_activations, 2) << " GiB";
    o << " = " << gib_str(s.activations) << " GiB\n";
    o << "    total = " << gib_str(s.state) << " + " << gib_str(s.activations) << " + reserve "
      << gib_str(s.reserve) << " = " << gib_str(s.total) << " GiB; step peak + fixed overheads = "
      << gib_str(s.step_peak) << " + " << gib_str(s.fixed_overheads, 2) << " = " << gib_str(s.peak_total)
      << " GiB";
    if (s.output_phase) o << " (output phase " << gib_str(s.output_phase) << " GiB)";
    o << "\n    decides at " << gib_str(s.decisive_total()) << " GiB, " << gib_str(w.decisive_total() - s.decisive_total())
      << " GiB under stage " << w.stage << "; headroom " << gib_str(s.headroom) << " GiB\n";
  }
}

}  // namespace

std::string explain_plan(const problem& p, const breakdown& b) {
  std::ostringstream o;
  o << "Derivation (predicted by the analytic model; docs/model.md derives each term)\n\n";
  explain_state(o, p, b);
  explain_activations(o, p, b);
  explain_total(o, p, b);
  explain_other_stages(o, b);
  return o.str();
}

std::string explain_nothing_fits(const problem& p, const suggestion& s) {
  std::ostringstream o;
  const auto& b = s.bound;
  const double cap = to_gib(p.device.capacity), res = to_gib(p.device.reserve.fixed);
  const auto pc = count_params(p.model);
  if (s.evaluated == 0) {
    o << "no layout is valid on " << s.gpus
      << " GPUs with the axes fixed on the command line (tp*pp*cp must divide N, tp stay inside a node)\n";
  } else if (b.impossible) {
    o << "proof: the axes that shard state do so by their degrees, and those degrees multiply to at most N\n";
    o << "  state_per_gpu >= " << b.shardable_per_param
      << "*Psi / (tp * pp * dp_shard)   and   tp * pp * dp <= N\n";
    o << "  => best possible state_per_gpu = " << b.shardable_per_param << "*Psi / N\n";
    o << "  " << b.shardable_per_param << " * " << eng(static_cast<double>(pc.total)) << " / " << s.gpus
      << " = " << eng(static_cast<double>(b.per_gpu)) << " bytes = " << gib_str(b.per_gpu, 2) << " GiB\n";
    o << "  usable = " << trim(cap, 1) << " - " << trim(res, 1)
      << " (reserve) - activations(>= 0) <= " << gib_str(b.usable) << " GiB\n";
    o << "  " << gib_str(b.per_gpu, 2) << " > " << gib_str(b.usable) << "  ->  no configuration exists\n";
  } else {
    o << "the state bound does not rule it out (" << b.shardable_per_param
      << "*Psi/N = " << gib_str(b.per_gpu, 2) << " GiB <= " << gib_str(b.usable)
      << " GiB usable), but every layout's activations and transients exceed the rest";
    if (s.smallest)
      o << "; the smallest total is " << gib_str(s.smallest->worst.total) << " GiB ("
        << zero_name(s.smallest->where) << " + " << to_string(s.smallest->where.recompute) << ", "
        << axes_string(s.smallest->where) << ")";
    o << "\n";
  }
  return o.str();
}

std::string explain_min_gpus(const problem& p, const min_gpus_result& r) {
  std::ostringstream o;
  const auto& b = r.bound;
  const double cap = to_gib(p.device.capacity), res = to_gib(p.device.reserve.fixed);
  const double act = to_gib(r.full_recompute_activations);
  const double state = to_gib(b.state_total);
  const double room = cap - res - act;
  o << "lower bound: leave room for the cheapest activations, full recompute at tp=1:\n";
  o << "  2*s*b*h*L = 2 * " << p.training.seq << " * " << p.training.micro_batch << " * " << p.model.hidden
    << " * " << p.model.layers << " = " << eng(static_cast<double>(r.full_recompute_activations))
    << " bytes = " << fixed(act, 1) << " GiB\n";
  o << "  " << b.shardable_per_param << "*Psi/N + " << fixed(act, 1) << " + " << trim(res, 1)
    << " <= " << trim(cap, 1) << "\n";
  o << "  " << b.shardable_per_param << "*Psi/N <= " << fixed(room, 1) << " GiB\n";
  if (room > 0 && std::isfinite(r.activation_room_bound) && r.activation_room_bound < 1e12) {
    o << "  N >= " << fixed(state, 1) << " / " << fixed(room, 1) << " = " << fixed(r.activation_room_bound, 1)
      << "   ->  N >= " << static_cast<long long>(std::ceil(r.activation_room_bound - 1e-9));
    const int first = static_cast<int>(std::min(std::ceil(r.activation_room_bound - 1e-9), 1e9));
    const int gpn = p.device.gpus_per_node, whole = whole_node_count(first, gpn);
    if (whole != first)
      o << "  ->  N >= " << whole << " in whole nodes of " << gpn << " (--gpus-per-node)";
    o << "\n";
  } else {
    o << "  no room is left for state at tp=1: this form of the bound gives no N\n";
  }
  if (cap - res > 0 && std::isfinite(r.strict_bound) && r.strict_bound < 1e12)
    o << "  strict form (tp and cp shrink activations further, so count none): N >= " << fixed(state, 1)
      << " / " << fixed(cap - res, 1) << " = " << fixed(r.strict_bound, 2)
      << "; the search starts at N = " << r.first_candidate << "\n";
  else
    o << "  strict form: the reserve alone fills the GPU: no N can fit\n";
  if (r.floor_proves_none)
    o << "  per-rank floor: one layer's activations at the most sharded layout with the reserve (or the "
         "working "
         "set and the fixed overheads) is "
      << fixed(to_gib(r.per_rank_floor), 1) << " GiB > " << trim(cap, 1)
      << " GiB: no N can fit, whatever the data-parallel degree\n";
  return o.str();
}

}  // namespace headroom
