// cli_limits_test.cpp: runs the built `headroom` binary on hostile or careless input: documented bounds of count options, batch and option consistency, records no GPU could produce, validation pack rows, bounded cost.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_support.hpp"

namespace {

// Exit 2 with exactly one stderr line naming `field`, and nothing on stdout.
void expect_refused(const result& r, const std::string& field, const std::string& what) {
  EXPECT_EQ(r.status, 2) << what << "\n" << r.out << r.err;
  EXPECT_EQ(lines(r.err), 1) << what << "\n" << r.err;
  EXPECT_NE(r.err.find(field), std::string::npos) << what << "\n" << r.err;
  EXPECT_TRUE(r.out.empty()) << what << "\n" << r.out;
}

// Every count option has a documented bound, checked before the search builds anything from it: a huge
// --gpus-per-node, --tp or --pp is refused at once instead of listing every value up to it.
TEST(CliLimits, CountOptionsAreBounded) {
  const std::string p = "plan --preset gpt3-125m ";
  expect_refused(run(p + "--gpus 8 --suggest --gpus-per-node 2000000000"), "gpus-per-node", "gpn suggest");
  expect_refused(run(p + "--min-gpus --gpus-per-node 100000000"), "gpus-per-node", "gpn min-gpus");
  expect_refused(run(p + "--gpus 8 --gpus-per-node 1025"), "gpus-per-node", "gpn plan");
  expect_refused(run(p + "--gpus 8 --suggest --tp 2000000000"), "tp", "tp suggest");
  expect_refused(run(p + "--gpus 8 --suggest --pp 2000000000"), "pp", "pp suggest");
  expect_refused(run(p + "--gpus 20000000"), "gpus", "gpus");
  expect_refused(run(p + "--min-gpus --max-gpus 20000000"), "max-gpus", "max-gpus");
  // The bounds themselves are accepted.
  EXPECT_NE(run(p + "--gpus 8 --gpus-per-node 1024").status, 2);
}

// Megatron-LM asserts that micro-batch x dp divides the global batch, and no framework gives a data-parallel
// rank no sample: plan refuses both, and the search never ranks such a layout.
TEST(CliLimits, GlobalBatchMustSplitOverDataParallelRanks) {
  const std::string p = "plan --preset gpt3-1.3b --gpus 8 ";
  expect_refused(run(p + "--micro-batch 4 --global-batch 2"), "global-batch", "mb 4 gb 2");
  expect_refused(run(p + "--global-batch 1"), "global-batch", "gb 1 dp 8");
  expect_refused(run(p + "--micro-batch 5 --global-batch 60"), "global-batch", "5 x dp 8 = 40 does not divide 60");
  EXPECT_EQ(run(p + "--micro-batch 5 --global-batch 40").status, 0);  // 5 x 8 = 40 divides 40
  auto r = run(p + "--suggest --global-batch 7 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j["fitting"].empty()) << r.out.substr(0, 400);
  for (const auto& l : j["fitting"]) {
    EXPECT_LE(l["layout"]["dp"].get<int>() * l["micro_batch"].get<int>(), 7) << l.dump();
  }
  // The trace and the probe refuse the same layout.
  expect_refused(run("trace --preset gpt3-1.3b --gpus 8 --global-batch 4 --json " + scratch("t.json")),
                 "global-batch", "trace");
  expect_refused(run("probe replay --preset gpt3-1.3b --gpus 8 --global-batch 4"), "global-batch", "probe");
}

// The layer in use is always gathered under ZeRO-3, so zero in-flight units is no setting; optimizer offload
// moves the sharded optimizer state, so it needs ZeRO 1-3. Every command refuses both.
TEST(CliLimits, ShardingSettingsThatNoFrameworkRuns) {
  const std::string p = "plan --preset gpt3-1.3b --gpus 8 ";
  expect_refused(run(p + "--zero 3 --zero3-inflight-units 0"), "zero3-inflight-units", "units 0");
  expect_refused(run(p + "--zero 3 --zero3-inflight-units 0 --suggest"), "zero3-inflight-units", "suggest");
  expect_refused(run("probe replay --preset gpt3-1.3b --gpus 8 --zero 3 --zero3-inflight-units 0"),
                 "zero3-inflight-units", "probe");
  expect_refused(run(p + "--offload-optimizer --zero 0"), "offload-optimizer", "offload zero 0");
  expect_refused(run(p + "--offload-optimizer"), "offload-optimizer", "offload, zero defaulted to 0");
  expect_refused(run(p + "--offload-optimizer --zero 0 --suggest"), "offload-optimizer", "suggest");
  EXPECT_EQ(run(p + "--offload-optimizer --zero 1").status, 0);
  // Searched, offload starts at ZeRO 1: one GPU runs ZeRO-1 with offload (DeepSpeed's single-GPU case).
  auto r = run("plan --preset gpt3-1.3b --gpus 1 --offload-optimizer --suggest --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto fitting = nlohmann::json::parse(r.out)["fitting"];
  ASSERT_FALSE(fitting.empty());
  for (const auto& l : fitting) EXPECT_GE(l["layout"]["zero"].get<int>(), 1);
}

// A validation row is checked when it is read: a published figure of zero or one no run produced, printed
// decimals out of range, a tolerance that is no tolerance and an unknown field are bad input naming the row.
TEST(CliLimits, ValidationRowsAreValidated) {
  std::ifstream in(std::string(HEADROOM_SOURCE_DIR) + "/presets/validation/published.json");
  const auto pack = nlohmann::json::parse(in);
  nlohmann::json activations, trained;
  for (const auto& row : pack["rows"]) {
    if (row["kind"] == "layer_activations" && activations.is_null()) activations = row;
    if (row["kind"] == "trained" && row["published"].contains("params_billion") && trained.is_null())
      trained = row;
  }
  ASSERT_FALSE(activations.is_null());
  ASSERT_FALSE(trained.is_null());
  auto with = [](nlohmann::json row, const std::string& key, const nlohmann::json& v) {
    row["published"][key] = v;
    return row;
  };
  nlohmann::json unknown = activations, tolerance = activations;
  unknown["tolerence"] = 0.1;
  tolerance["tolerance"] = -1;
  const struct {
    nlohmann::json row;
    std::string says;
  } cases[] = {
      {with(activations, "bytes", 0), "published.bytes"},
      {with(activations, "bytes", -5), "published.bytes"},
      {with(activations, "bytes", 1e300), "published.bytes"},
      {with(trained, "params_billion", 0), "published.params_billion"},
      {with(trained, "params_decimals", -400), "params_decimals"},
      {with(trained, "params_decimals", 2.5), "params_decimals"},
      {unknown, "unknown field 'tolerence'"},
      {tolerance, "tolerance"},
  };
  int i = 0;
  for (const auto& c : cases) {
    const std::string path = scratch("pack" + std::to_string(i++) + ".json");
    std::ofstream(path) << nlohmann::json{{"schema", "headroom.validation/2"}, {"rows", {c.row}}}.dump();
    const auto r = run("validate --pack " + path);
    expect_refused(r, c.says, c.says);
    EXPECT_EQ(r.err.find("inf"), std::string::npos) << r.err;
  }
}

// A record whose memory figures no GPU could have produced is refused where it is read, by calibrate, compare
// and report alike, naming the record and the field.
TEST(CliLimits, RecordsNoGpuCouldProduceAreRefused) {
  const std::string dir = scratch("records");
  std::filesystem::create_directories(dir);
  for (int i = 0; i < 3; ++i) {
    const auto r = run("probe replay --preset gpt3-1.3b --gpus 8 --zero " + std::to_string(i) +
                       " --gpu-mem 80 --json " + dir + "/r" + std::to_string(i) + ".json");
    ASSERT_EQ(r.status, 0) << r.err;
  }
  auto rec = nlohmann::json::parse(slurp(dir + "/r0.json"));
  const struct {
    const char* name;
    std::function<void(nlohmann::json&)> edit;
    const char* says;
  } cases[] = {
      {"huge", [](nlohmann::json& j) { j["replayed"]["peak_reserved_bytes"] = 9e18; }, "peak_reserved_bytes"},
      {"huge_int", [](nlohmann::json& j) { j["replayed"]["peak_reserved_bytes"] = std::int64_t{9} << 60; },
       "peak_reserved_bytes"},
      {"negative", [](nlohmann::json& j) { j["replayed"]["peak_reserved_bytes"] = -1; }, "peak_reserved_bytes"},
      {"allocated", [](nlohmann::json& j) {
         j["replayed"]["peak_allocated_bytes"] = j["replayed"]["peak_reserved_bytes"].get<std::int64_t>() + 1;
       }, "peak_allocated_bytes"},
      {"fragmentation", [](nlohmann::json& j) { j["replayed"]["fragmentation"] = 7; }, "fragmentation"},
  };
  for (const auto& c : cases) {
    auto bad = rec;
    c.edit(bad);
    const std::string path = dir + "/bad.json";
    std::ofstream(path) << bad.dump();
    for (const std::string& cmd : {"calibrate " + dir + " -o " + scratch("cal.json"),
                                  "compare " + dir + " " + dir, "report " + dir + " -o " + scratch("r.html")}) {
      const auto r = run(cmd);
      expect_refused(r, c.says, std::string(c.name) + ": " + cmd);
      EXPECT_NE(r.err.find("bad.json"), std::string::npos) << r.err;
    }
  }
}

// Options that do not apply to a probe mode are refused, not ignored.
TEST(CliLimits, ProbeModesRefuseOptionsOfOtherModes) {
  const std::string snap =
      std::string(HEADROOM_SOURCE_DIR) + "/../shared/data/snapshots/sidsoc12__mem_snapshot_ctx128_fp32_train.pickle";
  for (const char* extra : {"--max-fit seq", "--trace t.json", "--preset gpt3-125m", "--zero 3"}) {
    const auto r = run("probe snapshot " + snap + " " + extra);
    EXPECT_EQ(r.status, 2) << extra << r.out << r.err;
    EXPECT_EQ(lines(r.err), 1) << extra << r.err;
  }
}

}  // namespace
