// compare_test.cpp: calibrate/compare.hpp, what moved between two record sets of the same problems from two
// environments. The snapshot sets are records of real PyTorch snapshots (tests/data/snapshots, made as
// `headroom snapshot FILE --json` makes them), the second with a planted regression and a new driver; the
// expected verdicts come from what was planted, not from the comparison.
#include "calibrate/compare.hpp"
#include "planner/errors.hpp"

#include <gtest/gtest.h>

#include "calibrate_support.hpp"
#include "probes/snapshots/snapshot.hpp"
#include "probes/snapshots/snapshot_record.hpp"
#include "probes/snapshots/summary.hpp"

namespace headroom::calibrate {
namespace {

using namespace test_records;

TEST(Compare, FlagsExactlyThePlantedRegressions) {
  std::vector<measurement_record> base = {simple("gpt3-1.3b", 40 * gib, 0.10),
                                          simple("gpt3-2.7b", 60 * gib, 0.20),
                                          simple("gpt3-6.7b", 70 * gib, 0.05)};
  auto fresh = base;
  fresh[0].peak_reserved += 5 * gib;             // regression: +12.5%
  fresh[1].peak_reserved += 32 * mib;            // moved, within 2% / 64 MiB
  fresh[2].fragmentation = 0.15;                 // regression: +10 points
  fresh.push_back(simple("llama2-7b", gib, 0));  // only in the new set
  const comparison c = compare(base, fresh, {});
  EXPECT_EQ(c.regressions, 2);
  EXPECT_EQ(c.improved, 0);
  EXPECT_EQ(c.moved.size(), 3u);
  ASSERT_EQ(c.only_new.size(), 1u);
  EXPECT_TRUE(c.only_baseline.empty());
  EXPECT_TRUE(c.paired.empty());
  for (const auto& m : c.moved) {
    if (m.figure == "peak reserved" && m.key.find("gpt3-2.7b") != std::string::npos) {
      EXPECT_FALSE(m.exceeds);
      EXPECT_DOUBLE_EQ(m.allowed, 0.02 * 60 * gib);  // 2% of 60 GiB is more than 64 MiB
    }
    if (m.figure == "peak reserved" && m.key.find("gpt3-1.3b") != std::string::npos) {
      EXPECT_TRUE(m.exceeds);
      EXPECT_TRUE(m.worse);
    }
    if (m.figure == "fragmentation at the reserved peak") {
      EXPECT_TRUE(m.exceeds);
      EXPECT_EQ(m.unit, figure_unit::fraction);
    }
  }
  EXPECT_EQ(compare(base, base, {}).moved.size(), 0u);
}

// A figure that shrank beyond the tolerance is listed as improved, and is not a regression.
// Two records of one case on a side: one of them would go unread (a regression in it unseen), so the set is
// refused, naming both.
TEST(Compare, TwoRecordsOfOneCaseAreRefusedNotCollapsed) {
  std::vector<measurement_record> base = {simple("gpt3-1.3b", 40 * gib, 0.10)};
  auto twice = base;
  twice.push_back(base[0]);
  twice[0].origin = "a.json";
  twice[1].origin = "b.json";
  twice[1].peak_reserved *= 2;
  try {
    (void)compare(base, twice, {});
    ADD_FAILURE() << "two records of one case were compared";
  } catch (const bad_input& e) {
    EXPECT_NE(std::string(e.what()).find("'a.json' and 'b.json'"), std::string::npos) << e.what();
  }
}

TEST(Compare, AShrunkFigureIsImprovedNotARegression) {
  const std::vector<measurement_record> base = {simple("gpt3-1.3b", 40 * gib, 0.10)};
  auto fresh = base;
  fresh[0].peak_reserved -= 4 * gib;
  const comparison c = compare(base, fresh, {});
  ASSERT_EQ(c.moved.size(), 1u);
  EXPECT_TRUE(c.moved[0].exceeds);
  EXPECT_FALSE(c.moved[0].worse);
  EXPECT_EQ(c.regressions, 0);
  EXPECT_EQ(c.improved, 1);
}

// The context and NCCL cost (device used - reserved) of CUDA records: a new driver whose context is 512 MiB
// larger moves it and nothing else.
TEST(Compare, ContextAndNcclCostIsDeviceUsedLessReserved) {
  auto r = simple("gpt3-1.3b", 40 * gib, 0.10);
  r.backend = "cuda";
  r.measured = true;
  r.driver = "550.54.15";
  r.device_used_at_peak = 40 * gib + 900 * mib;  // context + cuBLAS + NCCL: 900 MiB
  auto n = r;
  n.driver = "560.28.03";
  n.device_used_at_peak = *r.device_used_at_peak + 512 * mib;
  const comparison c = compare({r}, {n}, {});
  // The context cost grew by 512 MiB (beyond 64 MiB); the device used by the same 512 MiB, within 2% of it.
  EXPECT_EQ(c.regressions, 1);
  bool context = false;
  for (const auto& m : c.moved) {
    EXPECT_NE(m.figure, "peak reserved");
    if (m.figure == "context and NCCL (device used - reserved)") {
      context = true;
      EXPECT_DOUBLE_EQ(m.old_value, 900.0 * mib);
      EXPECT_DOUBLE_EQ(m.new_value, 1412.0 * mib);
      EXPECT_TRUE(m.exceeds);
    }
  }
  EXPECT_TRUE(context);
  ASSERT_EQ(c.environment_changes.size(), 1u);
  EXPECT_EQ(c.environment_changes[0], "driver: 550.54.15 -> 560.28.03");
}

// Returns the record `headroom snapshot FILE --json` writes for tests/data/snapshots/`name`, as read back,
// stating `driver` in its environment block.
nlohmann::json compare_snapshot_json(const std::string& name, const std::string& driver) {
  const auto s = probes::load_snapshot(std::string(HEADROOM_TEST_DATA) + "/snapshots/" + name);
  nlohmann::json j = probes::snapshot_record(s, probes::summarise(s));
  j["environment"] = {{"gpu", "NVIDIA GeForce RTX 3090"}, {"driver", driver}, {"cuda_runtime", "12.1"}};
  return j;
}

const char* const compare_snapshots[] = {
    "NiuHuangxiaozi__forward_memory_snapshot_100.pickle",
    "NiuHuangxiaozi__forward_memory_snapshot_200_mixed_precision.pickle"};

std::vector<measurement_record> compare_snapshot_set(const std::vector<nlohmann::json>& docs) {
  std::vector<measurement_record> out;
  for (std::size_t i = 0; i < docs.size(); ++i)
    out.push_back(probes::measurement_from_json(docs[i], "set/" + std::string(compare_snapshots[i])));
  return out;
}

// Two sets of records of the same two real snapshots, the second from a new driver with a planted regression:
// record 0 reserves 1 GiB more in 3 more segments, record 1's fragmentation at the peak is 10 points worse.
// Exactly those figures are regressions, the driver is named as what changed, and the same set compared with
// itself moves nothing.
TEST(Compare, SnapshotRecordsOfANewDriverWithAPlantedRegression) {
  std::vector<nlohmann::json> base_docs, new_docs;
  for (const char* f : compare_snapshots) {
    base_docs.push_back(compare_snapshot_json(f, "535.104.05"));
    new_docs.push_back(compare_snapshot_json(f, "550.54.15"));
  }
  ASSERT_TRUE(base_docs[0]["snapshot_view"]["segments_at_peak"]["count"].is_number_integer());
  const auto segments = base_docs[0]["snapshot_view"]["segments_at_peak"]["count"].get<std::int64_t>();
  auto& peak = new_docs[0]["devices"][0]["peak_reserved"]["bytes"];
  const auto reserved = peak.get<std::int64_t>();
  peak = reserved + gib;
  new_docs[0]["snapshot_view"]["segments_at_peak"]["count"] = segments + 3;
  auto& frag = new_docs[1]["devices"][0]["fragmentation_at_reserved_peak"];
  const double old_frag = frag.get<double>();
  frag = old_frag + 0.10;
  const auto base = compare_snapshot_set(base_docs), fresh = compare_snapshot_set(new_docs);

  const comparison same = compare(base, base, {});
  EXPECT_TRUE(same.moved.empty());
  EXPECT_EQ(same.regressions, 0);
  EXPECT_TRUE(same.environment_changes.empty());
  EXPECT_TRUE(same.only_baseline.empty() && same.only_new.empty());

  const comparison c = compare(base, fresh, {});
  EXPECT_TRUE(c.only_baseline.empty() && c.only_new.empty() && c.paired.empty());
  ASSERT_EQ(c.environment_changes.size(), 1u);
  EXPECT_EQ(c.environment_changes[0], "driver: 535.104.05 -> 550.54.15");
  ASSERT_EQ(c.baseline_environments.size(), 1u);
  EXPECT_EQ(c.baseline_environments[0],
            "GPU NVIDIA GeForce RTX 3090, driver 535.104.05, CUDA 12.1, torch not stated, NCCL not stated, "
            "PYTORCH_CUDA_ALLOC_CONF not stated");
  EXPECT_EQ(c.regressions, 3);
  EXPECT_EQ(c.moved.size(), 3u);
  for (const auto& m : c.moved) {
    EXPECT_TRUE(m.exceeds && m.worse) << m.figure;
    if (m.figure == "peak reserved") {
      EXPECT_EQ(m.key.find("mixed_precision"), std::string::npos) << m.key;  // record 0
      EXPECT_DOUBLE_EQ(m.new_value - m.old_value, static_cast<double>(gib));
    } else if (m.figure == "segments at the peak") {
      EXPECT_EQ(m.unit, figure_unit::count);
      EXPECT_DOUBLE_EQ(m.old_value, static_cast<double>(segments));
      EXPECT_DOUBLE_EQ(m.new_value, static_cast<double>(segments + 3));
    } else {
      EXPECT_EQ(m.figure, "fragmentation at the reserved peak");
      EXPECT_NE(m.key.find("mixed_precision.pickle"), std::string::npos) << m.key;  // record 1
      EXPECT_NEAR(m.new_value - m.old_value, 0.10, 1e-12);
    }
  }
}

// Two captures of one problem from two machines carry different file names: with one snapshot on each side,
// they are paired (and said to be), and what moved is still found.
TEST(Compare, TheOnlySnapshotOnEachSideIsPaired) {
  auto a = compare_snapshot_json(compare_snapshots[0], "535.104.05");
  auto b = compare_snapshot_json(compare_snapshots[0], "550.54.15");
  b["source"] = "/elsewhere/run_on_new_driver.pickle";
  b["devices"][0]["peak_reserved"]["bytes"] =
      b["devices"][0]["peak_reserved"]["bytes"].get<std::int64_t>() + gib;
  const comparison c =
      compare({probes::measurement_from_json(a, "a.json")}, {probes::measurement_from_json(b, "b.json")}, {});
  ASSERT_EQ(c.paired.size(), 1u);
  EXPECT_NE(c.paired[0].find("run_on_new_driver.pickle"), std::string::npos) << c.paired[0];
  EXPECT_TRUE(c.only_baseline.empty() && c.only_new.empty());
  EXPECT_EQ(c.regressions, 1);
}

}  // namespace
}  // namespace headroom::calibrate
