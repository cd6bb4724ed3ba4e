// compare_test.cpp: calibrate/compare.hpp, what moved between two record sets.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "calibrate/compare.hpp"
#include "calibrate_support.hpp"

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
  EXPECT_EQ(c.moved.size(), 3u);
  ASSERT_EQ(c.only_new.size(), 1u);
  EXPECT_TRUE(c.only_baseline.empty());
  for (const auto& m : c.moved) {
    if (m.figure == "peak reserved" && m.key.find("gpt3-2.7b") != std::string::npos) {
      EXPECT_FALSE(m.exceeds);
    }
    if (m.figure == "peak reserved" && m.key.find("gpt3-1.3b") != std::string::npos) {
      EXPECT_TRUE(m.exceeds);
    }
    if (m.figure == "fragmentation") {
      EXPECT_TRUE(m.exceeds);
    }
  }
  EXPECT_EQ(compare(base, base, {}).moved.size(), 0u);
}

}  // namespace
}  // namespace headroom::calibrate
