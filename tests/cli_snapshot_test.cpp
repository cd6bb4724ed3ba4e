// cli_snapshot_test.cpp: `headroom snapshot` and `headroom probe snapshot` with a capture sidecar beside the
// snapshot (tools/headroom_capture.py, probes/snapshots/sidecar.hpp), and their one-line answers (the least
// card, the expandable-segments verdict, the comparison after the replay's outcome, the fragmentation), the
// events both commands count, the peak by call site, phase and kind, and the refused --gpu-type, each checked
// against an independent derivation: other replays run through the CLI, the record's figures, Python's counts.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cli_support.hpp"

namespace {

const std::string capsnap_fwd100 = data + "/snapshots/NiuHuangxiaozi__forward_memory_snapshot_100.pickle";
const std::string capsnap_shared = std::string(HEADROOM_SOURCE_DIR) + "/../shared/data/snapshots/";
constexpr std::int64_t capsnap_mib = std::int64_t{1} << 20;

// A sidecar as tools/headroom_capture.py writes it (the fields of its `sidecar` function), for `name`.
nlohmann::json capsnap_sidecar(const std::string& name) {
  return {{"schema", "headroom.capture/1"},
          {"snapshot", name},
          {"captured_utc", {{"start", "2026-12-01T10:00:00Z"}, {"end", "2026-12-01T10:01:00Z"}}},
          {"software", {{"python", "3.12.3"}, {"torch", "2.8.0+cu128"}, {"cuda_runtime", "12.8"}, {"nccl", "2.27.3"}}},
          {"gpu",
           {{"name", "NVIDIA H200"},
            {"total_memory", std::int64_t{143771} * capsnap_mib},  // an H200's, as torch reports it
            {"index", 0},
            {"driver", "570.124.06"},
            {"driver_from", "nvml"}}},
          {"allocator", {{"PYTORCH_CUDA_ALLOC_CONF", ""}, {"max_entries", 1000000}}},
          {"placement", {{"launcher", "torchrun"}, {"rank", 1}, {"local_rank", 1}, {"world_size", 2}, {"variables", {"RANK"}}}},
          {"peaks", {{"max_memory_reserved", 442 * capsnap_mib}, {"max_memory_allocated", 400 * capsnap_mib}}},
          {"at_end", {{"device_used", 1000 * capsnap_mib}, {"device_total", 1}, {"memory_reserved", 442 * capsnap_mib},
                      {"outside_allocator", 558 * capsnap_mib}}},
          {"device_used_at_peak", {{"bytes", 1000 * capsnap_mib}, {"how", "max_memory_reserved + ..."}}},
          {"problem", {{"kind", "megatron_args"}, {"text", "--tp 2"}}},
          {"ended_by", nullptr}};
}

// Copies the small real snapshot into a fresh folder and writes `side` beside it; returns the copy's path.
std::string capsnap_with_sidecar(const std::string& tag, const nlohmann::json& side) {
  const auto dir = std::filesystem::path(::testing::TempDir()) /
                   ("headroom_capsnap_" + std::to_string(::getpid()) + "_" + tag);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto snap = dir / "snapshot.pickle";
  std::filesystem::copy_file(capsnap_fwd100, snap);
  std::ofstream(snap.string() + ".headroom.json") << side.dump(2);
  return snap.string();
}

std::string capsnap_mib_text(std::int64_t bytes) {
  char b[64];
  std::snprintf(b, sizeof b, "%.2f MiB", static_cast<double>(bytes) / static_cast<double>(capsnap_mib));
  return b;
}

}  // namespace

// The sidecar's environment and capacity reach both commands' records; --gpu-mem still wins.
TEST(CliSnapshot, SidecarIntoTheRecords) {
  const auto snap = capsnap_with_sidecar("ok", capsnap_sidecar("snapshot.pickle"));
  auto r = run("snapshot " + snap + " --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rec = nlohmann::json::parse(r.out);
  EXPECT_EQ(rec["environment"]["gpu"], "NVIDIA H200");
  EXPECT_EQ(rec["environment"]["driver"], "570.124.06");
  EXPECT_EQ(rec["environment"]["cuda_runtime"], "12.8");
  EXPECT_EQ(rec["environment"]["nccl"], "2.27.3");
  EXPECT_EQ(rec["environment"]["rank"], 1);
  EXPECT_EQ(rec["environment"]["world_size"], 2);
  EXPECT_EQ(rec["capture"]["peaks"]["max_memory_reserved"], 442 * capsnap_mib);
  EXPECT_EQ(rec["capture"]["problem"]["text"], "--tp 2");
  r = run("snapshot " + snap);
  EXPECT_NE(r.out.find("captured on NVIDIA H200 (140.40 GiB), driver 570.124.06, CUDA 12.8"), std::string::npos)
      << r.out;
  r = run("probe snapshot " + snap + " --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  auto rep = nlohmann::json::parse(r.out);
  EXPECT_EQ(rep["capacity"]["bytes"], std::int64_t{143771} * capsnap_mib);
  EXPECT_EQ(rep["capacity"]["from"], "capture sidecar");
  EXPECT_EQ(rep["environment"]["gpu"], "NVIDIA H200");
  r = run("probe snapshot " + snap + " --gpu-mem 80 --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["capacity"]["from"], "--gpu-mem");
}

// A malformed sidecar is one error line naming the sidecar and the field, exit 2; never ignored.
TEST(CliSnapshot, MalformedSidecarIsOneLineNamingTheField) {
  const struct {
    const char* tag;
    nlohmann::json::json_pointer at;
    nlohmann::json value;
    const char* says;
  } cases[] = {
      {"nototal", nlohmann::json::json_pointer("/gpu/total_memory"), nullptr, "gpu.total_memory: missing"},
      {"strtotal", nlohmann::json::json_pointer("/gpu/total_memory"), "80GB", "gpu.total_memory: must be an integer"},
      {"schema", nlohmann::json::json_pointer("/schema"), "headroom.capture/2", "schema"},
      {"other", nlohmann::json::json_pointer("/snapshot"), "other.pickle", "snapshot: names 'other.pickle'"},
      {"alloc", nlohmann::json::json_pointer("/peaks/max_memory_allocated"), 443 * capsnap_mib,
       "peaks.max_memory_allocated"},
      {"huge", nlohmann::json::json_pointer("/peaks/max_memory_reserved"), std::int64_t{1} << 50,
       "peaks.max_memory_reserved"},
      {"rank", nlohmann::json::json_pointer("/placement/rank"), -1, "placement.rank"},
      {"gpu", nlohmann::json::json_pointer("/gpu"), "H200", "gpu: must be an object"},
      {"kind", nlohmann::json::json_pointer("/problem/kind"), "yaml", "problem.kind"},
  };
  for (const auto& c : cases) {
    auto side = capsnap_sidecar("snapshot.pickle");
    if (c.value.is_null())
      side[c.at.parent_pointer()].erase(c.at.back());
    else
      side[c.at] = c.value;
    const auto snap = capsnap_with_sidecar(c.tag, side);
    for (const std::string cmd : {"snapshot ", "probe snapshot "}) {
      const auto r = run(cmd + snap);
      EXPECT_EQ(r.status, 2) << c.tag << ": " << r.out;
      EXPECT_EQ(lines(r.err), 1) << r.err;
      EXPECT_NE(r.err.find("snapshot.pickle.headroom.json"), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(c.says), std::string::npos) << c.tag << ": " << r.err;
      EXPECT_EQ(r.out, "");
    }
  }
  const auto snap = capsnap_with_sidecar("notjson", capsnap_sidecar("snapshot.pickle"));
  std::ofstream(snap + ".headroom.json") << "{\"schema\": ";
  const auto r = run("snapshot " + snap);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("snapshot.pickle.headroom.json"), std::string::npos) << r.err;
}

// The comparison's verdict comes after the replay's outcome, and is never "agrees" after an out-of-memory.
TEST(CliSnapshot, ComparisonVerdictAfterTheOutcome) {
  auto r = run("probe snapshot " + capsnap_fwd100 + " --gpu-mem 0.25");
  EXPECT_EQ(r.status, 3) << r.err;
  const auto oom = r.out.find("OUT OF MEMORY in the emulation at snapshot event");
  const auto verdict = r.out.find("\ncomparison: differs: the emulation ran out of memory at snapshot event");
  ASSERT_NE(oom, std::string::npos) << r.out;
  ASSERT_NE(verdict, std::string::npos) << r.out;
  EXPECT_LT(oom, verdict);
  EXPECT_EQ(r.out.find("agrees"), std::string::npos) << r.out;
  r = run("probe snapshot " + capsnap_fwd100);
  EXPECT_NE(r.out.find("\ncomparison: agrees: every segment and every block address"), std::string::npos) << r.out;
  r = run("probe snapshot " + capsnap_fwd100 + " --expandable-segments");
  EXPECT_NE(r.out.find("\ncomparison: not made"), std::string::npos) << r.out;
}

// The expandable-segments saving equals the difference of the two replays run separately, and the least
// card is the least capacity (checked by replaying at it and 2 MiB below) plus the fixed overheads.
TEST(CliSnapshot, ExpandableVerdictAndLeastCard) {
  auto off = run("probe snapshot " + capsnap_fwd100 + " --json -");
  auto on = run("probe snapshot " + capsnap_fwd100 + " --expandable-segments --json -");
  ASSERT_EQ(off.status, 0);
  ASSERT_EQ(on.status, 0);
  const std::int64_t peak_off = nlohmann::json::parse(off.out)["emulated"]["peak_reserved"];
  const std::int64_t peak_on = nlohmann::json::parse(on.out)["emulated"]["peak_reserved"];
  auto r = run("probe snapshot " + capsnap_fwd100 + " --what-if --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["answers"]["expandable_segments"]["saving_bytes"], peak_off - peak_on);
  const std::int64_t alloc = j["answers"]["least_card"]["allocator_bytes"];
  EXPECT_EQ(j["answers"]["least_card"]["bytes"], alloc + 1024 * capsnap_mib);  // planner/layout.hpp default
  EXPECT_EQ(run("probe snapshot " + capsnap_fwd100 + " --gpu-mem " + std::to_string(alloc / capsnap_mib) + "MiB").status, 0);
  EXPECT_EQ(run("probe snapshot " + capsnap_fwd100 + " --gpu-mem " + std::to_string(alloc / capsnap_mib - 2) + "MiB").status, 3);
  r = run("probe snapshot " + capsnap_fwd100 + " --what-if");
  const std::string saving = peak_off > peak_on   ? "the reserved peak falls by " + capsnap_mib_text(peak_off - peak_on)
                             : peak_off < peak_on ? "the reserved peak rises by " + capsnap_mib_text(peak_on - peak_off)
                                                  : "the reserved peak stays the same";
  EXPECT_NE(r.out.find("\nexpandable_segments: " + saving), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nleast card: " + capsnap_mib_text(alloc + 1024 * capsnap_mib)), std::string::npos) << r.out;
  // With a sidecar, the memory outside the allocator is the capture's measured figure (558 MiB).
  const auto snap = capsnap_with_sidecar("card", capsnap_sidecar("snapshot.pickle"));
  r = run("probe snapshot " + snap + " --what-if --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto k = nlohmann::json::parse(r.out);
  EXPECT_EQ(k["answers"]["least_card"]["bytes"], alloc + 558 * capsnap_mib);
  EXPECT_EQ(k["answers"]["least_card"]["fixed_from"], "sidecar");
}

// A warm trace's verdict: both settings from the same start (the blocks alive before allocated first), so
// the expandable figure equals `--expandable-segments`'s own replay; its fragmentation is said where it is
// not measured. On the shared snapshots (docs/snapshots.md).
TEST(CliSnapshot, WarmTracesSameStartAndFragmentation) {
  const std::string sid = capsnap_shared + "sidsoc12__mem_snapshot_ctx128_fp32_train.pickle";
  const std::string wed = capsnap_shared + "Wedsonlin__medium_128_training_memory_snapshot.pickle";
  if (!std::ifstream(sid) || !std::ifstream(wed)) GTEST_SKIP() << "the shared snapshots are not on this machine";
  auto r = run("probe snapshot " + wed + " --what-if --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["answers"]["expandable_segments"]["start"], "alive blocks allocated first");
  const auto on = run("probe snapshot " + wed + " --expandable-segments --json -");
  EXPECT_EQ(j["answers"]["expandable_segments"]["peak_on"], nlohmann::json::parse(on.out)["emulated"]["peak_reserved"]);
  r = run("snapshot " + wed + " --json -");
  const auto rec = nlohmann::json::parse(r.out);
  EXPECT_TRUE(rec["devices"][0]["fragmentation_at_reserved_peak"].is_null());
  r = run("snapshot " + wed);
  EXPECT_NE(r.out.find("  fragmentation: not measured (no segment events"), std::string::npos) << r.out;
  // A cold trace: measured, and the figure is 1 - requested / reserved of the record's own fields.
  r = run("snapshot " + capsnap_fwd100 + " --json -");
  const auto d = nlohmann::json::parse(r.out)["devices"][0];
  const double f = 1.0 - d["requested_at_reserved_peak"].get<double>() / d["peak_reserved"]["bytes"].get<double>();
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.1f%%", 100 * f);
  r = run("snapshot " + capsnap_fwd100);
  EXPECT_NE(r.out.find(std::string("  fragmentation: ") + pct + " at the reserved peak"), std::string::npos) << r.out;
}

namespace {

// Returns the line of `text` that starts (after its indent) with `key`, or "".
std::string capsnap_line(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (const auto at = line.find_first_not_of(' '); at != std::string::npos && line.compare(at, key.size(), key) == 0)
      return line.substr(at);
  return "";
}

}  // namespace

// Both commands count the trace's events alike and say so in the same words: the counts add up to the
// events of the trace, the replayed ones are the allocs and the frees that end a life (Python's pickle
// counts: 785 alloc, 744 free_completed, 744 free_requested, 31 segment_alloc), and the record says the same.
TEST(CliSnapshot, BothCommandsCountEventsAlike) {
  std::vector<std::string> files = {capsnap_fwd100};
  const std::string fb200 = capsnap_shared + "NiuHuangxiaozi__forward_and_backward_memory_snapshot_200_mixed_precision.pickle";
  if (std::ifstream(fb200)) files.push_back(fb200);
  for (const auto& f : files) {
    const auto sum = run("snapshot " + f), rep = run("probe snapshot " + f);
    ASSERT_EQ(sum.status, 0) << sum.err;
    ASSERT_EQ(rep.status, 0) << rep.err;
    const std::string line = capsnap_line(sum.out, "events: ");
    EXPECT_FALSE(line.empty()) << sum.out;
    EXPECT_EQ(line, capsnap_line(rep.out, "events: ").substr(0, line.size())) << rep.out;
    const auto d = nlohmann::json::parse(run("snapshot " + f + " --json -").out)["devices"][0];
    const auto r = nlohmann::json::parse(run("probe snapshot " + f + " --json -").out);
    EXPECT_EQ(d["events_replayed"], r["events_replayed"]);
    const auto& t = d["events_replayed"];
    std::size_t per_action = 0;
    for (const auto& [k, n] : d["counts"].items()) per_action += n.get<std::size_t>();
    EXPECT_EQ(t["total"], per_action);
    EXPECT_EQ(t["total"], d["events"]);
    EXPECT_EQ(t["replayed"].get<std::size_t>() + t["not_replayed"].get<std::size_t>(), per_action);
    EXPECT_EQ(t["allocs"], d["counts"]["alloc"]);
    EXPECT_EQ(t["frees"], d["counts"]["free_completed"]);  // a cold trace with completions: every life ends there
    EXPECT_EQ(t["free_requested"], d["counts"]["free_requested"]);
    EXPECT_EQ(r["trace_events"], t["replayed"]);  // cold: no leading allocs
  }
  const auto r = run("snapshot " + capsnap_fwd100);
  EXPECT_NE(r.out.find("  events: 1529 of the 2304 replayed (785 allocs, 744 frees that end a block's life); 775 not: "
                       "744 free_requested"),
            std::string::npos)
      << r.out;
  if (files.size() > 1) {
    EXPECT_NE(run("probe snapshot " + fb200).out.find("\nevents: 8646 of the 12976 replayed"), std::string::npos);
  }
}

// The blocks alive at the peak are listed once per call site with their count and total, largest first;
// the sites, the phases and the kinds each sum to the peak; phase and kind are said to be inferred.
TEST(CliSnapshot, PeakGroupedByCallSiteAndSplitByPhaseAndKind) {
  auto r = run("snapshot " + capsnap_fwd100 + " --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto d = nlohmann::json::parse(r.out)["devices"][0];
  const auto& p = d["at_peak"];
  const std::int64_t peak = d["peak_requested"]["bytes"];
  EXPECT_EQ(p["bytes"], peak);
  EXPECT_TRUE(p["inferred"].get<bool>());
  std::int64_t sites = p["other_sites"]["bytes"], phases = 0, kinds = 0, last = INT64_MAX;
  std::set<std::string> names;
  for (const auto& x : p["by_site"]) {
    EXPECT_TRUE(names.insert(x["site"].get<std::string>()).second) << x;  // each site once
    EXPECT_LE(x["bytes"].get<std::int64_t>(), last);
    EXPECT_LE(x["largest"].get<std::int64_t>(), x["bytes"].get<std::int64_t>());
    last = x["bytes"];
    sites += last;
  }
  for (const auto& [k, v] : p["by_phase"].items()) phases += v.get<std::int64_t>();
  for (const auto& [k, v] : p["by_kind"].items()) kinds += v.get<std::int64_t>();
  EXPECT_EQ(sites, peak);
  EXPECT_EQ(phases, peak);
  EXPECT_EQ(kinds, peak);
  r = run("snapshot " + capsnap_fwd100);
  const auto& top = p["by_site"][0];
  char row[160];
  std::snprintf(row, sizeof row, "%s %zu blocks (largest %s) %s", capsnap_mib_text(top["bytes"]).c_str(),
                top["blocks"].get<std::size_t>(), capsnap_mib_text(top["largest"]).c_str(),
                top["site"].get<std::string>().c_str());
  std::string flat;  // the output with runs of spaces made one
  for (char c : r.out)
    if (!(c == ' ' && !flat.empty() && flat.back() == ' ')) flat += c;
  EXPECT_NE(flat.find(std::string("\n ") + row + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  by phase (inferred from each allocation's frames"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the peak falls in forward (from the frames of the allocation at the peak)"), std::string::npos);
  EXPECT_NE(r.out.find("  by kind (inferred from the frames and the blocks' lifetimes"), std::string::npos);
  EXPECT_EQ(r.out.find("largest live blocks"), std::string::npos);
}

// The what-if's two figures are defined, and the verdict follows the least capacity: its change is the
// difference of the two rows, its sign is the word used, and each least capacity runs (2 MiB less does not).
TEST(CliSnapshot, ExpandableVerdictIsConsistentWithTheLeastCapacity) {
  std::vector<std::string> files = {capsnap_fwd100};
  const std::string wed = capsnap_shared + "Wedsonlin__medium_128_training_memory_snapshot.pickle";
  if (std::ifstream(wed)) files.push_back(wed);
  for (const auto& f : files) {
    auto r = run("probe snapshot " + f + " --what-if --json -");
    ASSERT_EQ(r.status, 0) << r.err;
    const auto v = nlohmann::json::parse(r.out)["answers"]["expandable_segments"];
    const std::int64_t off = v["least_off"], on = v["least_on"];
    EXPECT_EQ(v["least_change_bytes"], on - off);
    EXPECT_EQ(v["worth_setting"].get<bool>(), off - on >= off / 100);
    const std::string least = on < off   ? "the least capacity that runs this step falls by " + capsnap_mib_text(off - on)
                              : on > off ? "the least capacity that runs this step rises by " + capsnap_mib_text(on - off)
                                         : "the least capacity that runs this step stays the same";
    const std::string line = v["verdict"];
    EXPECT_NE(line.find(least), std::string::npos) << line;
    EXPECT_NE(line.find(v["worth_setting"].get<bool>() ? ": worth setting" : ": not worth it"), std::string::npos) << line;
    r = run("probe snapshot " + f + " --what-if");
    EXPECT_NE(r.out.find("\n" + line + "\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("(reserved peak: the most the allocator holds"), std::string::npos) << r.out;
    if (f == wed) {  // the case a new user found: 56 MiB less reserved, 52 MiB more needed to run
      EXPECT_NE(line.find("the reserved peak falls by 56.00 MiB"), std::string::npos) << line;
      EXPECT_NE(line.find("rises by 52.00 MiB"), std::string::npos) << line;
      EXPECT_NE(line.find("not worth it"), std::string::npos) << line;
      continue;
    }
    const std::string mib_of_on = std::to_string(on / capsnap_mib) + "MiB";
    EXPECT_EQ(run("probe snapshot " + f + " --expandable-segments --gpu-mem " + mib_of_on).status, 0);
    EXPECT_EQ(run("probe snapshot " + f + " --expandable-segments --gpu-mem " + std::to_string(on / capsnap_mib - 2) + "MiB").status, 3);
  }
}

// `probe snapshot --gpu-type` is refused in one line naming the flag that does it, with the GPU's capacity,
// and that flag runs; an unknown type names the known ones.
TEST(CliSnapshot, GpuTypeIsRefusedWithTheFlagThatDoesIt) {
  auto r = run("probe snapshot " + capsnap_fwd100 + " --gpu-type h100-80gb");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_EQ(r.out, "");
  // h100-80gb: 81559 MiB (planner/gpu_types.cpp) = 79.65 GiB.
  EXPECT_NE(r.err.find("headroom: bad input: gpu-type: 'probe snapshot' replays under the capacity of the capture"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("give '--gpu-mem 79.65GiB'"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("h100-80gb --gpu-type"), std::string::npos) << r.err;
  EXPECT_EQ(run("probe snapshot " + capsnap_fwd100 + " --gpu-mem 79.65GiB").status, 0);
  r = run("probe snapshot " + capsnap_fwd100 + " --gpu-type=h100");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("h100-80gb"), std::string::npos) << r.err;
}
