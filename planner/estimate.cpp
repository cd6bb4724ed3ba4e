// estimate.cpp: the per-stage analytic memory model (see estimate.hpp and docs/model.md).
#include "estimate.hpp"

#include <algorithm>
#include <span>

#include "errors.hpp"
#include "schedule.hpp"

namespace headroom {

namespace {
__extension__ using wide_int = __int128;  // Ψ * layers can pass 2^63
std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}
}  // namespace

rank_params layer_params_on_rank(const param_counts& pc, const layout& l) {
  auto of = [&](const layer_params& x) {
    return rank_params{ceil_div(x.sharded, l.tp) + x.replicated,
                       ceil_div(x.expert, static_cast<std::int64_t>(l.ep) * l.expert_tp()), x.replicated};
  };
  if (pc.moe_before.empty()) return {ceil_div(pc.per_layer, l.tp), 0, 0};
  const rank_params d = of(pc.dense_layer), m = of(pc.moe_layer);
  return m.total() >= d.total() ? m : d;
}

namespace {
// DeepSpeed's ZeRO-3 gathers module by module, not a layer at once: fetch_sub_module gathers the module
// about to run, and prefetching stops once the gathered parameters reach stage3_max_live_parameters (its
// budget is max_live - available, deepspeed/runtime/zero/partitioned_param_coordinator.py,
// __max_n_available_params), passing it by at most one weight. So when the limit is below one dense
// layer's parameters on the rank, at most limit + the largest weight (fc1: h x f, gate and up fused as
// Megatron fuses them) is gathered at once. Returns that many parameters, or 0 when the limit allows a
// whole layer (or none is set).
std::int64_t zero3_dense_live_bound(const problem& p, const param_counts& pc, const layout& l) {
  if (l.zero3_live_params <= 0) return 0;
  const std::int64_t layer = ceil_div(pc.per_layer, l.tp);
  const std::int64_t fc1 =
      ceil_div(saturating_mul(p.model.hidden, p.model.ffn_hidden) * (p.model.mlp == mlp_kind::swiglu ? 2 : 1), l.tp);
  std::int64_t bound = 0;
  if (__builtin_add_overflow(l.zero3_live_params, fc1, &bound)) return 0;
  return bound < layer ? bound : 0;
}
}  // namespace

std::int64_t zero3_gather_bytes(const problem& p, const param_counts& pc, const layout& l) {
  if (!pc.moe_before.empty())
    return layer_params_on_rank(pc, l).total() * p.precision.gathered_bytes_per_param();
  const std::int64_t unit =
      pc.per_layer * p.precision.gathered_bytes_per_param() / (static_cast<std::int64_t>(l.tp) * l.pp);
  if (const std::int64_t bound = zero3_dense_live_bound(p, pc, l))
    return static_cast<std::int64_t>(static_cast<long double>(unit) * static_cast<long double>(bound) /
                                     static_cast<long double>(ceil_div(pc.per_layer, l.tp)));
  return unit;
}

std::int64_t zero3_units(const param_counts& pc, const layout& l, std::int64_t chunk_layers) {
  std::int64_t units = std::min<std::int64_t>(l.zero3_inflight_units, chunk_layers);
  if (l.zero3_live_params > 0) {
    const std::int64_t layer = std::max<std::int64_t>(1, layer_params_on_rank(pc, l).total());
    units = std::min(units, std::max<std::int64_t>(1, l.zero3_live_params / layer));
  }
  return units;
}

void check_state_fits_in_int64(const problem& p, const param_counts& pc) {
  // Every buffer's bytes for the whole model, and their sum, must be representable: then no per-rank
  // product or sum of state (a part of it) can overflow.
  std::int64_t sum = 0;
  for (const auto& b : p.precision.buffers) {
    const std::int64_t bytes = detail::checked_mul(b.bytes, pc.total, "state");
    if (__builtin_add_overflow(sum, bytes, &sum))
      throw bad_input("state", "the model's state overflows 64-bit bytes");
  }
  if (sum > INT64_MAX / 8) throw bad_input("state", "the model's state is absurd (over an exabyte)");
}

std::int64_t reserve_tokens(const problem& p, const layout& l) {
  return p.training.seq / std::max(1, l.cp) * p.training.micro_batch;
}

std::int64_t stage_moe_layers(const problem& p, const param_counts& pc, const layout& l, int stage,
                              std::int64_t layers) {
  if (pc.moe_before.empty()) return 0;
  if (l.vpp <= 1) return pc.moe_layers_in(first_layer_of(p, l, stage), layers);
  std::int64_t n = 0;
  for (int c = 0; c < l.vpp; ++c)
    n += pc.moe_layers_in(chunk_first_layer(p, l, stage, c), chunk_layers(p, l, stage, c));
  return n;
}

rank_params stage_params_on_rank(const problem& p, const param_counts& pc, const layout& l, int stage,
                                 std::int64_t layers, std::int64_t moe_layers) {
  const std::int64_t L = p.model.layers;
  if (pc.stated) {
    // Psi * layers_k / L: with an even split this is Psi / pp exactly, the reference figure; uneven, in
    // 128 bits so the product cannot overflow.
    const std::int64_t stage_params =
        layers * l.pp == L ? pc.total / l.pp
                           : static_cast<std::int64_t>(static_cast<wide_int>(pc.total) * layers / L);
    return {ceil_div(stage_params, l.tp), 0, 0};
  }
  const std::int64_t dense_layers = layers - moe_layers;
  std::int64_t sharded = dense_layers * pc.dense_layer.sharded + moe_layers * pc.moe_layer.sharded;
  std::int64_t replicated = dense_layers * pc.dense_layer.replicated + moe_layers * pc.moe_layer.replicated;
  std::int64_t expert = moe_layers * pc.moe_layer.expert;
  if (stage == 0) {
    sharded += pc.embedding - pc.embedding_replicated;
    replicated += pc.embedding_replicated;
  }
  if (stage == l.pp - 1) {
    sharded += pc.output - pc.output_replicated + (l.pp > 1 ? pc.output_tied : 0) + pc.mtp.sharded;
    replicated += pc.output_replicated + pc.mtp.replicated;
    expert += pc.mtp.expert;
  }
  // What is not a layer's linear weight: the replicated part, and the embedding and head split by tp.
  std::int64_t head = 0;
  if (stage == 0) head += pc.embedding - pc.embedding_replicated;
  if (stage == l.pp - 1) head += pc.output - pc.output_replicated + (l.pp > 1 ? pc.output_tied : 0);
  const std::int64_t dense = ceil_div(sharded, l.tp) + replicated;
  return {dense, ceil_div(expert, static_cast<std::int64_t>(l.ep) * l.expert_tp()),
          std::min(dense, ceil_div(head, l.tp) + replicated)};
}

std::int64_t buffer_bytes(const recipe& r, std::size_t i, int zero, int shard_degree, int expert_shard_degree,
                          const rank_params& on_rank) {
  const recipe_buffer& b = r.buffers[i];
  const bool linear = r.linear_only >> i & 1, other = r.other_only >> i & 1;
  const std::int64_t dense_count = linear ? on_rank.dense - on_rank.other : other ? on_rank.other : on_rank.dense;
  const std::int64_t dense = b.bytes * dense_count, expert = other ? 0 : b.bytes * on_rank.expert;
  if (zero < b.shard_from) return dense + expert;
  return ceil_div(dense, shard_degree) + (expert ? ceil_div(expert, expert_shard_degree) : 0);
}

std::int64_t buffer_bytes(const recipe& r, std::size_t i, const layout& l, const rank_params& on_rank) {
  return buffer_bytes(r, i, l.zero, l.shard_degree(), l.expert_shard_degree(), on_rank);
}

std::int64_t persistent_bytes(const problem& p, const layout& l, const rank_params& on_rank, const layout_shares& sh) {
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < p.precision.buffers.size(); ++i)
    if (!offloaded(p.precision.buffers[i], l))
      sum += buffer_bytes(p.precision, i, l.zero, sh.shard_degree, sh.expert_shard_degree, on_rank);
  return sum;
}

std::int64_t persistent_bytes(const problem& p, const layout& l, const rank_params& on_rank) {
  layout_shares sh;
  sh.shard_degree = l.shard_degree();
  sh.expert_shard_degree = l.expert_shard_degree();
  return persistent_bytes(p, l, on_rank, sh);
}

std::int64_t stage_transient(const problem& p, const param_counts& pc, const layout& l, std::int64_t chunk_layers,
                             const rank_params& on_rank, const layout_shares& sh) {
  // Below ZeRO-3 without DeepSpeed's buckets nothing is in flight.
  if (l.zero == 0 || (l.zero < 3 && l.reduce_bucket == 0) || sh.shard_degree <= 1) return 0;
  // DeepSpeed's buckets (0 unless a DeepSpeed config set them): the gradient reduce buckets in the
  // gradients' dtype.
  std::int64_t buckets = saturating_mul(l.reduce_bucket, p.precision.bytes_of(buffer_kind::grads));
  if (l.zero < 3) return buckets;
  const std::int64_t param_bytes = p.precision.gathered_bytes_per_param();
  // ZeRO-3: whole layers gathered in flight, or DeepSpeed's prefetch bucket when that holds more.
  const std::int64_t gathered = l.reshard_after_forward ? zero3_units(pc, l, chunk_layers) * zero3_gather_bytes(p, pc, l)
                                                        : p.precision.gathered_bytes(on_rank.total() - on_rank.other,
                                                                                     on_rank.other);
  return buckets + std::max(gathered, saturating_mul(l.prefetch_bucket, param_bytes));
}

namespace {

// Returns what the last stage's MTP modules keep per micro-batch under `r`, bytes: each a transformer layer
// of the model's last layer's kind (Megatron builds it with that layer's spec, after the decoder's last layer
// in the last model chunk) plus the module's own tensors (mtp_module_tensors); 0 without MTP.
std::int64_t mtp_bytes_per_microbatch(const problem& p, const activation_sums& per_layer, const peak_sums& peaks,
                                      recompute_mode r) {
  const int n = p.model.moe.mtp_layers;
  if (n <= 0) return 0;
  if (full_every(r) > 0) r = recompute_mode::full;  // one module, not a chunk of N layers: the rule of full
  return saturating_mul(
      n, saturating_add(p.model.mtp_layer_is_moe() ? peaks.moe_layer.of(r) : per_layer.of(r), peaks.mtp_module.of(r)));
}

// Returns the activations of stage `s` under interleaving with chunks of different layer kinds or sizes, or
// MTP modules after the last chunk: each chunk weighted by its copies at the moment the stage holds the most
// (schedule.hpp peak_chunk_copies), not the stage's average. Without the embedding.
stage_activation_terms interleaved_activations(const problem& p, const param_counts& pc,
                                               const activation_sums& per_layer, const peak_sums& peaks,
                                               const layout& l, const stage_place& s, std::int64_t M,
                                               std::int64_t mtp) {
  const auto v = static_cast<std::size_t>(std::max(1, l.vpp));  // at least one chunk (vpp > 1 here)
  const std::int64_t dense_bytes = per_layer.of(l.recompute), moe_bytes = peaks.moe_layer.of(l.recompute);
  // Four arrays of vpp entries: on the stack up to 16 chunks (the search tries up to 8), else on the heap.
  constexpr std::size_t small = 16;
  std::int64_t on_stack[4 * small];
  std::vector<std::int64_t> on_heap(v > small ? 4 * v : 0);
  std::int64_t* base = v > small ? on_heap.data() : on_stack;
  const std::span<std::int64_t> layers(base, v), moe(base + v, v), bytes(base + 2 * v, v),
      copies(base + 3 * v, v);
  for (std::size_t c = 0; c < v; ++c) {
    const auto chunk = static_cast<std::int64_t>(c);
    layers[c] = chunk_layers(p, l, s.stage, chunk);
    moe[c] = pc.moe_layers_in(chunk_first_layer(p, l, s.stage, chunk), layers[c]);
    bytes[c] = saturating_add(saturating_mul(layers[c] - moe[c], dense_bytes), saturating_mul(moe[c], moe_bytes));
  }
  bytes[v - 1] = saturating_add(bytes[v - 1], mtp);  // the MTP modules run after the last chunk's layers
  peak_chunk_copies(l, s.stage, M, bytes, copies);
  stage_activation_terms a;
  for (std::size_t c = 0; c < v; ++c) {
    a.layer_activations += copies[c] * layers[c];
    a.moe_layer_activations += copies[c] * moe[c];
    a.activations = saturating_add(a.activations, saturating_mul(copies[c], bytes[c]));
  }
  a.mtp = saturating_mul(copies[v - 1], mtp);
  return a;
}

}  // namespace

layout_shares shares_of(const problem& p, const param_counts& pc, const layout& l) {
  layout_shares sh;
  sh.microbatches = microbatches_per_step(p, l);
  sh.embeddings = embeddings_in_flight(l, sh.microbatches);
  sh.shard_degree = l.shard_degree();
  sh.expert_shard_degree = l.expert_shard_degree();
  sh.tokens = reserve_tokens(p, l);
  sh.unsharded_grad = unsharded_layer_grad_bytes(p, pc, l, sh.shard_degree);
  return sh;
}

stage_place place_of(const problem& p, const param_counts& pc, const layout& l, int stage) {
  stage_place s;
  s.stage = stage;
  s.layers = stage_layers(p, l, stage);
  s.moe_layers = stage_moe_layers(p, pc, l, stage, s.layers);
  s.largest_chunk = l.vpp <= 1 ? s.layers : largest_chunk_layers(p, l, stage);  // one chunk: the stage's layers
  s.first = stage == 0;
  s.last = stage == l.pp - 1;
  return s;
}

stage_activation_terms stage_activations(const problem& p, const param_counts& pc, const activation_sums& per_layer,
                                         const peak_sums& peaks, const layout& l, const stage_place& s,
                                         const layout_shares& sh) {
  // The schedule (schedule.hpp): 1F1B keeps min(pp - k, M) micro-batches of the stage's layers;
  // interleaved, 2(pp-k-1) + (vpp-1)pp + 1 chunks of layers/vpp, for k = 0 the factor
  // (1 + (pp-1)/(pp*vpp)) of docs/model.md section 5.
  const std::int64_t M = sh.microbatches, chunks = chunks_in_flight(l, s.stage, M);
  const std::int64_t mtp = s.last ? mtp_bytes_per_microbatch(p, per_layer, peaks, l.recompute) : 0;
  stage_activation_terms a;
  // Interleaved chunks that can differ: of different sizes, with MTP after the last, or of a MoE model on a
  // stage that is not all MoE layers. Chunks alike (a stage of MoE layers alone among them) hold
  // chunks_in_flight copies whichever chunks are in flight, so the schedule's walk is not needed.
  const bool all_moe = s.moe_layers > 0 && s.moe_layers == s.layers;
  if (l.vpp > 1 && ((!pc.moe_before.empty() && !all_moe) || uneven_chunks(p, l) || mtp > 0)) {
    a = interleaved_activations(p, pc, per_layer, peaks, l, s, M, mtp);
  } else {
    // Here every chunk holds the same layers, of one kind where vpp > 1, and no MTP module with vpp > 1.
    a.layer_activations = chunks * (s.layers / l.vpp);
    a.moe_layer_activations = chunks * (s.moe_layers / l.vpp);
    a.activations = stage_layer_activations(chunks, s.layers, s.moe_layers, l.vpp, per_layer, peaks, l.recompute);
    if (mtp > 0) {
      a.mtp = saturating_mul(chunks, mtp);
      a.activations = saturating_add(a.activations, a.mtp);
    }
  }
  if (s.first && peaks.first_stage) {
    a.embedding = sh.embeddings * peaks.first_stage;
    a.activations += a.embedding;
  }
  return a;
}

std::int64_t stage_working_set(const peak_sums& peaks, const layout& l, const stage_place& s,
                               std::int64_t unsharded_grad) {
  // full_every_N on a stage of fewer than N layers recomputes none of them: its working set is none's.
  const recompute_mode ws_mode =
      full_every(l.recompute) > 0 && fully_recomputed_layers(l.recompute, s.layers) == 0 ? recompute_mode::none
                                                                                          : l.recompute;
  return peaks.working_set_of(ws_mode, s.moe_layers > 0) + unsharded_grad;
}

stage_breakdown evaluate_stage(const problem& p, const param_counts& pc, const activation_sums& per_layer,
                               const peak_sums& peaks, const layout& l, int stage) {
  return evaluate_stage(p, pc, per_layer, peaks, l, place_of(p, pc, l, stage), shares_of(p, pc, l));
}

namespace {

// What a stage's figures are built from, found once: evaluate_stage spreads them over the breakdown,
// stage_terms_of adds them up, and evaluate_worst keeps the worst candidate's for its breakdown.
// Its arrays are left for pieces_of to write whole: zeroing the struct at once costs the search a tenth of a
// layout's time (bench/search_bench.cpp, BM_EvaluateLayout).
struct stage_pieces {
  rank_params on_rank;
  std::array<std::int64_t, max_recipe_buffers> buffers;  // bytes on the GPU, per recipe buffer
  std::int64_t by_kind[4];                               // params, grads, master, optimizer bytes on the GPU
  std::int64_t host_offload = 0;
  std::int64_t persistent = 0;
  std::int64_t transient = 0;
  stage_activation_terms activations;
  std::int64_t working_set = 0;
};

stage_pieces pieces_of(const problem& p, const param_counts& pc, const activation_sums& per_layer,
                       const peak_sums& peaks, const layout& l, const stage_place& place, const layout_shares& sh) {
  stage_pieces x;
  // Parameters this rank owns. A stated Ψ is spread evenly (as the reference case does); a derived one puts
  // the embedding on the first stage and the output layer (a tied copy when pp > 1) on the last.
  x.on_rank = stage_params_on_rank(p, pc, l, place.stage, place.layers, place.moe_layers);
  const auto& bufs = p.precision.buffers;
  x.buffers.fill(0);
  std::fill(std::begin(x.by_kind), std::end(x.by_kind), 0);
  for (std::size_t i = 0; i < bufs.size() && i < max_recipe_buffers; ++i) {
    const auto& b = bufs[i];
    const std::int64_t bytes =
        buffer_bytes(p.precision, i, l.zero, sh.shard_degree, sh.expert_shard_degree, x.on_rank);
    if (offloaded(b, l)) {
      x.host_offload += bytes;
      continue;
    }
    x.buffers[i] = bytes;
    x.by_kind[b.kind == buffer_kind::params   ? 0
              : b.kind == buffer_kind::grads  ? 1
              : b.kind == buffer_kind::master ? 2
                                              : 3] += bytes;
  }
  x.persistent = x.by_kind[0] + x.by_kind[1] + x.by_kind[2] + x.by_kind[3];
  // ZeRO-3 gathers whole layers before use: `units` in flight, divided by tp * pp as the reference case does.
  // Gathers stay inside one model chunk: the stage's layers / vpp. Without resharding after forward (FSDP),
  // every layer's gathered parameters stay until its backward: the stage's whole unsharded parameters.
  x.transient = stage_transient(p, pc, l, place.largest_chunk, x.on_rank, sh);
  x.activations = stage_activations(p, pc, per_layer, peaks, l, place, sh);
  x.working_set = stage_working_set(peaks, l, place, sh.unsharded_grad);
  return x;
}

stage_terms terms_of(const problem& p, const peak_sums& peaks, const stage_place& place, const stage_pieces& x) {
  return {x.persistent, x.transient, x.activations.activations, x.working_set, place.last ? peaks.output_phase : 0,
          p.device.allocator_workspaces};
}

stage_breakdown breakdown_of(const problem& p, const peak_sums& peaks, const layout& l, const stage_place& place,
                             const layout_shares& sh, const stage_pieces& x) {
  const stage_activation_terms& a = x.activations;
  const stage_terms terms = terms_of(p, peaks, place, x);
  // The verdict (stage_terms.hpp): step peak, reserve, both totals, headroom.
  const stage_verdict v = judge(terms, p.device, sh.tokens);
  // Every field named once (no zeroing of the whole breakdown first: this is per layout in evaluate_worst).
  return {.stage = place.stage,
          .layers = place.layers,
          .moe_layers = place.moe_layers,
          .params_on_rank = x.on_rank.total(),
          .expert_params_on_rank = x.on_rank.expert,
          .buffer_bytes = x.buffers,
          .params = x.by_kind[0],
          .grads = x.by_kind[1],
          .master = x.by_kind[2],
          .optimizer = x.by_kind[3],
          .host_offload = x.host_offload,
          .persistent = x.persistent,
          .transient = x.transient,
          .state = terms.state(),
          .layer_activations = a.layer_activations,
          .moe_layer_activations = a.moe_layer_activations,
          .embedding_activations = a.embedding,
          .mtp_activations = a.mtp,
          .activations = a.activations,
          .logits = place.last ? logits_bytes(p.model, {p.training.seq, p.training.micro_batch, l.tp, l.sp(), l.cp,
                                                        p.training.attention, p.precision.activation_bytes})
                               : 0,
          .working_set = terms.working_set,
          .output_phase = terms.output_phase,
          .allocator_workspaces = terms.workspaces,
          .step_peak = v.step_peak,
          .fixed_overheads = p.device.fixed_overheads,
          .peak_total = v.peak_total,
          .reserve = v.reserve,
          .total = v.total,
          .capacity = p.device.capacity,
          .headroom = v.headroom,
          .fits = v.fits};
}

}  // namespace

stage_breakdown evaluate_stage(const problem& p, const param_counts& pc, const activation_sums& per_layer,
                               const peak_sums& peaks, const layout& l, const stage_place& place,
                               const layout_shares& sh) {
  return breakdown_of(p, peaks, l, place, sh, pieces_of(p, pc, per_layer, peaks, l, place, sh));
}

bool middle_stage_dominates(const problem& p, const param_counts& pc, const layout& l, const stage_place& a,
                            const stage_place& b) {
  if (a.first || a.last || b.first || b.last || a.stage >= b.stage) return false;
  if (a.layers != b.layers || a.moe_layers != b.moe_layers || a.largest_chunk != b.largest_chunk) return false;
  if (l.vpp <= 1 || (pc.moe_before.empty() && !uneven_chunks(p, l))) return true;  // chunks of layers / vpp
  for (std::int64_t c = 0; c < l.vpp; ++c) {
    const std::int64_t n = chunk_layers(p, l, a.stage, c);
    if (n != chunk_layers(p, l, b.stage, c) ||
        pc.moe_layers_in(chunk_first_layer(p, l, a.stage, c), n) !=
            pc.moe_layers_in(chunk_first_layer(p, l, b.stage, c), n))
      return false;
  }
  return true;
}

stage_terms stage_terms_of(const problem& p, const param_counts& pc, const activation_sums& per_layer,
                           const peak_sums& peaks, const layout& l, const stage_place& place, const layout_shares& sh) {
  return terms_of(p, peaks, place, pieces_of(p, pc, per_layer, peaks, l, place, sh));
}

stage_breakdown evaluate_worst(const problem& p, const param_counts& pc, const activation_sums& per_layer,
                               const peak_sums& peaks, const layout& l) {
  const layout_shares sh = shares_of(p, pc, l);
  // The stages' decisive totals from their terms, the full breakdown for the first largest alone, from the
  // pieces its total was found from.
  stage_place worst;
  stage_pieces pieces;
  std::int64_t most = 0;
  bool any = false;
  for_each_worst_candidate(p, pc, l, [&](const stage_place& place) {
    stage_pieces x = pieces_of(p, pc, per_layer, peaks, l, place, sh);
    if (l.pp > 1) {  // one stage: nothing to compare
      const std::int64_t d = terms_of(p, peaks, place, x).decisive_total(p.device, sh.tokens);
      if (any && d <= most) return;
      most = d;
      any = true;
    }
    worst = place;
    pieces = x;
  });
  return breakdown_of(p, peaks, l, worst, sh, pieces);
}

std::int64_t unsharded_layer_grad_bytes(const problem& p, const param_counts& pc, const layout& l,
                                        int shard_degree) {
  if (l.zero < 2 || shard_degree <= 1) return 0;
  return layer_params_on_rank(pc, l).total() * p.precision.bytes_of(buffer_kind::grads);
}

std::int64_t unsharded_layer_grad_bytes(const problem& p, const param_counts& pc, const layout& l) {
  return unsharded_layer_grad_bytes(p, pc, l, l.shard_degree());
}

breakdown estimate(const problem& p, const layout& l) {
  validate(p.model);
  validate(p.training, p.device);
  validate(p, l);
  breakdown r;
  r.where = l;
  r.basis.params = count_params(p.model);
  check_state_fits_in_int64(p, r.basis.params);
  r.basis.ledger = layer_ledger(p.model, shape_of(p, l));
  r.basis.per_layer = sum_ledger(r.basis.ledger, p.training.recompute_modules);
  if (p.model.moe.enabled()) r.basis.moe_ledger = layer_ledger(p.model, shape_of(p, l), true);
  r.basis.microbatches = microbatches_per_step(p, l);
  // Overflow guard for the inner loop: the largest activation product must stay in int64.
  detail::checked_mul(r.basis.per_layer.none, p.model.layers * std::max(1, l.pp) * 2, "activations");
  detail::checked_mul(total_bytes(r.basis.moe_ledger), p.model.layers * std::max(1, l.pp) * 2, "activations");
  const auto shape = shape_of(p, l);
  const std::int64_t ugrad = unsharded_layer_grad_bytes(p, r.basis.params, l);
  r.basis.working_set = backward_working_set(p.model, shape, l.recompute, ugrad);
  if (p.model.moe.enabled()) {  // the MoE layer's working set, where it is the larger
    auto moe = backward_working_set(p.model, shape, l.recompute, ugrad, true);
    if (total_bytes(moe) > total_bytes(r.basis.working_set)) r.basis.working_set = std::move(moe);
  }
  r.basis.output_phase = output_phase_tensors(p.model, shape);
  r.basis.first_stage = first_stage_tensors(p.model, shape);
  r.basis.mtp_module = mtp_module_tensors(p.model, shape);
  r.basis.peaks = sum_peaks(p.model, shape);
  for (int k = 0; k < l.pp; ++k) {
    r.stages.push_back(evaluate_stage(p, r.basis.params, r.basis.per_layer, r.basis.peaks, l, k));
    if (r.stages.back().decisive_total() > r.stages[static_cast<std::size_t>(r.worst)].decisive_total())
      r.worst = k;
  }
  return r;
}

}  // namespace headroom
