// cli_probe_test.cpp: runs the built `headroom` binary's probe commands: `trace`, `probe replay` (a built
// trace or a trace file, on the sim device; under a launcher, every rank), `probe max-fit AXIS`, `probe
// overheads`, `probe snapshot FILE` and `snapshot`; each subcommand's own options, the one line that answers
// each flag form they replaced, outputs all or nothing, and adversarial option values.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_support.hpp"

namespace {

const std::string z3 = "--preset gpt3-175b --gpus 32 --zero 3 --recompute selective ";
const std::string snap100 = data + "/snapshots/NiuHuangxiaozi__forward_memory_snapshot_100.pickle";

TEST(CliProbe, SimReplayMatchesThePlannerAndWritesARecord) {
  const std::string json = scratch("m.json"), svg = scratch("t.svg");
  auto r = run("probe replay " + z3 + "--json " + json + " --timeline " + svg);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("  peak requested, GiB                  171.17       171.17"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("CUDA context and NCCL are not modelled"), std::string::npos);
  auto j = nlohmann::json::parse(slurp(json));
  EXPECT_TRUE(schema_is(j, "headroom.measurement/1")) << j["schema"];
  EXPECT_EQ(j["backend"], "sim");
  EXPECT_FALSE(j["measured"].get<bool>());
  EXPECT_EQ(j["replayed"]["peak_requested_bytes"], j["predicted"]["step_peak_bytes"]);
  EXPECT_GE(j["replayed"]["peak_reserved_bytes"].get<std::int64_t>(),
            j["replayed"]["peak_allocated_bytes"].get<std::int64_t>());
  EXPECT_TRUE(j["fixed_overheads"]["context_bytes"].is_null());
  EXPECT_NE(j["environment"]["command_line"].get<std::string>().find("--timeline"), std::string::npos);
  EXPECT_NE(slurp(svg).find("</svg>"), std::string::npos);

  // Never silently overwritten: exit 2, the file unchanged; --force replaces it.
  const std::string before = slurp(json);
  auto again = run("probe replay " + z3 + "--allocator raw --json " + json);
  EXPECT_EQ(again.status, 2);
  EXPECT_NE(again.err.find("refusing to overwrite"), std::string::npos);
  EXPECT_EQ(slurp(json), before);
  EXPECT_EQ(run("probe replay " + z3 + "--allocator raw --force --json " + json).status, 0);
  EXPECT_NE(slurp(json), before);
}

TEST(CliProbe, TraceFileReplaysToTheSamePeak) {
  const std::string trace = scratch("trace.json");
  auto t = run("trace " + z3 + "--json " + trace);
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("peak live bytes 171.17 GiB"), std::string::npos) << t.out;
  auto j = nlohmann::json::parse(slurp(trace));
  EXPECT_TRUE(schema_is(j, "headroom.trace/1")) << j["schema"];
  auto r = run("probe replay " + z3 + "--trace " + trace);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("171.17       171.17"), std::string::npos) << r.out;
}

TEST(CliProbe, OutOfMemoryNamesTheEventAndExitsThree) {
  auto r = run("probe replay --preset gpt3-175b --gpus 16 --zero 3 --recompute selective");
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.out.find("out of memory at event"), std::string::npos) << r.out;
}

TEST(CliProbe, BadInputIsOneLineAndWritesNothing) {
  const std::string bad_trace = scratch("bad_trace.json");
  {
    std::ofstream(bad_trace) << R"({"schema": "headroom.trace/1", "tensors": [{"name": "x", "bytes": 8}],
                                    "events": [["free", 0, "forward"]]})";
  }
  const std::string truncated = scratch("truncated_trace.json");
  { std::ofstream(truncated) << R"({"schema": "headroom.trace/1", "tensors": [)"; }
  const std::string out = scratch("never.json");
  struct bad {
    std::string args, says;
  };
  const bad cases[] = {
      {"probe replay " + z3 + "--trace " + bad_trace + " --json " + out, "which is not allocated"},
      {"probe replay " + z3 + "--trace " + truncated + " --json " + out, "malformed JSON"},
      {"probe replay " + z3 + "--max-split-size-mb 10 --json " + out, "max-split-size-mb"},
      {"probe replay " + z3 + "--allocator raw --expandable-segments --json " + out,
       "apply to the caching allocator"},
      {"probe replay " + z3 + "--granularity-mib 0 --json " + out, "granularity"},
      {"probe replay " + z3 + "--stage 3 --json " + out, "stage"},
      {"probe replay --preset gpt3-175b --gpus 40 --tp 5 --json " + out, "not divisible by tp=5"},
      {"trace " + z3 + "--vpp 2 --pp 4 --global-batch 40 --json " + out, "vpp"},
      {"probe replay " + z3 + "--allocator driver-pool --json " + out, "needs --backend cuda"},
      {"probe replay " + z3 + "--allocator driver-pool --max-split-size-mb 64 --backend cuda --json " + out,
       "apply to the caching allocator"},
      {"probe replay " + z3 + "--backend cuda --granularity-mib 4 --json " + out, "a GPU reports its own"},
      {"probe replay " + z3 + "--bucket-mb 0 --json " + out, "bucket-mb"},
      {"probe replay " + z3 + "--rank-timeout 0 --json " + out, "rank-timeout"},
      {"probe max-fit seq " + z3 + "--max-fit-limit 100 --json " + out, "max-fit-limit"},
      {"probe max-fit seq " + z3 + "--stage 3 --json " + out, "stage"},
      {"probe max-fit seq " + z3 + "--max-split-size-mb 10 --json " + out, "max-split-size-mb"},
      {"probe overheads " + z3 + "--bucket-mb 0 --json " + out, "bucket-mb"},
      {"probe overheads --preset gpt3-175b --gpus 40 --tp 5 --json " + out, "not divisible by tp=5"},
  };
  for (const auto& c : cases) {
    auto r = run(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
  }
  // A layout whose state alone does not fit: the same verdict as `plan` (exit 3), and no record.
  auto r = run("probe replay --preset gpt3-175b --gpus 8 --zero 0 --json " + out);
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.out.find("does not fit"), std::string::npos) << r.out;
  EXPECT_EQ(run("plan --preset gpt3-175b --gpus 8 --zero 0").status, 3);
  EXPECT_FALSE(std::filesystem::exists(out));
}

// Without a GPU (here, CI): one line "no CUDA device (reason)", exit 4, nothing on stdout, no file. With one
// (the device check runs this suite too) the same commands measure and exit 0.
TEST(CliProbe, CudaBackendWithoutOneSaysSo) {
  const std::string out = scratch("cuda.json");
  const std::string small = "--preset gpt3-125m --gpus 8 --zero 1 --recompute selective ";
  for (const std::string extra : {"replay --backend cuda ", "replay --backend cuda --allocator driver-pool ",
                                  "overheads ", "max-fit micro-batch --backend cuda --max-fit-limit 4 "}) {
    std::filesystem::remove(out);
    auto r = run("probe " + extra + small + "--json " + out);
    if (r.status == 0) {
      EXPECT_TRUE(std::filesystem::exists(out)) << extra;
      continue;
    }
    EXPECT_EQ(r.status, 4) << extra << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind("headroom: no CUDA device (", 0), 0u) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_FALSE(std::filesystem::exists(out));
  }
}

TEST(CliProbe, MaxFitOnTheSimDeviceBesideThePlanner) {
  const std::string json = scratch("maxfit.json");
  auto r = run("probe max-fit seq --preset gpt3-1.3b --gpus 8 --zero 3 --gpu-mem 24 --json " + json);
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(slurp(json));
  EXPECT_TRUE(schema_is(j, "headroom.max_fit/1")) << j["schema"];
  EXPECT_FALSE(j["measured"].get<bool>());
  EXPECT_EQ(j["axis"], "seq");
  EXPECT_EQ(j["step"], 256);
  const auto replayed = j["replayed"]["largest"].get<std::int64_t>();
  // A replay that fits has peak requested (= the planner's step peak) within the capacity.
  EXPECT_LE(replayed, j["predicted_step_peak"]["largest"].get<std::int64_t>());
  EXPECT_LE(j["predicted_verdict"]["largest"].get<std::int64_t>(), replayed);
  EXPECT_EQ(replayed % 256, 0);
  // Every trial is recorded; the largest value is one that fitted and the next step up did not.
  bool fitted = false, next_missed = false;
  for (const auto& t : j["replayed"]["trials"]) {
    if (t["value"] == replayed) fitted = t["fits"].get<bool>();
    if (t["value"] == replayed + 256) next_missed = !t["fits"].get<bool>();
  }
  EXPECT_TRUE(fitted);
  EXPECT_TRUE(next_missed);
  auto text = run("probe max-fit seq --preset gpt3-1.3b --gpus 8 --zero 3 --gpu-mem 24");
  EXPECT_NE(text.out.find("replayed on the sim device"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("planner, verdict"), std::string::npos);
  // Nothing fits: exit 3, and the answer says "none".
  auto none = run("probe max-fit micro-batch --preset gpt3-13b --gpus 1 --gpu-mem 16 --reserve 1");
  EXPECT_EQ(none.status, 3) << none.err;
  EXPECT_NE(none.out.find("none"), std::string::npos) << none.out;
}

// headroom snapshot: what a real cold snapshot measured, its record and its trace.
TEST(Cli, SnapshotSummaryRecordAndTrace) {
  const std::string base = ::testing::TempDir() + "/headroom_snap_" + std::to_string(::getpid());
  std::filesystem::remove(base + ".json");
  std::filesystem::remove(base + ".trace.json");
  auto r = run("snapshot " + snap100 + " --json " + base + ".json --trace " + base + ".trace.json");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("cold: every block lands in a segment allocated inside the trace"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("peak reserved    442.00 MiB"), std::string::npos) << r.out;
  const auto rec = nlohmann::json::parse(slurp(base + ".json"));
  EXPECT_TRUE(schema_is(rec, "headroom.measurement/1")) << rec["schema"];
  EXPECT_EQ(rec["backend"], "pytorch-snapshot");
  EXPECT_EQ(rec["measured"], true);
  EXPECT_EQ(rec["devices"][0]["peak_reserved"]["bytes"], 463470592);
  const auto tr = nlohmann::json::parse(slurp(base + ".trace.json"));
  EXPECT_TRUE(schema_is(tr, "headroom.trace/1")) << tr["schema"];
  // Its trace names its source, not a planner case: `probe replay --trace` with a model refuses it.
  auto p = run("probe replay --preset gpt3-125m --gpus 1 --trace " + base + ".trace.json");
  EXPECT_EQ(p.status, 2) << p.out << p.err;
  EXPECT_NE(p.err.find("'probe snapshot'"), std::string::npos) << p.err;
  // With the run's model and layout, the planner's prediction joins the record.
  std::filesystem::remove(base + ".json");
  r = run("snapshot " + snap100 + " --preset gpt3-125m --gpus 1 --json " + base + ".json");
  EXPECT_EQ(r.status, 0) << r.err;
  const auto with = nlohmann::json::parse(slurp(base + ".json"));
  EXPECT_TRUE(with.contains("predicted"));
  EXPECT_EQ(with["inputs"]["layout_spec"]["gpus"], 1);
}

// probe snapshot: the emulation against the real allocator, and the what-if table.
TEST(Cli, ProbeSnapshotAgreesAndAsksWhatIf) {
  auto r = run("probe snapshot " + snap100 + " --what-if");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("reserved peak                  442.00 MiB         442.00 MiB"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("agrees: every segment and every block address"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("expandable_segments:True"), std::string::npos);
  EXPECT_NE(r.out.find("least capacity that runs"), std::string::npos);
  // Too small a card: the emulation runs out of memory, exit 3.
  r = run("probe snapshot " + snap100 + " --gpu-mem 0.25");
  EXPECT_EQ(r.status, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("OUT OF MEMORY in the emulation"), std::string::npos) << r.out;
}

// probe snapshot --json: the replay's record, the capacity's source in it; outputs all or nothing.
TEST(Cli, ProbeSnapshotWritesItsRecord) {
  auto r = run("probe snapshot " + snap100 + " --what-if --gpu-mem 80 --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);  // only the record on stdout
  EXPECT_TRUE(schema_is(j, "headroom.snapshot_replay/1")) << j["schema"];
  EXPECT_EQ(j["capacity"]["from"], "--gpu-mem");
  EXPECT_EQ(j["capacity"]["bytes"], std::int64_t{80} << 30);
  EXPECT_TRUE(j["cold"].get<bool>());
  EXPECT_TRUE(j["comparison"]["agrees"].get<bool>());
  EXPECT_TRUE(j["comparison"]["event_by_event"].get<bool>());
  EXPECT_EQ(j["real"]["peak_reserved"], 463470592);
  EXPECT_EQ(j["emulated"]["peak_reserved"], 463470592);
  EXPECT_EQ(j["what_if"].size(), 4u);
  const std::string base = ::testing::TempDir() + "/headroom_snapreplay_" + std::to_string(::getpid());
  std::filesystem::remove(base + ".json");
  r = run("probe snapshot " + snap100 + " --json " + base + ".json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(base + ".json"))["capacity"]["from"], "unbounded");
  // The file exists now: refused before the replay, and left as it was.
  const std::string before = slurp(base + ".json");
  r = run("probe snapshot " + snap100 + " --gpu-mem 0.25 --json " + base + ".json");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(slurp(base + ".json"), before);
  r = run("probe snapshot " + snap100 + " --timeline " + base + ".svg");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("timeline"), std::string::npos) << r.err;
  std::filesystem::remove(base + ".json");
}

TEST(Cli, BadSnapshotIsOneLine) {
  const std::string evil = ::testing::TempDir() + "/headroom_evil_" + std::to_string(::getpid()) + ".pickle";
  std::ofstream(evil, std::ios::binary) << std::string(
      "\x80\x02"
      "cos\nsystem\n(S'echo hi'\ntR.",
      28);
  for (const std::string& args :
       {"snapshot " + evil, "probe snapshot " + evil, "snapshot " + data + "/snapshots/README.md",
        std::string("snapshot /nonexistent.pickle"), "probe snapshot " + snap100 + " --device 4",
        "probe snapshot " + snap100 + " --snapshot-device 4"}) {
    auto r = run(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out << r.err;
    EXPECT_EQ(lines(r.err), 1) << args << "\n" << r.err;
  }
  auto r = run("snapshot " + evil);
  EXPECT_NE(r.err.find("never loads code"), std::string::npos) << r.err;
}

// Outputs are checked before any work and written all or nothing; '-' is standard output.
TEST(CliProbe, OutputsAreAllOrNothingAndDashIsStdout) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("headroom_outs_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string fresh = (dir / "new.json").string(), old_svg = (dir / "old.svg").string();
  std::ofstream(old_svg) << "keep";
  // The second output is refused: the first is not created either, and the refusal comes before any work.
  auto r = run("probe replay --preset gpt3-125m --gpus 8 --json " + fresh + " --timeline " + old_svg);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("old.svg"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(fresh));
  // One file named for two outputs, and two outputs on standard output, are refused.
  EXPECT_EQ(run("probe replay --preset gpt3-125m --gpus 8 --json " + fresh + " --timeline " + fresh).status,
            2);
  EXPECT_EQ(run("probe replay --preset gpt3-125m --gpus 8 --json - --timeline -").status, 2);
  EXPECT_FALSE(fs::exists(fresh));
  // `-` is standard output for --timeline as for --json; the file beside it is written too.
  r = run("probe replay --preset gpt3-125m --gpus 8 --json " + fresh + " --timeline -");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("<svg", 0), 0u) << r.out.substr(0, 80);
  EXPECT_TRUE(fs::exists(fresh));
  EXPECT_FALSE(fs::exists("-"));
  // The streamed trace is the document a reader parses back.
  r = run("trace --preset gpt3-125m --gpus 8 --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(schema_is(j, "headroom.trace/1")) << j["schema"];
  EXPECT_GT(j["events"].size(), 100u);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 2);  // new.json and old.svg: no temporaries
  fs::remove_all(dir);
}

// `probe` is its subcommands: each flag form they replaced answers with one line naming the new form (exit 2,
// nothing on stdout, nothing written), whatever else the command line holds.
TEST(CliProbe, OldFlagFormsNameTheNewForm) {
  const std::string out = scratch("moved.json");
  const std::string replay = "headroom: 'probe OPTIONS' is now 'probe replay OPTIONS'\n";
  const std::string max_fit = "headroom: 'probe --max-fit AXIS' is now 'probe max-fit AXIS'\n";
  const std::string overheads = "headroom: 'probe --overheads' is now 'probe overheads'\n";
  const std::string snapshot = "headroom: 'probe --snapshot FILE' is now 'probe snapshot FILE'\n";
  const std::string trace = "headroom: 'probe --trace FILE' is now 'probe replay --trace FILE'\n";
  struct moved {
    std::string args, line;
  };
  const moved cases[] = {
      {"probe " + z3, replay},
      {"probe --preset gpt3-125m --gpus 8 --allocator raw --timeline " + out, replay},
      {"probe --backend cuda " + z3, replay},
      {"probe " + z3 + "--max-fit micro-batch", max_fit},
      {"probe " + z3 + "--max-fit=seq --max-fit-limit 4096", max_fit},
      {"probe " + z3 + "--overheads", overheads},
      {"probe --overheads " + z3 + "--bucket-mb 50", overheads},
      {"probe --snapshot " + snap100, snapshot},
      {"probe --snapshot " + snap100 + " --what-if --gpu-mem 80", snapshot},
      {"probe --snapshot=" + snap100, snapshot},
      {"probe " + z3 + "--trace " + scratch("t.json"), trace},
      {"probe " + z3 + "--overheads --max-fit seq", max_fit},
  };
  for (const auto& c : cases) {
    auto r = run(c.args + " --json " + out);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << "\n" << r.out;
    EXPECT_EQ(r.err, c.line) << c.args;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
  }
}

// Each subcommand has only the options that apply to it: the parser refuses any other, in one line naming it,
// before any work; a missing subcommand, axis or file is refused the same way.
TEST(CliProbe, EachSubcommandRefusesWhatDoesNotApply) {
  const std::string out = scratch("refused.json");
  struct bad {
    std::string args, says;
  };
  const bad cases[] = {
      {"probe replay " + z3 + "--what-if", "--what-if"},
      {"probe replay " + z3 + "--max-fit-limit 4", "--max-fit-limit"},
      {"probe replay " + z3 + "--snapshot-device 1", "--snapshot-device"},
      {"probe replay " + z3 + "--max-fit seq", "--max-fit"},
      {"probe max-fit seq " + z3 + "--trace " + scratch("t.json"), "--trace"},
      {"probe max-fit seq " + z3 + "--timeline " + scratch("t.svg"), "--timeline"},
      {"probe max-fit seq " + z3 + "--rank-timeout 3", "--rank-timeout"},
      {"probe max-fit seq " + z3 + "--bucket-mb 50", "--bucket-mb"},
      {"probe max-fit heads " + z3, "heads"},
      {"probe max-fit " + z3, "axis"},
      {"probe overheads " + z3 + "--backend cuda", "--backend"},
      {"probe overheads " + z3 + "--allocator raw", "--allocator"},
      {"probe overheads " + z3 + "--stage 0", "--stage"},
      {"probe overheads " + z3 + "--timeline " + scratch("t.svg"), "--timeline"},
      {"probe overheads " + z3 + "--max-fit-limit 4", "--max-fit-limit"},
      {"probe snapshot " + snap100 + " --preset gpt3-125m", "--preset"},
      {"probe snapshot " + snap100 + " --allocator raw", "--allocator"},
      {"probe snapshot " + snap100 + " --timeline " + scratch("t.svg"), "--timeline"},
      {"probe snapshot " + snap100 + " --stage 0", "--stage"},
      {"probe snapshot " + snap100 + " --backend sim", "--backend"},
      {"probe snapshot", "file"},
  };
  for (const auto& c : cases) {
    auto r = run(c.args + " --json " + out);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << "\n" << r.out;
    EXPECT_EQ(lines(r.err), 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
  }
  for (const char* args : {"probe", "probe bogus"}) {
    auto r = run(args);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_EQ(r.err, "headroom: A subcommand is required (run with --help for usage)\n") << args;
  }
  // Help lists the four subcommands.
  auto h = run("probe --help");
  EXPECT_EQ(h.status, 0) << h.err;
  for (const char* sub : {"replay", "max-fit", "overheads", "snapshot"})
    EXPECT_NE(h.out.find(sub), std::string::npos) << sub << "\n" << h.out;
}

// Each subcommand writes its own record: replay a measurement, max-fit a search, snapshot a replay record;
// their texts open with the command's name.
TEST(CliProbe, EachSubcommandWritesItsRecord) {
  struct sub {
    std::string args, schema, head;
    int status;
  };
  const std::string small = "--preset gpt3-125m --gpus 8 --zero 1 ";
  const sub subs[] = {
      {"probe replay " + small, "headroom.measurement/", "headroom probe: gpt3-125m", 0},
      {"probe max-fit layers " + small + "--gpu-mem 8 --reserve 1 --max-fit-limit 48", "headroom.max_fit/",
       "headroom probe max-fit layers: gpt3-125m", 0},
      {"probe snapshot " + snap100, "headroom.snapshot_replay/", "headroom probe snapshot " + snap100, 0},
  };
  for (const auto& s : subs) {
    const std::string json = scratch("record.json");
    auto r = run(s.args + " --json " + json);
    EXPECT_EQ(r.status, s.status) << s.args << "\n" << r.err;
    EXPECT_EQ(r.out.rfind(s.head, 0), 0u) << s.args << "\n" << r.out;
    const auto j = nlohmann::json::parse(slurp(json));
    EXPECT_EQ(j["schema"].get<std::string>().rfind(s.schema, 0), 0u) << s.args << "\n" << j["schema"];
    auto stdout_only = run(s.args + " --json -");
    EXPECT_EQ(stdout_only.status, s.status) << s.args;
    EXPECT_EQ(nlohmann::json::parse(stdout_only.out)["schema"], j["schema"]) << s.args;
  }
}

// Under mpirun or srun (a world of one rank here, set by hand: no MPI needed), `probe replay` runs every rank
// of the layout; the other subcommands probe one device and are refused, rank 0 saying so in one line.
TEST(CliProbe, UnderALauncherReplayRunsEveryRank) {
  const std::string launcher = "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_LOCAL_RANK=0";
  const std::string json = scratch("ranks.json");
  auto r = run_with(launcher, "probe replay --preset gpt3-125m --gpus 1 --json " + json);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("1 rank under mpirun"), std::string::npos) << r.out;
  EXPECT_TRUE(schema_is(nlohmann::json::parse(slurp(json)), "headroom.multi_rank/1"));
  for (const std::string& args :
       {std::string("probe max-fit seq --preset gpt3-125m --gpus 1"),
        std::string("probe overheads --preset gpt3-125m --gpus 1"), "probe snapshot " + snap100}) {
    auto refused = run_with(launcher, args);
    EXPECT_EQ(refused.status, 2) << args << "\n" << refused.out << refused.err;
    EXPECT_EQ(lines(refused.err), 1) << args << "\n" << refused.err;
    EXPECT_NE(refused.err.find("applies to a single-rank probe, not under a launcher"), std::string::npos)
        << args << "\n"
        << refused.err;
  }
}

// Argument-level fuzzing of the probe subcommands' own options with adversarial values: whatever the value,
// exit 0, 2, 3 or (overheads without a GPU) 4, never 1, never a signal; on exit 2 one stderr line under 300
// characters and no output file left behind.
TEST(CliFuzz, AdversarialProbeArgumentValues) {
  const std::string out =
      ::testing::TempDir() + "/headroom_probefuzz_" + std::to_string(::getpid()) + ".json";
  const std::vector<std::string> values = {
      "0",   "-1", "9223372036854775808", "1e308", "inf", "nan", "''", "abc", "'1\n2'",
      "1.5", "-0", std::string(1000, '7')};
  const std::string small = "--preset gpt3-125m --gpus 8 ";
  const std::vector<std::string> forms = {"probe replay " + small + "--granularity-mib ",
                                          "probe replay " + small + "--max-split-size-mb ",
                                          "probe replay " + small + "--bucket-mb ",
                                          "probe replay " + small + "--stage ",
                                          "probe replay " + small + "--trace ",
                                          "probe replay " + small + "--rank-timeout ",
                                          "probe max-fit layers " + small + "--gpu-mem 4 --max-fit-limit ",
                                          "probe overheads " + small + "--bucket-mb ",
                                          "probe snapshot " + snap100 + " --device ",
                                          "probe snapshot " + snap100 + " --gpu-mem ",
                                          "probe snapshot " + snap100 + " --max-split-size-mb ",
                                          "probe snapshot "};
  int runs = 0;
  for (const auto& form : forms)
    for (const auto& v : values) {
      std::filesystem::remove(out);
      const std::string args = form + v + " --json " + out;
      auto r = run(args);
      ++runs;
      EXPECT_TRUE(r.status == 0 || r.status == 2 || r.status == 3 || r.status == 4)
          << args << " -> " << r.status << "\n"
          << r.err;
      if (r.status == 2) {
        EXPECT_EQ(lines(r.err), 1) << args << "\n" << r.err;
        EXPECT_LT(r.err.size(), 300u) << args;
        EXPECT_FALSE(std::filesystem::exists(out)) << args;
      }
    }
  std::filesystem::remove(out);
  EXPECT_GT(runs, 140);
}

}  // namespace
