// stage_terms.hpp: the verdict, stated once. A pipeline stage's five memory terms (persistent, transient,
// activations, backward working set, output phase) and what the verdict derives from them: the churn the
// reserve grows with, the step peak, the reserve, the reference total, the step peak + fixed overheads, the
// decisive total, the headroom, whether it fits and whether that is too tight to trust. estimate(), the
// search's fast path (suggest.cpp), --explain, the CLI's tables and the calibration all take these figures
// from here. Bytes throughout; inline, no allocation: the search's inner loop runs through it.
#pragma once

#include <algorithm>
#include <cstdint>

#include "layout.hpp"

namespace headroom {

// Returns whether `headroom` bytes left on a GPU of `capacity` bytes are too few to trust: under 5% of
// the capacity (capacity / 20, integer bytes).
constexpr bool is_tight(std::int64_t headroom, std::int64_t capacity) {
  return headroom < capacity / 20;
}

// Returns whether a stage whose decisive total is `decisive` bytes fits a GPU of `capacity` bytes.
constexpr bool fits_in(std::int64_t decisive, std::int64_t capacity) {
  return decisive <= capacity;
}

// Returns whether a stage's decisive total on device `d` never falls as its activations grow, its other terms
// the same: the reserve is fixed, or its fragmentation and activation terms are not negative. Where it
// holds, a stage that keeps at least another's activations, all else equal, is at least as full
// (for_each_worst_candidate, estimate.hpp).
inline bool total_grows_with_activations(const device_spec& d) {
  return d.reserve.fixed_only() || (d.reserve.fragmentation >= 0 && d.reserve.activation_extra >= 0);
}

// One stage's rank: the terms the analytic model adds up (estimate.hpp derives each), in bytes. The reference
// total leaves the library workspaces to the reserve; the step peak counts them.
struct stage_terms {
  std::int64_t persistent = 0;    // params + grads + master + optimizer kept on the GPU
  std::int64_t transient = 0;     // ZeRO-3: unsharded layers gathered in flight
  std::int64_t activations = 0;   // layer and embedding activations alive at once
  std::int64_t working_set = 0;   // one layer's backward working set
  std::int64_t output_phase = 0;  // last stage: the loss's tensors; 0 on the others
  std::int64_t workspaces = 0;    // library workspaces in the allocator (device_spec::allocator_workspaces)

  // Returns the state, bytes: persistent + transient (the reference case's "state" column).
  constexpr std::int64_t state() const { return persistent + transient; }
  // Returns what the step holds throughout, bytes: persistent + transient + activations.
  constexpr std::int64_t held() const { return state() + activations; }
  // Returns what the step peak adds to held(), bytes: max(working set, output phase).
  constexpr std::int64_t peak_extra() const { return std::max(working_set, output_phase); }
  // Returns the churning bytes the reserve's fragmentation term grows with: transient + activations +
  // max(working set, output phase).
  constexpr std::int64_t churn() const { return transient + activations + peak_extra(); }
  // Returns the step peak, bytes: library workspaces + persistent + transient + activations + max(working
  // set, output phase): what the allocator has handed out at the step's peak (max_memory_allocated).
  constexpr std::int64_t step_peak() const { return workspaces + held() + peak_extra(); }
  // Returns the reserve on device `d` for a micro-batch of `tokens` tokens on this rank, bytes
  // (reserve.hpp).
  std::int64_t reserve(const device_spec& d, std::int64_t tokens) const {
    return d.reserve.bytes(churn(), tokens, activations);
  }
  // Returns the reference total, bytes: state + activations + reserve.
  std::int64_t total(const device_spec& d, std::int64_t tokens) const { return held() + reserve(d, tokens); }
  // Returns the step peak plus what lies outside the allocator (context, cuBLAS, NCCL), bytes.
  std::int64_t peak_total(const device_spec& d) const { return step_peak() + d.fixed_overheads; }
  // Returns the total that decides, bytes: the larger of total() and peak_total().
  std::int64_t decisive_total(const device_spec& d, std::int64_t tokens) const {
    return std::max(total(d, tokens), peak_total(d));
  }
};

// The verdict on one stage, every figure in bytes.
struct stage_verdict {
  std::int64_t step_peak = 0;   // stage_terms::step_peak()
  std::int64_t peak_total = 0;  // step peak + fixed overheads
  std::int64_t reserve = 0;
  std::int64_t total = 0;     // state + activations + reserve: the reference total
  std::int64_t decisive = 0;  // the larger of total and peak_total
  std::int64_t headroom = 0;  // capacity - decisive (negative when it does not fit)
  bool fits = false;          // decisive <= capacity
  bool tight = false;         // fits with under 5% of the capacity left (is_tight)
};

// Returns the verdict on terms `t` on device `d`, for a micro-batch of `tokens` tokens on the rank.
inline stage_verdict judge(const stage_terms& t, const device_spec& d, std::int64_t tokens) {
  stage_verdict v;
  v.step_peak = t.step_peak();
  v.peak_total = t.peak_total(d);
  v.reserve = t.reserve(d, tokens);
  v.total = t.held() + v.reserve;
  v.decisive = std::max(v.total, v.peak_total);
  v.headroom = d.capacity - v.decisive;
  v.fits = fits_in(v.decisive, d.capacity);
  v.tight = v.fits && is_tight(v.headroom, d.capacity);
  return v;
}

}  // namespace headroom
