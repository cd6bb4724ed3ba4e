// cli_snapshot_test.cpp: `headroom snapshot` and `headroom probe snapshot` with a capture sidecar beside the
// snapshot (tools/headroom_capture.py, probes/snapshots/sidecar.hpp), and their one-line answers (the least
// card, the expandable-segments verdict, the comparison after the replay's outcome, the fragmentation),
// each checked against an independent derivation: other replays run through the CLI, the record's figures.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

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
      {"gpu", nlohmann::json::json_pointer("/gpu"), "H200", "gpu: missing, or not an object"},
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
  const std::string saving = peak_off >= peak_on ? "saves " + capsnap_mib_text(peak_off - peak_on)
                                                 : "costs " + capsnap_mib_text(peak_on - peak_off);
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
