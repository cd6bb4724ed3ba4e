// cli_hostile_test.cpp: hostile input to the measured loop's commands, through the built binary: an output
// that is one of the command's own inputs (--force included), observations no run could produce, sidecars
// that contradict themselves, a record whose snapshot_view is malformed, JSON of the wrong type, CSV quirks
// (a byte order mark, an unclosed quote) and arguments that are no words. Each is one line on stderr naming
// the file, row or field, exit status 2, and no output written.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>

#include "cli_support.hpp"

namespace {

namespace fs = std::filesystem;

const std::string hostile_snap = data + "/snapshots/NiuHuangxiaozi__forward_memory_snapshot_100.pickle";
constexpr std::int64_t hostile_mib = std::int64_t{1} << 20;

// Returns a fresh folder of this process for test `tag`.
std::string hostile_dir(const std::string& tag) {
  return fresh_dir("hostile_" + tag);
}

// Copies the small real snapshot into `dir`; returns the copy's path.
std::string hostile_snapshot_in(const std::string& dir) {
  const std::string p = dir + "/snapshot.pickle";
  fs::copy_file(hostile_snap, p);
  return p;
}

// Writes `text` to `path`; returns `path`.
std::string hostile_write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// A consistent capture sidecar (the fields tools/headroom_capture.py's `sidecar` writes) for snapshot.pickle.
nlohmann::json hostile_sidecar() {
  return {{"schema", "headroom.capture/1"},
          {"snapshot", "snapshot.pickle"},
          {"captured_utc", {{"start", "2026-12-01T10:00:00Z"}, {"end", "2026-12-01T10:01:00Z"}}},
          {"software", {{"torch", "2.8.0+cu128"}, {"cuda_runtime", "12.8"}, {"nccl", "2.27.3"}}},
          {"gpu", {{"name", "NVIDIA H200"}, {"total_memory", std::int64_t{143771} * hostile_mib}, {"index", 0}}},
          {"allocator", {{"PYTORCH_CUDA_ALLOC_CONF", ""}}},
          {"placement", {{"launcher", nullptr}, {"rank", 0}, {"world_size", 1}}},
          {"peaks", {{"max_memory_reserved", 442 * hostile_mib}, {"max_memory_allocated", 400 * hostile_mib}}},
          {"at_end", {{"outside_allocator", 558 * hostile_mib}}},
          {"device_used_at_peak", {{"bytes", 1000 * hostile_mib}, {"how", "max_memory_reserved + ..."}}},
          {"problem", nullptr}};
}

// Expects `r` refused as bad input with one line holding every one of `parts`.
void hostile_refused(const result& r, std::initializer_list<std::string> parts) {
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  for (const auto& p : parts) EXPECT_NE(r.err.find(p), std::string::npos) << "missing '" << p << "' in " << r.err;
  EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << r.err;
}

}  // namespace

// --force never lets an output replace one of the command's inputs, however the output is spelt.
// A recipe given as a file is an input of plan like any other.
TEST(CliHostile, RecipeFileIsAnInputOfPlan) {
  const std::string dir = hostile_dir("recipe");
  const std::string r = dir + "/r.json";
  hostile_write(r, R"({"name": "r", "buffers": [{"kind": "params", "bytes": 2}, {"kind": "grads", "bytes": 2},)"
                   R"( {"kind": "optimizer", "bytes": 12}]})");
  const auto size = fs::file_size(r);
  hostile_refused(run("plan --preset llama3-8b --gpus 8 --recipe " + r + " --json " + r + " --force"),
                  {"one of the command's inputs"});
  EXPECT_EQ(fs::file_size(r), size);
}

TEST(CliHostile, OutputOverAnInputIsRefusedEvenWithForce) {
  const std::string dir = hostile_dir("inputs");
  const std::string snap = hostile_snapshot_in(dir);
  const auto size = fs::file_size(snap);
  hostile_refused(run("snapshot " + snap + " --json " + snap + " --force"),
                  {"'" + snap + "'", "one of the command's inputs", "even with --force"});
  EXPECT_EQ(fs::file_size(snap), size);  // the snapshot is intact
  // Another spelling, a symbolic link: both names are given.
  fs::create_symlink(snap, dir + "/link.json");
  hostile_refused(run("probe snapshot " + snap + " --json " + dir + "/link.json --force"),
                  {"'" + dir + "/link.json' is the same file as '", "/snapshot.pickle', one of the command's inputs"});
  hostile_refused(run("snapshot " + snap + " --trace " + dir + "/./snapshot.pickle --force"),
                  {"/./snapshot.pickle' is the same file as '", "hostile_inputs/snapshot.pickle', one of"});
  EXPECT_EQ(fs::file_size(snap), size);
  // The sidecar beside it is an input too.
  hostile_write(snap + ".headroom.json", hostile_sidecar().dump());
  hostile_refused(run("snapshot " + snap + " --json " + snap + ".headroom.json --force"),
                  {"one of the command's inputs"});
  // calibrate and report: a record named as the output.
  const std::string recs = dir + "/recs";
  ASSERT_EQ(run("observe " + data + "/observe/example-runs.csv -o " + recs).status, 0);
  const std::string r1 = recs + "/mb1.json";
  const std::string before = slurp(r1);
  hostile_refused(run("calibrate " + recs + " -o " + r1 + " --force"), {"'" + r1 + "'", "inputs"});
  hostile_refused(run("report " + r1 + " " + recs + "/mb2.json -o " + recs + "/mb2.json --force"),
                  {"'" + recs + "/mb2.json'", "inputs"});
  EXPECT_EQ(slurp(r1), before);
  // plan: the model file, the calibration.
  const std::string hf = dir + "/gpt2.json";
  fs::copy_file(data + "/hf/gpt2.json", hf);
  hostile_refused(run("plan --hf-config " + hf + " --gpus 1 --json " + hf + " --force"), {"'" + hf + "'", "inputs"});
  hostile_refused(run("plan --hf-config " + hf + " --gpus 1 --csv " + dir + "/../hostile_inputs/gpt2.json --force"),
                  {"is the same file as '", "hostile_inputs/gpt2.json', one of the command's inputs"});
  EXPECT_EQ(nlohmann::json::parse(slurp(hf)), nlohmann::json::parse(slurp(data + "/hf/gpt2.json")));
  // An output that is not an input is still replaced with --force.
  EXPECT_EQ(run("snapshot " + snap + " --json " + dir + "/rec.json").status, 0);
  EXPECT_EQ(run("snapshot " + snap + " --json " + dir + "/rec.json --force").status, 0);
}

// A figure below the state the run must hold (8 B parameters in bf16 alone are 16 GB per GPU without
// sharding) describes another run: refused at its row, naming the table, figure and floor; the docs'
// figures pass.
TEST(CliHostile, ImpossibleObservationRefusedAtItsRow) {
  const std::string dir = hostile_dir("floor");
  const std::string head = "name,problem,figure,value,unit\n";
  const std::string ok = "fine,--preset llama3-8b --gpus 8 --zero 3 --seq 8192,reserved_peak,69.7,GiB\n";
  const std::string csv =
      hostile_write(dir + "/runs.csv", head + ok + "tiny,--preset llama3-8b --gpus 8 --zero 3 --seq 8192,reserved_peak,1,GiB\n");
  auto r = run("observe " + csv + " -o " + dir + "/out");
  hostile_refused(r, {"runs.csv: row 2, column 'value'", "reserved_peak 1 GiB is below the",
                      "the problem does not describe the run that was measured, or the figure is of another kind"});
  EXPECT_FALSE(fs::exists(dir + "/out"));
  const std::string used = hostile_write(
      dir + "/used.csv", head + "u,--preset llama3-8b --gpus 8 --seq 8192,device_used,900,MiB\n");
  hostile_refused(run("observe " + used + " -o " + dir + "/out"), {"row 1", "device_used 900 MiB is below"});
  // Without ZeRO every GPU holds all 8.03e9 parameters' bf16 weights, fp32 gradients, fp32 master and two
  // fp32 Adam moments (2 + 4 + 4 + 4 + 4 = 18 bytes, or 16 with bf16 gradients): over 119 GiB; 69.7 GiB is
  // not such a run.
  r = run("observe " +
          hostile_write(dir + "/nozero.csv", head + "n,--preset llama3-8b --gpus 8 --seq 8192,reserved_peak,69.7,GiB\n") +
          " -o " + dir + "/out");
  hostile_refused(r, {"reserved_peak 69.7 GiB is below the "});
  const auto at = r.err.find("is below the ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_GE(std::stod(r.err.substr(at + 13)), 119.0) << r.err;
  EXPECT_EQ(run("observe " + hostile_write(dir + "/ok.csv", head + ok) + " -o " + dir + "/out").status, 0);
  // A record edited by hand below its state: calibrate names it.
  const std::string recs = dir + "/recs";
  ASSERT_EQ(run("observe " + data + "/observe/example-runs.csv -o " + recs).status, 0);
  auto rec = nlohmann::json::parse(slurp(recs + "/mb2.json"));
  rec["observation"]["bytes"] = 100 * hostile_mib;
  hostile_write(recs + "/mb2.json", rec.dump());
  hostile_refused(run("calibrate " + recs + " -o " + dir + "/cal.json"),
                  {"mb2.json", "reserved_peak 0.10 GiB is below the", "the problem does not describe"});
  EXPECT_FALSE(fs::exists(dir + "/cal.json"));
}

// A sidecar that contradicts itself is refused naming the file and the field.
TEST(CliHostile, InconsistentSidecarNamesItsField) {
  const std::string dir = hostile_dir("sidecar");
  const std::string snap = hostile_snapshot_in(dir);
  const std::string side = snap + ".headroom.json";
  auto with = [&](const std::function<void(nlohmann::json&)>& edit) {
    auto j = hostile_sidecar();
    edit(j);
    hostile_write(side, j.dump());
    return run("snapshot " + snap);
  };
  hostile_refused(with([](nlohmann::json& j) { j["at_end"]["outside_allocator"] = -5 * hostile_mib; }),
                  {"snapshot.pickle.headroom.json: at_end.outside_allocator", "negative"});
  hostile_refused(with([](nlohmann::json& j) { j["at_end"]["outside_allocator"] = std::int64_t{151} << 30; }),
                  {"at_end.outside_allocator", "larger than the GPU's total memory"});
  hostile_refused(with([](nlohmann::json& j) { j["peaks"]["max_memory_allocated"] = 500 * hostile_mib; }),
                  {"peaks.max_memory_allocated", "larger than max_memory_reserved"});
  hostile_refused(with([](nlohmann::json& j) { j["placement"]["rank"] = 3; }),
                  {"placement.world_size", "1 is not above rank 3"});
  hostile_refused(with([](nlohmann::json& j) { j["device_used_at_peak"]["bytes"] = std::int64_t{151} << 30; }),
                  {"device_used_at_peak.bytes", "larger than the GPU's total memory"});
  hostile_refused(with([](nlohmann::json& j) { j["peaks"]["max_memory_reserved"] = "442 MiB"; }),
                  {"peaks.max_memory_reserved"});
  // Against the snapshot it lies beside: torch's peaks never fall, so they hold at least what the
  // snapshot's final segments reserve and allocate.
  hostile_refused(with([](nlohmann::json& j) {
                    j["peaks"]["max_memory_reserved"] = 10 * hostile_mib;
                    j["peaks"]["max_memory_allocated"] = 5 * hostile_mib;
                  }),
                  {"peaks.max_memory_reserved", "is below the", "the snapshot's own segments reserve at its end"});
  hostile_refused(with([](nlohmann::json& j) { j["device_used_at_peak"]["bytes"] = 100 * hostile_mib; }),
                  {"device_used_at_peak.bytes", "is below the", "max_memory_reserved"});
  // A total the named device does not have (an H200's sidecar stating 80 GiB): planner/gpu_types.hpp.
  hostile_refused(with([](nlohmann::json& j) { j["gpu"]["total_memory"] = std::int64_t{80} << 30; }),
                  {"gpu.total_memory", "is not the memory of a NVIDIA H200"});
  // A launcher that set a rank and no world size (the capture tool writes null): an unknown world, read.
  auto unknown_world = with([](nlohmann::json& j) {
    j["placement"]["rank"] = 3;
    j["placement"]["world_size"] = nullptr;
  });
  EXPECT_EQ(unknown_world.status, 0) << unknown_world.err;
  EXPECT_NE(unknown_world.out.find("rank 3 of an unknown world"), std::string::npos) << unknown_world.out;
  // The consistent one is read.
  auto r = with([](nlohmann::json&) {});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  // Settings that differ from the snapshot's own (it recorded PYTORCH_CUDA_ALLOC_CONF ''): PyTorch records
  // the last string its allocator parsed, which _set_allocator_settings may change at run time, so this
  // is a warning and the replay keeps the snapshot's settings.
  r = with([](nlohmann::json& j) { j["allocator"]["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"; });
  EXPECT_EQ(r.status, 0) << r.err;
  // The sidecar is named; a deep checkout's folders may be written ".../" to keep the line (cli/one_line.hpp).
  EXPECT_EQ(r.err.rfind("warning: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(side.substr(side.rfind('/') + 1) + ": allocator."), std::string::npos) << r.err;
  for (const char* part : {"allocator.PYTORCH_CUDA_ALLOC_CONF 'expandable_segment", "the replay uses the snapshot's"})
    EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("expandable_segments off"), std::string::npos) << r.out;
}

// A record whose snapshot_view is malformed fails the report, naming the record and the field; no page.
TEST(CliHostile, MalformedSnapshotViewFailsTheReport) {
  const std::string dir = hostile_dir("view");
  const std::string snap = hostile_snapshot_in(dir);
  const std::string rec = dir + "/rec.json";
  ASSERT_EQ(run("snapshot " + snap + " --json " + rec).status, 0);
  auto j = nlohmann::json::parse(slurp(rec));
  ASSERT_TRUE(j.contains("snapshot_view"));
  EXPECT_EQ(run("report " + rec + " -o " + dir + "/ok.html").status, 0);
  j["snapshot_view"]["columns"] = "many";
  hostile_write(rec, j.dump());
  hostile_refused(run("report " + rec + " -o " + dir + "/r.html"), {"rec.json: snapshot_view.columns"});
  EXPECT_FALSE(fs::exists(dir + "/r.html"));
  j["snapshot_view"] = 5;
  hostile_write(rec, j.dump());
  hostile_refused(run("report " + rec + " -o " + dir + "/r.html"), {"rec.json: snapshot_view", "must be an object"});
  // Every reader of records refuses it, not only the report that draws it.
  hostile_refused(run("compare " + rec + " " + rec), {"rec.json: snapshot_view", "must be an object"});
}

// A calibration whose field has the wrong type: the file is named, no "[json.exception...]" tag.
TEST(CliHostile, WrongTypesNameTheFileWithoutLibraryText) {
  const std::string dir = hostile_dir("types");
  auto cal = nlohmann::json::parse(slurp(data + "/calibration_h200_example.json"));
  cal["margin_bytes"] = "lots";
  const std::string f = hostile_write(dir + "/cal.json", cal.dump());
  hostile_refused(run("plan --preset llama3-8b --gpus 8 --calibration " + f), {"cal.json", "malformed calibration"});
  // A record whose field has the wrong type, or whose case a reader refuses by its field alone.
  const std::string recs = dir + "/recs";
  ASSERT_EQ(run("observe " + data + "/observe/example-runs.csv -o " + recs).status, 0);
  auto rec = nlohmann::json::parse(slurp(recs + "/mb1.json"));
  rec["measured"] = "yes";
  hostile_write(recs + "/mb1.json", rec.dump());
  hostile_refused(run("calibrate " + recs + " -o " + dir + "/c.json"), {recs + "/mb1.json: a value of the wrong type"});
  hostile_refused(run("report " + recs + " -o " + dir + "/r.html"), {recs + "/mb1.json: a value of the wrong type"});
  rec["measured"] = true;
  rec["inputs"]["device"]["reserve"] = -1;
  hostile_write(recs + "/mb1.json", rec.dump());
  hostile_refused(run("calibrate " + recs + " -o " + dir + "/c.json"), {recs + "/mb1.json: reserve"});
}

// CSV: Excel's byte order mark is no part of the header; an unclosed quote is named at its row and line.
TEST(CliHostile, CsvByteOrderMarkAndUnclosedQuote) {
  const std::string dir = hostile_dir("csv");
  const std::string rows = "name,problem,figure,value,unit\n"
                           "a,--preset llama3-8b --gpus 8 --zero 3 --seq 8192,reserved_peak,69.7,GiB\n";
  const std::string bom = hostile_write(dir + "/bom.csv", "\xEF\xBB\xBF" + rows);
  auto r = run("observe " + bom + " -o " + dir + "/out");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir + "/out/a.json"));
  const std::string open = hostile_write(
      dir + "/open.csv", rows + "b,\"--preset llama3-8b --gpus 8,reserved_peak,69.7,GiB\nc,x,reserved_peak,1,GiB\n");
  hostile_refused(run("observe " + open + " -o " + dir + "/out2"),
                  {"open.csv: row 2", "a quoted field is not closed: it opened on line 3"});
}

// Words that are no option or value: no suggestion for "----", and an empty argument refused.
TEST(CliHostile, ArgumentsThatAreNoWords) {
  auto r = run("----");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err.find("did you mean"), std::string::npos) << r.err;
  r = run("plan --preset llama3-8b ---- --gpus 8");
  EXPECT_EQ(r.err.find("did you mean"), std::string::npos) << r.err;
  hostile_refused(run("plan \"\""), {"argument 2 is empty (after 'plan')"});
  hostile_refused(run("plan --preset llama3-8b --gpus 8 \"\""), {"argument 6 is empty (after '8')"});
  EXPECT_NE(run("plan --preset llama3-8b --gpus 8").status, 2);
}

// A comma-separated value with an empty item would plan another list than the one given (CLI11 drops the
// empty item): refused, naming the option and the value, on the command line and in an observed row's flags.
TEST(CliHostile, EmptyItemInACommaSeparatedValue) {
  const std::string plan = "plan --preset llama3-8b --gpus 8 --gpu-mem 80GiB ";
  hostile_refused(run(plan + "--suggest --recipes bf16-adam,,fp32-adam"),
                  {"bad input: recipes: 'bf16-adam,,fp32-adam' has an empty item"});
  hostile_refused(run(plan + "--suggest --recipes=bf16-adam,"), {"recipes: 'bf16-adam,' has an empty item"});
  hostile_refused(run(plan + "--pp 4 --pp-layout ,8,8,8,8"), {"pp-layout: ',8,8,8,8' has an empty item"});
  hostile_refused(run(plan + "--recompute selective --recompute-modules core_attn,,mlp"),
                  {"recompute-modules: 'core_attn,,mlp'"});
  // A list given over several words, or in brackets, as CLI11 takes it.
  hostile_refused(run(plan + "--pp 4 --pp-layout 8 8,,8 8"), {"pp-layout: '8,8,,8,8' has an empty item"});
  hostile_refused(run(plan + "--pp 4 --pp-layout 8 8 8 8,"), {"pp-layout: '8,8,8,8,' has an empty item"});
  hostile_refused(run(plan + "--pp 4 --pp-layout [,8,8,8,8]"), {"pp-layout: ',8,8,8,8' has an empty item"});
  hostile_refused(run(plan + "--suggest --recipes bf16-adam fp32-adam,"),
                  {"recipes: 'bf16-adam,fp32-adam,'"});
  // The same lists without an empty item are taken, however spaced.
  EXPECT_EQ(run(plan + "--suggest --recipes bf16-adam,fp32-adam").status, 0);
  for (const char* layout : {"8, 8, 8, 8", "8 8 8 8", "[8,8,8,8]", "8,8 ,8,8"}) {
    const auto r = run(plan + "--pp 4 --pp-layout " + layout);
    EXPECT_NE(r.status, 2) << layout << ": " << r.err;  // planned (it does not fit 80 GiB here: exit 3)
  }
  // Words after `--` belong to no option.
  EXPECT_EQ(run("calibrate -- --recipes=a,").err.find("empty item"), std::string::npos);
  // A comma inside another option's value is that option's business (a --megatron-args string, a name).
  EXPECT_NE(run(plan + "--tp 2 --seq 8,192").err.find("seq"), std::string::npos);
  const std::string dir = hostile_dir("empty-item");
  const std::string csv =
      hostile_write(dir + "/rows.csv",
                    "name,problem,figure,value,unit\n"
                    "a,\"--preset llama3-8b --gpus 8 --pp 4 --pp-layout 8,8,,8,8\",reserved_peak,69.7,GiB\n");
  hostile_refused(run("observe " + csv + " -o " + dir + "/out"),
                  {"rows.csv: row 1", "pp-layout", "empty item"});
  // Quoted after '=' in a row's flags: the quotes are no part of the list.
  const std::string quoted = hostile_write(
      dir + "/quoted.csv",
      "name,problem,figure,value,unit\n"
      "a,\"--preset llama3-8b --gpus 8 --pp 4 --pp-layout=\"\",8,8,8,8\"\"\",reserved_peak,69.7,GiB\n");
  hostile_refused(run("observe " + quoted + " -o " + dir + "/out2"),
                  {"pp-layout: ',8,8,8,8' has an empty item"});
}
