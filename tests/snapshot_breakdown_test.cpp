// snapshot_breakdown_test.cpp: how a snapshot's events are counted (replayed by `probe snapshot` or not, the
// same in the summary and the conversion), and the blocks alive at the requested peak by call site, phase
// and kind (probes/snapshots/peak_breakdown.hpp): on a hand-written training step whose answer is worked out
// below by hand, and on the real snapshots against figures known without headroom (the CS336 model's
// parameter count from its configuration, PyTorch's default cuBLAS workspace, counts made with Python's
// pickle).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "probes/snapshots/convert.hpp"
#include "probes/snapshots/summary.hpp"
#include "test_support.hpp"

namespace headroom::probes {
namespace {

const std::string bd_fwd100 = data + "/snapshots/NiuHuangxiaozi__forward_memory_snapshot_100.pickle";
const std::string bd_shared = data + "/../../../shared/data/snapshots/";

// The CS336 model of docs/snapshots.md (vocabulary 10000, d_model 512, 4 layers, d_ff 1344, no biases):
// embedding and output 2 x 10000 x 512, per layer 4 x 512^2 (attention) + 3 x 512 x 1344 (SwiGLU) + 2 x 512
// (RMSNorm), a final RMSNorm of 512: 22,696,448 parameters, fp32.
constexpr std::int64_t bd_cs336_parameter_bytes =
    4 * (2 * 10000 * 512 + 4 * (4 * 512 * 512 + 3 * 512 * 1344 + 2 * 512) + 512);

int bd_kind(snap_kind k) {
  return static_cast<int>(k);
}
int bd_phase(snap_phase p) {
  return static_cast<int>(p);
}

// One training step written by hand: a parameter built in a module's __init__, the data, forward (one
// allocation told only by the forward allocations around it, one cuBLAS workspace), a loss outside any
// forward, backward (a gradient through AccumulateGrad, one stolen from an autograd node and kept, a
// temporary freed inside it), then AdamW's two moments and a temporary freed inside the step. Addresses lie
// in one 64 MiB segment; sizes are whole MiB. With `frames` false no event carries frames.
std::string bd_training_step_json(bool frames) {
  const std::int64_t M = mib, base = 0x40000000;
  const auto py = [](const char* name, const char* file, int line) {
    return nlohmann::json{{"name", name}, {"filename", file}, {"line", line}};
  };
  const auto cpp = [](const char* name) {
    return nlohmann::json{{"name", name}, {"filename", "??"}, {"line", 0}};
  };
  const nlohmann::json engine = cpp("torch::autograd::Engine::evaluate_function(...)");
  const std::map<std::string, nlohmann::json> stacks = {
      {"init", nlohmann::json::array({py("__init__", "/home/u/model.py", 10)})},
      {"data", nlohmann::json::array({py("load", "/home/u/train.py", 3)})},
      {"fwd", nlohmann::json::array({py("forward", "/home/u/model.py", 20)})},
      {"helper", nlohmann::json::array({py("helper", "/home/u/util.py", 7)})},
      {"ws",
       nlohmann::json::array({cpp("at::cuda::getNewWorkspace()"), py("forward", "/home/u/model.py", 20)})},
      {"loss", nlohmann::json::array({py("loss_fn", "/home/u/train.py", 5)})},
      {"acc", nlohmann::json::array({cpp("torch::autograd::AccumulateGrad::apply(...)"), engine})},
      {"node", nlohmann::json::array({cpp("torch::autograd::generated::MulBackward0::apply(...)"), engine})},
      {"opt",
       nlohmann::json::array({py("step", "/usr/lib/python3/site-packages/torch/optim/adamw.py", 100)})}};
  nlohmann::json events = nlohmann::json::array(), blocks = nlohmann::json::array();
  std::map<std::int64_t, std::int64_t> alive;  // offset (MiB) -> size (MiB)
  const auto ev = [&](const char* action, std::int64_t at, std::int64_t size, const char* stack) {
    nlohmann::json e = {
        {"action", action}, {"addr", base + at * M}, {"size", size * M}, {"stream", 0}, {"time_us", 0}};
    if (frames && stack) e["frames"] = stacks.at(stack);
    events.push_back(e);
  };
  const auto alloc = [&](std::int64_t at, std::int64_t size, const char* stack) {
    ev("alloc", at, size, stack);
    alive[at] = size;
  };
  const auto release = [&](std::int64_t at) {
    ev("free_requested", at, alive.at(at), nullptr);
    ev("free_completed", at, alive.at(at), nullptr);
    alive.erase(at);
  };
  ev("segment_alloc", 0, 64, nullptr);
  alloc(0, 4, "init");    // parameters
  alloc(4, 1, "data");    // unknown: no phase, no construction
  alloc(5, 2, "fwd");     // an activation freed in backward
  alloc(7, 1, "helper");  // forward by the allocations around it; kept
  alloc(8, 1, "ws");      // a workspace, in forward
  alloc(9, 1, "fwd");     // an activation kept
  alloc(10, 1, "loss");   // unknown: between forward and backward
  alloc(11, 4, "acc");    // a gradient
  alloc(15, 2, "node");   // a temporary of backward
  release(15);
  release(5);
  alloc(16, 1, "node");  // a gradient by its lifetime: alive after backward ended
  alloc(20, 4, "opt");   // AdamW's moments
  alloc(24, 4, "opt");
  alloc(28, 2, "opt");  // the peak: 24 MiB alive; a temporary of the step
  release(28);
  std::int64_t held = 0;
  for (const auto& [at, size] : alive) {
    blocks.push_back({{"address", base + at * M},
                      {"size", size * M},
                      {"requested_size", size * M},
                      {"state", "active_allocated"}});
    held += size * M;
  }
  const nlohmann::json seg = {{"device", 0},
                              {"address", base},
                              {"total_size", 64 * M},
                              {"allocated_size", held},
                              {"requested_size", held},
                              {"stream", 0},
                              {"segment_type", "large"},
                              {"blocks", blocks}};
  return nlohmann::json{
      {"segments", {seg}},
      {"device_traces", {events}},
      {"allocator_settings",
       {{"PYTORCH_CUDA_ALLOC_CONF", ""}, {"max_split_size", -1}, {"expandable_segments", false}}}}
      .dump();
}

// The tally of the hand-written step: 13 allocs, 3 frees ending a life, 3 free_requested before them, one
// segment_alloc: 20 events, 16 replayed; the conversion replays exactly those.
TEST(SnapshotBreakdown, HandWrittenStepIsCountedAlikeByBothWalks) {
  const auto s = parse_snapshot(bd_training_step_json(true), "step.json");
  const auto d = summarise(s).devices.at(0);
  EXPECT_EQ(d.tally.events, 20u);
  EXPECT_EQ(d.tally.allocs, 13u);
  EXPECT_EQ(d.tally.frees, 3u);
  EXPECT_EQ(d.tally.requests, 3u);
  EXPECT_EQ(d.tally.segment_events, 1u);
  EXPECT_EQ(d.tally.replayed(), 16u);
  EXPECT_EQ(d.tally.not_replayed(), 4u);
  const auto t = snapshot_to_trace(s, 0);
  EXPECT_EQ(t.tally, d.tally);
  EXPECT_EQ(t.trace.events.size(), 16u);
}

// The split of the 24 MiB alive at the peak, worked out by hand from the rules (peak_breakdown.hpp).
TEST(SnapshotBreakdown, HandWrittenStepSplitsByPhaseKindAndSite) {
  const std::int64_t M = mib;
  const auto s = parse_snapshot(bd_training_step_json(true), "step.json");
  const auto d = summarise(s).devices.at(0);
  const auto& b = d.at_peak;
  EXPECT_EQ(d.peak_requested, 24 * M);
  EXPECT_EQ(b.total, 24 * M);
  EXPECT_EQ(b.blocks.size(), 11u);
  EXPECT_TRUE(b.frames_recorded);
  EXPECT_EQ(b.peak_phase, snap_phase::optimizer);
  // Phase: the parameter, the data and the loss unknown; helper, workspace and the kept activation forward.
  EXPECT_EQ(b.by_phase[bd_phase(snap_phase::unknown)], 6 * M);
  EXPECT_EQ(b.by_phase[bd_phase(snap_phase::forward)], 3 * M);
  EXPECT_EQ(b.by_phase[bd_phase(snap_phase::backward)], 5 * M);
  EXPECT_EQ(b.by_phase[bd_phase(snap_phase::optimizer)], 10 * M);
  EXPECT_EQ(b.by_kind[bd_kind(snap_kind::parameters)], 4 * M);
  EXPECT_EQ(b.by_kind[bd_kind(snap_kind::gradients)], 5 * M);
  EXPECT_EQ(b.by_kind[bd_kind(snap_kind::optimizer_state)], 8 * M);
  EXPECT_EQ(b.by_kind[bd_kind(snap_kind::activations)], 2 * M);
  EXPECT_EQ(b.by_kind[bd_kind(snap_kind::other)], 3 * M);  // the workspace and the step's temporary
  EXPECT_EQ(b.by_kind[bd_kind(snap_kind::unknown)], 2 * M);
  // Sites: the step's three blocks grouped first; the autograd nodes named where no Python frame is.
  ASSERT_EQ(b.sites.size(), 8u);
  EXPECT_EQ(b.sites[0].site, "step (adamw.py:100)");
  EXPECT_EQ(b.sites[0].blocks, 3u);
  EXPECT_EQ(b.sites[0].bytes, 10 * M);
  EXPECT_EQ(b.sites[0].largest, 4 * M);
  EXPECT_EQ(b.sites[1].site, "AccumulateGrad (autograd, C++)");
  EXPECT_EQ(b.sites[2].site, "__init__ (model.py:10)");
  EXPECT_EQ(b.sites[3].site, "forward (model.py:20)");
  EXPECT_EQ(b.sites[3].blocks, 2u);  // the workspace and the kept activation
  std::int64_t sum = 0;
  for (const auto& x : b.sites) sum += x.bytes;
  EXPECT_EQ(sum, 24 * M);
  EXPECT_EQ(d.largest_at_peak.front().size, 4 * M);
}

// Without frames nothing can be told: every byte is unknown, and it says why.
TEST(SnapshotBreakdown, NoFramesIsUnknownAndSaysSo) {
  const auto s = parse_snapshot(bd_training_step_json(false), "step.json");
  const auto sum = summarise(s);
  const auto& b = sum.devices.at(0).at_peak;
  EXPECT_FALSE(b.frames_recorded);
  EXPECT_EQ(b.peak_phase, snap_phase::unknown);
  EXPECT_FALSE(b.peak_phase_how.empty());
  EXPECT_EQ(b.by_phase[bd_phase(snap_phase::unknown)], b.total);
  EXPECT_EQ(b.by_kind[bd_kind(snap_kind::unknown)], b.total);
  ASSERT_EQ(b.sites.size(), 1u);
  EXPECT_EQ(b.sites[0].site, "(no frames recorded)");
}

// Every real snapshot: each event counted once, the summary and the conversion agree, the conversion's
// trace holds the replayed events after the warm start's allocs, and every split sums to the peak.
TEST(SnapshotBreakdown, RealSnapshotsCountsAddUpAndSplitsSumToThePeak) {
  std::vector<std::string> files = {bd_fwd100};
  for (const char* f : {"NiuHuangxiaozi__forward_and_backward_memory_snapshot_100.pickle",
                        "NiuHuangxiaozi__forward_and_backward_memory_snapshot_200_mixed_precision.pickle",
                        "Wedsonlin__medium_128_training_memory_snapshot.pickle",
                        "sidsoc12__mem_snapshot_ctx128_fp32_train.pickle"})
    if (std::ifstream(bd_shared + f)) files.push_back(bd_shared + f);
  for (const auto& f : files) {
    const auto s = load_snapshot(f);
    const auto d = summarise(s).devices.at(0);
    const auto t = snapshot_to_trace(s, 0);
    EXPECT_EQ(t.tally, d.tally) << f;
    EXPECT_EQ(d.tally.events, d.events) << f;
    EXPECT_EQ(d.tally.replayed() + d.tally.not_replayed(), d.events) << f;
    EXPECT_EQ(d.tally.allocs, d.counts.at("alloc")) << f;
    EXPECT_EQ(t.trace.events.size(), t.leading_allocs + t.tally.replayed()) << f;
    const auto& b = d.at_peak;
    EXPECT_EQ(b.total, d.peak_requested) << f;
    std::int64_t phases = 0, kinds = 0, sites = 0;
    for (auto x : b.by_phase) phases += x;
    for (auto x : b.by_kind) kinds += x;
    for (const auto& x : b.sites) sites += x.bytes;
    EXPECT_EQ(phases, b.total) << f;
    EXPECT_EQ(kinds, b.total) << f;
    EXPECT_EQ(sites, b.total) << f;
  }
  if (files.size() == 1)
    GTEST_SKIP() << "the shared snapshots are not on this machine; checked " << bd_fwd100;
}

// The figures known without headroom: counts made with Python's pickle, the CS336 model's parameters, the
// cuBLAS workspace PyTorch allocates by default before Hopper (CUBLAS_WORKSPACE_CONFIG ':4096:2:16:8', 2 x
// 4096 KiB + 8 x 16 KiB: aten/src/ATen/cuda/CublasHandlePool.cpp), AdamW's two moments per parameter.
TEST(SnapshotBreakdown, RealSnapshotsAgreeWithFiguresKnownWithoutHeadroom) {
  const auto s = load_snapshot(bd_fwd100);
  const auto d = summarise(s).devices.at(0);
  // Python: 785 alloc, 744 free_completed, 744 free_requested, 31 segment_alloc.
  EXPECT_EQ(d.tally.replayed(), 785u + 744u);
  EXPECT_EQ(d.tally.not_replayed(), 744u + 31u);
  EXPECT_EQ(d.at_peak.peak_phase, snap_phase::forward);
  EXPECT_EQ(d.at_peak.by_kind[bd_kind(snap_kind::parameters)], bd_cs336_parameter_bytes);
  EXPECT_EQ(d.at_peak.by_kind[bd_kind(snap_kind::other)], 2 * 4 * mib + 8 * 16 * 1024);
  const std::string fb200 =
      bd_shared + "NiuHuangxiaozi__forward_and_backward_memory_snapshot_200_mixed_precision.pickle";
  if (!std::ifstream(fb200)) GTEST_SKIP() << fb200 << " is not on this machine (the shared data folder)";
  const auto s2 = load_snapshot(fb200);
  const auto d2 = summarise(s2).devices.at(0);
  // Python: 4404 alloc, 4242 free_completed, 4242 free_requested, 88 segment_alloc.
  EXPECT_EQ(d2.tally.events, 12976u);
  EXPECT_EQ(d2.tally.replayed(), 8646u);
  EXPECT_EQ(d2.tally.requests + d2.tally.segment_events, 4330u);
  // The peak lies in the first step's backward: the parameters of the model's construction, and the two
  // moments the optimizer's __init__ made (cs336_basics/optimizer/optimizer.py:27-28), are all alive.
  EXPECT_EQ(d2.at_peak.peak_phase, snap_phase::backward);
  EXPECT_EQ(d2.at_peak.by_kind[bd_kind(snap_kind::parameters)], bd_cs336_parameter_bytes);
  EXPECT_EQ(d2.at_peak.by_kind[bd_kind(snap_kind::optimizer_state)], 2 * bd_cs336_parameter_bytes);
}

}  // namespace
}  // namespace headroom::probes
