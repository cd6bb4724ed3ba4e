// format_test.cpp: the number formats of docs/reference-case.md.
#include "planner/format.hpp"

#include <gtest/gtest.h>

#include "planner/units.hpp"

namespace headroom {
namespace {

TEST(Format, SeedNotation) {
  EXPECT_EQ(eng(175e9), "175e9");
  EXPECT_EQ(eng(350e9), "350e9");
  EXPECT_EQ(eng(2.8e12), "2.8e12");
  EXPECT_EQ(eng(2869166080.0), "2.869e9");
  EXPECT_EQ(eng(80), "80");
  EXPECT_EQ(trim(34.0), "34");
  EXPECT_EQ(trim(2.5), "2.5");
  EXPECT_EQ(gib_str(2'800'000'000'000LL), "2607.7");
  EXPECT_EQ(gib_str(2LL * 2048 * 12288 * 114 / 2, 3), "2.672");
  EXPECT_EQ(fixed(-0.01, 1), "0.0");
}

TEST(Format, TableCellsAndMiB) {
  EXPECT_EQ(gib_cell(2'800'000'000'000LL, 8), "  2607.7");
  EXPECT_EQ(gib_cell(10 * gib, 10), "      10.0");
  EXPECT_EQ(fixed_width(-0.01, 6, 1), "  -0.0");  // printf's %6.1f: a table keeps the sign
  EXPECT_EQ(fixed_width(12.345, 0, 1), "12.3");
  EXPECT_EQ(mib_str(1056 * mib, 0), "1056");
  EXPECT_EQ(mib_str(mib / 2), "0.5");
  EXPECT_EQ(to_mib(3 * mib), 3.0);
}

}  // namespace
}  // namespace headroom
