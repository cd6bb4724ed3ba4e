// step_trace.hpp: one training step on one rank as an ordered list of tensor events, built from the
// planner's ledger. The probes replay it through an allocator over a device; the identity
//   peak live bytes = library workspaces + persistent + transient + activations + max(backward working set,
//                     output phase)
// ties it to the planner (stage_breakdown::step_peak) and is tested over presets and layouts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/estimate.hpp"
#include "planner/layout.hpp"

namespace headroom::probes {

enum class phase : std::uint8_t { state, forward, output, backward, optimizer };
// empty_cache: torch.cuda.empty_cache() (or the real allocator freeing segments outside an allocation's
// retry, in an imported snapshot); its tensor is -1.
enum class event_kind : std::uint8_t { alloc, free, empty_cache };

struct trace_tensor {
  std::string name;  // "mb0.layer95.attn.softmax.output"
  std::vector<std::int64_t> shape;
  std::int64_t dtype_bytes = 2;
  std::int64_t bytes = 0;
};

struct trace_event {
  event_kind kind = event_kind::alloc;
  phase when = phase::state;
  std::int32_t tensor = 0;  // index into step_trace::tensors
  std::int32_t stream = 0;  // CUDA stream the event ran on (blocks are reused only on their stream)
};

struct step_trace {
  std::string model;
  std::string layout_text;  // "ZeRO-3, selective, tp=1 pp=1 dp=32"
  int stage = 0;
  int stages = 1;
  std::int64_t microbatches_per_step = 1;
  std::int64_t microbatches_traced = 1;  // enough for 1F1B to reach its steady state
  std::vector<trace_tensor> tensors;
  std::vector<trace_event> events;
  std::optional<std::int64_t> capacity;  // bytes of the device the trace was recorded on, when known
};

// Builds the trace of `stage` of layout `l` (Megatron's 1F1B, interleaved when vpp > 1), dense or
// mixture-of-experts, with DeepSpeed's buckets when the layout has them. Throws bad_input for what estimate()
// rejects, for FSDP without resharding after forward, or for a stage out of range.
step_trace build_trace(const problem& p, const layout& l, int stage);

// Returns the layout text a trace of `l` carries ("ZeRO-3, recompute selective, tp=1 pp=1 dp=32").
std::string trace_layout_text(const layout& l);

// Returns the largest sum of live tensor bytes over the trace and the index of the event that reached it.
struct live_peak {
  std::int64_t bytes = 0;
  std::size_t event = 0;
};
live_peak trace_peak(const step_trace& t);

const char* to_string(phase p);
const char* to_string(event_kind k);

}  // namespace headroom::probes
