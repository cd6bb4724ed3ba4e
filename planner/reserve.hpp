// reserve.hpp: the reserve, the one home of the term the reference case leaves as "a fudge factor:
// calibrate it against one real run" (docs/reference-case.md). Three named, physical terms:
//
//   fixed          bytes outside the model's tensors whatever the layout: CUDA context, library
//                  workspaces, NCCL buffers, the allocator's standing slack;
//   fragmentation  bytes per byte that churns during the step (transient + activations + the larger of
//                  the backward working set and the output phase): what the caching allocator holds
//                  beyond what is live, and the transient peaks the reference total leaves to the reserve;
//   per_token      bytes per token of one micro-batch on a rank: output-phase copies the ledger does not
//                  hold.
//   activations    bytes per byte of the ledger's activations beyond them (a fitted activation factor less
//                  one): what a model implementation saves that the ledger does not count, or the reverse
//                  (negative), extrapolated from runs of the same implementation at other sizes.
//
// The uncalibrated default is 10 GiB, fixed, with the other terms 0, so every reference figure holds;
// `headroom calibrate` fits the three from measurements and `--calibration FILE` brings them back.
#pragma once

#include <cstdint>
#include <string>

#include "units.hpp"

namespace headroom {

struct reserve_model {
  std::int64_t fixed = 10 * gib;  // bytes
  double fragmentation = 0;       // bytes per churning byte
  double per_token = 0;           // bytes per token (seq / cp x micro-batch)
  double activation_extra = 0;    // bytes per byte of the ledger's activations (factor - 1; may be < 0)
  std::string source = "the default reserve (uncalibrated)";

  // Returns whether only the fixed term is in use (the reserve is the same for every layout).
  bool fixed_only() const { return fragmentation == 0 && per_token == 0 && activation_extra == 0; }
  // Returns the reserve of a stage whose churning bytes are `churn`, whose activations are `activations`
  // bytes and whose micro-batch holds `tokens` tokens on this rank, in bytes (rounded down).
  std::int64_t bytes(std::int64_t churn, std::int64_t tokens, std::int64_t activations) const {
    if (fixed_only()) return fixed;
    return fixed + static_cast<std::int64_t>(fragmentation * static_cast<double>(churn) +
                                             per_token * static_cast<double>(tokens) +
                                             activation_extra * static_cast<double>(activations));
  }
};

}  // namespace headroom
