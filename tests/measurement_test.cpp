// measurement_test.cpp: the measurement record: where the peaks happened, the implied reserve, and the
// JSON fields results/README.md documents.
#include "probes/cases/measurement.hpp"
#include "probes/records/envelope.hpp"

#include <gtest/gtest.h>

#include "planner/errors.hpp"
#include "probes/allocators/caching_allocator.hpp"
#include "probes/devices/sim_device.hpp"
#include "test_support.hpp"

namespace headroom::probes {
namespace {

TEST(Measurement, RecordsPeaksImpliedReserveAndWhatWasNotMeasured) {
  const problem p = test::preset_problem("gpt3-1.3b");
  layout l;
  l.gpus = 4;
  l.zero = 2;
  l.recompute = recompute_mode::selective;
  const breakdown b = estimate(p, l);
  const step_trace t = build_trace(p, l, 0);
  sim_device dev(p.device.capacity, 2 * mib);
  caching_allocator a(dev, {});
  const replay_result r = replay(t, a, true);
  const measurement m = measure(t, b.stages[0], r, "sim", dev.describe(), a.describe());
  EXPECT_EQ(m.implied_reserve(), r.reserved.bytes - (b.stages[0].persistent + b.stages[0].activations));
  EXPECT_EQ(m.peak_reserved_at.index, r.reserved.event);
  EXPECT_FALSE(m.oom_at);
  const auto j = measurement_to_json(m, nlohmann::json::object(), {"headroom probe ...", std::nullopt});
  EXPECT_EQ(j["schema"], records::schema_of(records::kind::measurement));
  EXPECT_EQ(j["tool"], "headroom");  // the envelope
  EXPECT_EQ(j["tool_version"], records::tool_version());
  EXPECT_FALSE(j["created"].get<std::string>().empty());
  EXPECT_TRUE(j["environment"]["gpu"].is_null());  // the sim backend has no GPU stack
  EXPECT_TRUE(j["environment"]["nccl"].is_null());
  EXPECT_TRUE(j["device_memory"].is_null());
  EXPECT_TRUE(j["verification"].is_null());
  EXPECT_FALSE(j["measured"].get<bool>());
  EXPECT_EQ(j["environment"]["command_line"], "headroom probe ...");
  EXPECT_EQ(j["replayed"]["peak_requested_bytes"].get<std::int64_t>(), b.stages[0].step_peak);
  EXPECT_TRUE(j["replayed"]["out_of_memory"].is_null());
  EXPECT_TRUE(j["fixed_overheads"]["nccl_bytes"].is_null());
  // The replay's timeline travels with the record (the report draws it) and reads back.
  ASSERT_TRUE(j["timeline"].is_object());
  EXPECT_LE(j["timeline"]["columns"].size(), 400u);
}

TEST(Measurement, AGpuRecordStatesDeviceUsedBesideReservedAndItsStack) {
  const problem p = test::preset_problem("gpt3-125m");
  const layout l = test::make_layout(8, 1, recompute_mode::selective);
  const breakdown b = estimate(p, l);
  const step_trace t = build_trace(p, l, 0);
  sim_device dev(p.device.capacity, 2 * mib);
  caching_allocator a(dev, {});
  replay_result r = replay(t, a, false);
  r.device_used_at_peak = r.reserved.bytes + 700 * mib;  // as a GPU would show: context and more outside
  r.verified = verification{3, 3, 300, 300, 2, 1};
  measurement m = measure(t, b.stages[0], r, "cuda", "cuda (test)", a.describe());
  m.truth = device_memory_truth{600 * mib, 1100 * mib, 140 * gib, std::nullopt};
  m.throughput = touch_throughput{3500, 4300, gib};
  environment env{"headroom probe --backend cuda",
                  gpu_environment{"NVIDIA H200", "0000:00:00.0", "580.159.04", "13.0", "2.28.9"}};
  const auto j = measurement_to_json(m, nlohmann::json::object(), env);
  EXPECT_TRUE(j["measured"].get<bool>());
  EXPECT_EQ(j["environment"]["gpu"], "NVIDIA H200");
  EXPECT_EQ(j["environment"]["driver"], "580.159.04");
  EXPECT_EQ(j["environment"]["nccl"], "2.28.9");
  EXPECT_EQ(j["device_memory"]["used_minus_reserved_at_peak_bytes"].get<std::int64_t>(), 700 * mib);
  EXPECT_EQ(j["device_memory"]["nvml_used_before_context_bytes"].get<std::int64_t>(), 600 * mib);
  EXPECT_EQ(j["verification"]["mismatched_words"].get<std::int64_t>(), 2);
  EXPECT_EQ(j["verification"]["first_mismatch_tensor"], t.tensors[1].name);
  EXPECT_NEAR(j["throughput"]["ratio"].get<double>(), 3500.0 / 4300.0, 1e-12);
}

// A record reads back into exactly the problem and layout it was made for: re-estimating gives its figures.
TEST(Measurement, RecordReadsBackIntoTheSameCase) {
  problem p = test::preset_problem("gpt3-1.3b");
  p.training.seq = 4096;
  p.training.split.first_stage = 10;
  p.device.reserve.fragmentation = 0.25;
  layout l;
  l.gpus = 8;
  l.pp = 2;
  l.zero = 1;
  l.recompute = recompute_mode::full;
  const breakdown b = estimate(p, l);
  const step_trace t = build_trace(p, l, 0);
  sim_device dev(p.device.capacity, 2 * mib);
  caching_allocator a(dev, {});
  const measurement m = measure(t, b.stages[0], replay(t, a, true), "sim", dev.describe(), a.describe());
  const auto j = measurement_to_json(m, record_inputs(p, l), {"headroom probe ...", std::nullopt});
  const measurement_record r = measurement_from_json(nlohmann::json::parse(j.dump()), "record.json");
  EXPECT_EQ(r.kind, "probe");
  // The timeline reads back as written: the reserved peak is its largest column, every event covered.
  ASSERT_TRUE(r.timeline && m.timeline);
  EXPECT_EQ(r.timeline->events, static_cast<std::int64_t>(t.events.size()));
  EXPECT_EQ(r.timeline->columns.back().end, r.timeline->events);
  std::int64_t most = 0;
  for (const auto& c : r.timeline->columns) most = std::max(most, c.reserved);
  EXPECT_EQ(most, m.replayed.reserved.bytes);
  EXPECT_EQ(r.timeline->phases.front().phase, "state");
  EXPECT_FALSE(r.measured);
  ASSERT_TRUE(r.inputs && r.where);
  EXPECT_EQ(r.where->pp, 2);
  EXPECT_EQ(r.where->recompute, recompute_mode::full);
  EXPECT_EQ(r.inputs->training.split.first_stage, 10);
  EXPECT_DOUBLE_EQ(r.inputs->device.reserve.fragmentation, 0.25);
  const breakdown again = estimate(*r.inputs, *r.where);
  EXPECT_EQ(again.stages[0].total, b.stages[0].total);
  EXPECT_EQ(r.persistent, b.stages[0].persistent);
  EXPECT_EQ(r.peak_reserved, m.replayed.reserved.bytes);
  // Unknown majors and foreign documents are refused by name.
  auto bad = j;
  bad["schema"] = "headroom.measurement/2.0";
  EXPECT_THROW(measurement_from_json(bad, "x"), bad_input);
  EXPECT_THROW(measurement_from_json(nlohmann::json{{"schema", "other/1"}}, "x"), bad_input);
  EXPECT_THROW(measurement_from_json(nlohmann::json::array(), "x"), bad_input);
}

// A snapshot record whose device lacks its reserved peak (or is not an object) is bad input naming the
// field; the reader never looks a missing key up through a const operator[] (a fuzz input found that).
TEST(Measurement, SnapshotRecordWithoutItsPeakIsBadInput) {
  nlohmann::json j = {{"schema", "headroom.measurement/1.2"},
                      {"backend", "pytorch-snapshot"},
                      {"devices", {{{"peak_reservedcounts", {{"bytes", 1}}}}}}};
  try {
    (void)measurement_from_json(j, "rec.json");
    FAIL() << "accepted a record without peak_reserved";
  } catch (const bad_input& e) {
    EXPECT_NE(std::string(e.what()).find("peak_reserved"), std::string::npos) << e.what();
  }
  j["devices"] = {7};
  EXPECT_THROW((void)measurement_from_json(j, "rec.json"), bad_input);
  j["devices"] = {{{"peak_reserved", {{"bytes", 123}}}}};
  EXPECT_EQ(measurement_from_json(j, "rec.json").peak_reserved, 123);
}

}  // namespace
}  // namespace headroom::probes
