// peak_breakdown.cpp: the blocks alive at the requested peak by call site, phase and kind (peak_breakdown.hpp):
// one walk over the device's events classifies each allocation's frames (each distinct frame once), keeps
// the runs of allocations whose frames tell one phase, copies the live set at the peak, and then notes when
// each of those blocks is freed.
#include "probes/snapshots/peak_breakdown.hpp"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "probes/snapshots/address_map.hpp"
#include "probes/snapshots/frames.hpp"
#include "probes/snapshots/window.hpp"

namespace headroom::probes {

const char* to_string(snap_phase p) {
  switch (p) {
    case snap_phase::forward:
      return "forward";
    case snap_phase::backward:
      return "backward";
    case snap_phase::optimizer:
      return "optimizer";
    case snap_phase::unknown:
      break;
  }
  return "unknown";
}

const char* to_string(snap_kind k) {
  switch (k) {
    case snap_kind::parameters:
      return "parameters";
    case snap_kind::gradients:
      return "gradients";
    case snap_kind::optimizer_state:
      return "optimizer state";
    case snap_kind::activations:
      return "activations";
    case snap_kind::other:
      return "workspace/other";
    case snap_kind::unknown:
      break;
  }
  return "unknown";
}

namespace {

using namespace snapshot_window;

// What one frame says (the rules of peak_breakdown.hpp), as bits.
enum : std::uint8_t {
  says_backward = 1,
  says_optimizer = 2,
  says_forward = 4,
  says_grad = 8,
  says_workspace = 16,
  says_init = 32,
  not_classified = 128
};

bool has(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}
bool ends(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// A folder named optim, optimizer or optimizers on the path, or "optim" in the file's own name.
bool optimizer_file(std::string_view file) {
  const auto slash = file.rfind('/');
  if (has(slash == std::string_view::npos ? file : file.substr(slash + 1), "optim")) return true;
  for (std::string_view d : {"/optim/", "/optimizer/", "/optimizers/"})
    if (has(file, d)) return true;
  return file.rfind("optim/", 0) == 0 || file.rfind("optimizer/", 0) == 0;
}

// Classifies each frame dict once (a trace shares a few thousand among all its events).
class frame_flags {
 public:
  explicit frame_flags(const pdoc& d)
      : m_doc(d), m_flags(d.nodes.size(), not_classified), m_lists(d.nodes.size(), not_classified) {}
  // Returns the bits of every frame of list `frames` (0 when none is recorded). Each list is walked once: a
  // trace may share one list of 300,000 frames among 100,000 allocations (tests/cli_readers_test.cpp).
  std::uint8_t of_list(std::uint32_t frames) {
    if (frames >= m_doc.nodes.size()) return 0;
    if (m_lists[frames] != not_classified) return m_lists[frames];
    std::uint8_t f = 0;
    for (std::uint32_t k : m_doc.at(frames).kids) {
      if (k >= m_flags.size()) continue;
      if (m_flags[k] == not_classified) m_flags[k] = classify(k);
      f |= m_flags[k];
    }
    return m_lists[frames] = f;
  }
  // Returns "MulBackward0 (autograd, C++)" for the first autograd node of list `frames` (a generated
  // ...Backward node, or AccumulateGrad), or "". Each list is walked once.
  std::string autograd_node(std::uint32_t frames) {
    if (frames >= m_doc.nodes.size()) return "";
    if (const auto it = m_nodes.find(frames); it != m_nodes.end()) return it->second;
    return m_nodes[frames] = first_autograd_node(frames);
  }

 private:
  std::string first_autograd_node(std::uint32_t frames) const {
    for (std::uint32_t k : m_doc.at(frames).kids) {
      const auto name = text(k, "name");
      if (has(name, "torch::autograd::AccumulateGrad")) return "AccumulateGrad (autograd, C++)";
      const auto at = name.find("autograd::generated::");
      if (at == std::string_view::npos || !has(name, "Backward")) continue;
      std::string_view node = name.substr(at + 21);
      node = node.substr(0, std::min({node.find("::"), node.find("_apply"), node.find('(')}));
      if (!node.empty()) return std::string(node) + " (autograd, C++)";
    }
    return "";
  }

  std::string_view text(std::uint32_t f, const char* key) const {
    if (m_doc.at(f).k != pnode::kind::dict) return {};
    const auto v = m_doc.get(f, key);
    const auto s = v ? m_doc.string(*v) : std::nullopt;
    return s ? *s : std::string_view{};
  }
  std::uint8_t classify(std::uint32_t f) const {
    const std::string_view name = text(f, "name"), file = text(f, "filename");
    std::uint8_t r = 0;
    if (has(name, "torch::autograd::Engine::") ||
        (has(name, "autograd::generated::") && has(name, "Backward")))
      r |= says_backward;
    if (has(name, "AccumulateGrad") || has(name, "accumulateGrad")) r |= says_grad;
    if (has(name, "Workspace")) r |= says_workspace;
    if (!ends(file, ".py")) return r;
    const bool module_py = ends(file, "torch/nn/modules/module.py");
    if ((has(file, "/torch/autograd/") &&
         (name == "backward" || name == "grad" || name == "_make_grads" || name == "_engine_run_backward")) ||
        (ends(file, "torch/_tensor.py") && name == "backward"))
      r |= says_backward;
    if (optimizer_file(file)) r |= says_optimizer;
    if (name == "forward" || (module_py && (name == "_call_impl" || name == "_wrapped_call_impl")))
      r |= says_forward;
    if (name == "__init__" || name == "reset_parameters" || (module_py && name == "_apply")) r |= says_init;
    return r;
  }
  const pdoc& m_doc;
  std::vector<std::uint8_t> m_flags;                        // per frame dict
  std::vector<std::uint8_t> m_lists;                        // per frames list: its frames' bits together
  std::unordered_map<std::uint32_t, std::string> m_nodes;  // per frames list: its autograd node
};

snap_phase phase_of(std::uint8_t bits) {
  if (bits & says_backward) return snap_phase::backward;
  if (bits & says_optimizer) return snap_phase::optimizer;
  if (bits & says_forward) return snap_phase::forward;
  return snap_phase::unknown;
}

// A run of allocations whose frames tell one phase: the first and last such allocation's events.
struct phase_run {
  std::size_t first = 0, last = 0;
  snap_phase phase = snap_phase::unknown;
};

// A block alive during the walk: its requested bytes, frames, alloc event and what its frames said.
struct live_info {
  std::int64_t bytes = 0;
  std::uint32_t frames = UINT32_MAX;
  std::uint32_t event = UINT32_MAX;  // UINT32_MAX: alive before recording
  std::uint8_t bits = 0;
};

// Returns the index of the run holding event `i` (between its first and last allocation), or runs.size().
std::size_t run_holding(const std::vector<phase_run>& runs, std::size_t i) {
  auto it = std::upper_bound(runs.begin(), runs.end(), i,
                             [](std::size_t x, const phase_run& r) { return x < r.first; });
  if (it == runs.begin()) return runs.size();
  --it;
  return it->last >= i ? static_cast<std::size_t>(it - runs.begin()) : runs.size();
}

// The kind of block `b` (peak_breakdown.hpp's rules), given its phase, its run and when it was freed.
snap_kind kind_of(const live_info& b, snap_phase phase, std::size_t run, const std::vector<phase_run>& runs,
                  std::size_t freed_at) {
  if (b.event == UINT32_MAX) return snap_kind::unknown;
  if (b.bits & says_workspace) return snap_kind::other;
  if (b.bits & says_grad) return snap_kind::gradients;
  // Alive after its phase ended: never freed, or freed after the next run (of another phase) began.
  const bool outlives = freed_at == SIZE_MAX || (run + 1 < runs.size() && freed_at > runs[run + 1].first);
  switch (phase) {
    case snap_phase::optimizer:
      return outlives ? snap_kind::optimizer_state : snap_kind::other;
    case snap_phase::backward:
      return outlives ? snap_kind::gradients : snap_kind::other;
    case snap_phase::forward:
      return snap_kind::activations;
    case snap_phase::unknown:
      break;
  }
  return (b.bits & says_init) ? snap_kind::parameters : snap_kind::unknown;
}

// The call site of a live block: its top user frame, else its autograd node, else what was recorded.
std::string site_of(const live_info& b, const pdoc& doc, frame_namer& names, frame_flags& flags) {
  if (b.event == UINT32_MAX) return "(alive before recording)";
  if (const std::string& top = names.top(b.frames); !top.empty()) return top;
  if (std::string node = flags.autograd_node(b.frames); !node.empty()) return node;
  const bool any = b.frames < doc.nodes.size() && !doc.at(b.frames).kids.empty();
  return any ? "(no Python frames)" : "(no frames recorded)";
}

}  // namespace

snap_peak_breakdown peak_breakdown(const torch_snapshot& s, int device,
                                   const std::map<std::uint64_t, std::int64_t>& before,
                                   std::size_t peak_event, bool at_start) {
  const auto& ev = s.devices[static_cast<std::size_t>(device)];
  const bool completions = has_completions(ev);
  frame_flags flags(s.doc);
  snap_peak_breakdown out;
  address_map<live_info> live(before.size());
  for (const auto& [a, b] : before) live.set(a, {b, UINT32_MAX, UINT32_MAX, 0});
  std::vector<phase_run> runs;
  std::vector<std::pair<std::uint64_t, live_info>> peak;  // the live set at the peak
  address_map<std::uint32_t> peak_index;                  // after the peak: address -> index into `peak`
  std::vector<std::size_t> freed_at;
  std::uint8_t peak_bits = 0;
  const auto take_peak = [&] {
    peak.reserve(live.size());
    live.for_each([&](std::uint64_t a, const live_info& b) { peak.push_back({a, b}); });
    std::sort(peak.begin(), peak.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    peak_index = address_map<std::uint32_t>(peak.size());
    for (std::size_t k = 0; k < peak.size(); ++k)
      peak_index.set(peak[k].first, static_cast<std::uint32_t>(k));
    freed_at.assign(peak.size(), SIZE_MAX);
    live = address_map<live_info>();
  };
  bool taken = at_start;
  if (taken) take_peak();
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const auto& e = ev[i];
    if (e.action == snap_action::alloc) {
      const std::uint8_t bits = flags.of_list(e.frames);
      out.frames_recorded |= e.frames < s.doc.nodes.size() && !s.doc.at(e.frames).kids.empty();
      if (const snap_phase p = phase_of(bits); p != snap_phase::unknown) {
        if (runs.empty() || runs.back().phase != p) runs.push_back({i, i, p});
        runs.back().last = i;
      }
      if (!taken) live.set(e.addr, {e.size, e.frames, static_cast<std::uint32_t>(i), bits});
      if (!taken && i == peak_event) peak_bits = bits;
    } else if (ends_life(e, completions)) {
      if (!taken) {
        live.erase(e.addr);
      } else if (const std::uint32_t* k = peak_index.find(e.addr)) {
        freed_at[*k] = i;
        peak_index.erase(e.addr);
      }
    }
    if (!taken && i == peak_event) {
      taken = true;
      take_peak();
    }
  }
  if (!taken) take_peak();  // a peak event past the trace: the live set at its end
  // The phase of the allocation that made the peak.
  if (at_start) {
    out.peak_phase_how = "the peak is where recording began: no allocation of the trace made it";
  } else if (const snap_phase p = phase_of(peak_bits); p != snap_phase::unknown) {
    out.peak_phase = p;
    out.peak_phase_how = "from the frames of the allocation at the peak";
  } else if (const std::size_t r = run_holding(runs, peak_event); r < runs.size()) {
    out.peak_phase = runs[r].phase;
    out.peak_phase_how = "from the allocations around the peak (its own frames tell none)";
  } else {
    out.peak_phase_how = "neither the frames of the allocation at the peak nor those around it tell";
  }
  frame_namer names(s.doc);
  std::unordered_map<std::string, std::size_t> site_index;
  for (std::size_t k = 0; k < peak.size(); ++k) {
    const auto& [addr, b] = peak[k];
    snap_phase phase = b.event == UINT32_MAX ? snap_phase::unknown : phase_of(b.bits);
    std::size_t run = b.event == UINT32_MAX ? runs.size() : run_holding(runs, b.event);
    if (phase == snap_phase::unknown && run < runs.size()) phase = runs[run].phase;
    if (phase == snap_phase::unknown) run = runs.size();
    out.by_phase[static_cast<std::size_t>(phase)] += b.bytes;
    out.by_kind[static_cast<std::size_t>(kind_of(b, phase, run, runs, freed_at[k]))] += b.bytes;
    out.total += b.bytes;
    auto [it, added] = site_index.try_emplace(site_of(b, s.doc, names, flags), out.sites.size());
    if (added) out.sites.push_back({it->first, 0, 0, 0});
    auto& site = out.sites[it->second];
    ++site.blocks;
    site.bytes += b.bytes;
    site.largest = std::max(site.largest, b.bytes);
    out.blocks.push_back({addr, b.bytes, b.frames, b.event == UINT32_MAX, it->second});
  }
  // Largest total first; the blocks follow their sites to the new order.
  std::vector<std::size_t> order(out.sites.size()), rank(out.sites.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    const auto &a = out.sites[x], &b = out.sites[y];
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.site < b.site;
  });
  std::vector<snap_site> sorted;
  sorted.reserve(order.size());
  for (std::size_t k = 0; k < order.size(); ++k) {
    rank[order[k]] = k;
    sorted.push_back(std::move(out.sites[order[k]]));
  }
  out.sites = std::move(sorted);
  for (auto& b : out.blocks) b.site = rank[b.site];
  return out;
}

}  // namespace headroom::probes
