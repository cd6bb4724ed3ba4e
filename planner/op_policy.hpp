// op_policy.hpp: the matmuls torchtitan's per-op activation-checkpointing policy counts in one transformer block,
// in the order it sees them (standard or multi-latent attention, then the dense MLP or a MoE's shared experts):
// the ledger prices the outputs it keeps (ledger.cpp, op_policy_entries; docs/model.md section 4) and the cost
// model the FLOPs it repeats (cost_model.cpp, op_policy_recompute).
#pragma once

#include <cstdint>
#include <vector>

#include "ledger.hpp"
#include "model_spec.hpp"

namespace headroom {

// One matmul torchtitan's per-op policy counts: the name and formula of its output, its output width on this
// rank, the ledger tensor that output is (nullptr when none) and its input width on this rank (the cost model's
// FLOPs, 2 x input x width per token: cost_model.cpp).
struct op_matmul {
  const char* name;
  const char* formula;
  std::int64_t width;
  const char* ledger_name;
  std::int64_t input;
};

// The counted matmuls of one block, in order, and where the attention core and v sit among them.
struct op_block {
  std::vector<op_matmul> mms;
  std::size_t attention_mms = 0;  // the attention's matmuls come first; the core runs before the last of them
  std::size_t v_base = 2;         // the matmul whose output v is a view of: wv, or MLA's wkv_b
  const char* core_formula = "*s*b*a*d/t";
  std::int64_t core_width = 0;
};

// Returns the block's counted matmuls in the order torchtitan's blocks run them (model.py: wq, wk, wv, wo; then
// w1, w3, w2 as in w2(silu(w1(x)) * w3(x)); a GeLU MLP's fc1, fc2; a MoE's shared w1, w3, w2). Under tensor
// parallelism the row-parallel wo and w2 return partial sums over the whole hidden size before their
// reduce-scatter; the MoE's input is all-gathered first (llama4/infra/parallelize.py l.451-459), so the shared
// experts see every token of the rank's tp group. Every output has one row per token of the cp rank (s*b): the
// attention's input is all-gathered under tp too.
op_block op_policy_matmuls(const model_spec& m, const ledger_shape& s, bool moe_layer);

}  // namespace headroom
