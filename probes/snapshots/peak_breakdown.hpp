// peak_breakdown.hpp: the blocks alive at a device's requested peak, grouped by call site, and split by the
// phase that allocated them (forward, backward, optimizer) and by kind (parameters, gradients, optimizer
// state, activations, workspace and other). A snapshot records neither phase nor kind: both are inferred
// from each allocation's stack frames and from the blocks' lifetimes, by the rules below (docs/snapshots.md,
// "Phases and kinds"), and are "unknown" where those rules cannot tell.
//
// Phase of an allocation, from its frames (the first that applies):
//   backward  - autograd's engine runs it (a C++ frame torch::autograd::Engine::..., or a generated
//               ...Backward node), or Python's backward / autograd.grad called it;
//   optimizer - a Python frame in an optimizer's code (a folder named optim, optimizer or optimizers, or a
//               file whose name holds "optim": torch/optim/, Megatron's optimizer/);
//   forward   - a Python frame named forward, or nn.Module's call (_call_impl);
//   else, by event order: the phase of the allocations around it when the last one before it and the next
//   one after it that have such a frame are of one phase; otherwise unknown (the data loading, a loss outside
//   any forward, the model's construction, a trace recorded without frames).
// Kind of a block alive at the peak (the first rule that applies):
//   unknown         - alive before recording began (no alloc event, no frames);
//   workspace/other - a library workspace (a C++ frame holding "Workspace": cuBLAS's);
//   gradients       - written by autograd's AccumulateGrad;
//   optimizer state - allocated in the optimizer and alive after that optimizer phase ended (the next
//                     allocation of another phase); an optimizer that writes new parameter tensors instead of
//                     updating them in place has those counted here too; freed inside it: workspace/other;
//   gradients       - allocated in backward and alive after that backward ended; freed inside it (activation
//                     gradients, temporaries): workspace/other;
//   activations     - allocated in forward (saved for backward, or the forward's own temporaries);
//   parameters      - allocated outside any phase under a module's construction or move (a frame named
//                     __init__ or reset_parameters, or nn.Module's _apply): parameters and buffers;
//   unknown         - anything else (the data, a loss outside any forward, what no frame tells).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "probes/snapshots/snapshot.hpp"

namespace headroom::probes {

enum class snap_phase : std::uint8_t { unknown, forward, backward, optimizer };
inline constexpr std::size_t snap_phases = 4;
// Returns "unknown", "forward", "backward" or "optimizer".
const char* to_string(snap_phase p);

enum class snap_kind : std::uint8_t { unknown, parameters, gradients, optimizer_state, activations, other };
inline constexpr std::size_t snap_kinds = 6;
// Returns "unknown", "parameters", "gradients", "optimizer state", "activations" or "workspace/other".
const char* to_string(snap_kind k);

// The blocks of one call site alive at the peak: the site is the allocation's top user frame (frames.hpp),
// else its autograd node ("MulBackward0 (autograd, C++)"), else "(no Python frames)" or "(no frames recorded)".
struct snap_site {
  std::string site;
  std::size_t blocks = 0;
  std::int64_t bytes = 0, largest = 0;  // requested bytes: all the site's blocks, its largest one
};

struct snap_live_at_peak {
  std::uint64_t addr = 0;
  std::int64_t size = 0;              // requested bytes
  std::uint32_t frames = UINT32_MAX;  // the alloc's frames list (document node), when recorded
  bool before = false;                // alive before recording began
  std::size_t site = 0;               // index into snap_peak_breakdown::sites
};

struct snap_peak_breakdown {
  std::vector<snap_site> sites;                      // every call site alive at the peak, largest total first
  std::vector<snap_live_at_peak> blocks;             // every block alive at the peak
  std::array<std::int64_t, snap_phases> by_phase{};  // requested bytes per snap_phase
  std::array<std::int64_t, snap_kinds> by_kind{};    // requested bytes per snap_kind
  std::int64_t total = 0;                       // requested bytes alive at the peak: the sum of each split
  snap_phase peak_phase = snap_phase::unknown;  // the phase of the allocation that made the peak
  std::string peak_phase_how;                   // how that phase was told, or why it was not
  bool frames_recorded = false;                 // some allocation of the trace carries frames
};

// Returns the breakdown of the blocks alive after event `peak_event` of `device` (before any event when
// `at_start`: the blocks alive before recording, `before`, address -> requested bytes).
snap_peak_breakdown peak_breakdown(const torch_snapshot& s, int device,
                                   const std::map<std::uint64_t, std::int64_t>& before,
                                   std::size_t peak_event, bool at_start);

}  // namespace headroom::probes
