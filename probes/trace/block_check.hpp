// block_check.hpp: what a probe does to each block it is handed, so that "allocated" means "really backed
// by device memory": fill it with a pattern derived from its tensor when it is allocated, verify the
// pattern just before it is freed. The CUDA backend launches kernels (kernels/pattern.cu); tests plant
// mismatches through a fake. The sim backend has no bytes to touch and uses none.
#pragma once

#include <cstdint>
#include <optional>

namespace headroom::probes {

// What the checks of one replay found. Counts are of blocks and bytes touched.
struct verification {
  std::int64_t blocks_filled = 0, blocks_verified = 0;
  std::int64_t bytes_filled = 0, bytes_verified = 0;
  std::int64_t mismatched_words = 0;           // 8-byte words that did not hold their pattern
  std::optional<std::int32_t> first_mismatch;  // the trace tensor whose block first failed
  bool ok() const { return mismatched_words == 0; }
};

class block_checker {
 public:
  virtual ~block_checker() = default;
  // Fills the first `bytes` of the block at `address` with the pattern of trace tensor `tensor`.
  virtual void on_alloc(std::int32_t tensor, std::uint64_t address, std::int64_t bytes) = 0;
  // Verifies that block before it goes back to the allocator.
  virtual void on_free(std::int32_t tensor, std::uint64_t address, std::int64_t bytes) = 0;
  // Waits for every check enqueued so far and returns the tally since construction.
  virtual verification finish() = 0;
};

// Returns the pattern seed of a trace tensor: distinct tensors get unrelated patterns, so a block that
// still holds a neighbour's bytes (a reuse the allocator got wrong) fails verification.
inline std::uint64_t pattern_seed(std::int32_t tensor) {
  return 0x6a09e667f3bcc909ULL ^
         (static_cast<std::uint64_t>(static_cast<std::uint32_t>(tensor)) * 0x9e3779b97f4a7c15ULL);
}

}  // namespace headroom::probes
