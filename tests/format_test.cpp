// format_test.cpp: the number formats of docs/reference-case.md, and the sanitiser for printed strings.
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

// Strings from files reach terminals: no control character, no forged line, no unbounded line.
TEST(Format, PrintableEscapesControlCharacters) {
  EXPECT_EQ(printable("H100 80GB HBM3"), "H100 80GB HBM3");
  EXPECT_EQ(printable("a\nheadroom: fits"), "a\\nheadroom: fits");  // a forged second line stays on the first
  EXPECT_EQ(printable(std::string("a\x1b[2Jb")), "a\\x1b[2Jb");
  EXPECT_EQ(printable(std::string("n\0ul", 4)), "n\\x00ul");
  EXPECT_EQ(printable("tab\there\r\x7f"), "tab\\there\\r\\x7f");
  // UTF-8 stays; C1 controls (CSI as U+009B), bidi overrides and bytes that are not UTF-8 are escaped.
  EXPECT_EQ(printable("Gr\xc3\xb6\xc3\x9f"
                      "e"),
            "Gr\xc3\xb6\xc3\x9f"
            "e");
  EXPECT_EQ(printable("a\xc2\x9b"
                      "2Jb"),
            "a\\u009b2Jb");
  EXPECT_EQ(printable("x\xe2\x80\xaey"), "x\\u202ey");
  EXPECT_EQ(printable("bad\xff\xc3"), "bad\\xff\\xc3");
  EXPECT_EQ(printable("over\xc0\xafl"), "over\\xc0\\xafl");  // an overlong '/'
  // Idempotent: what was escaped once prints the same again.
  const std::string once = printable("a\n\x1b");
  EXPECT_EQ(printable(once), once);
}

TEST(Format, PrintableCutsTheMiddle) {
  const std::string long_name = std::string(5029, 'g') + ".json";
  const std::string p = printable(long_name, 40);
  EXPECT_EQ(p.size(), 40u);
  EXPECT_EQ(p, std::string(19, 'g') + "..." + std::string(13, 'g') + ".json");
  EXPECT_EQ(printable(long_name).size(), printable_max);
  EXPECT_EQ(printable(std::string(printable_max, 'x')), std::string(printable_max, 'x'));
  // Escapes count at their printed width, and a cut never splits one or a UTF-8 character.
  const std::string esc = printable(std::string(100, '\x1b'), 20);
  EXPECT_LE(esc.size(), 20u);
  EXPECT_EQ(esc, "\\x1b\\x1b...\\x1b\\x1b");
  std::string umlauts;
  for (int i = 0; i < 50; ++i) umlauts += "\xc3\xbc";
  const std::string u = printable(umlauts, 11);
  EXPECT_EQ(u, "\xc3\xbc\xc3\xbc\xc3\xbc\xc3\xbc...\xc3\xbc\xc3\xbc\xc3\xbc\xc3\xbc");
}


// Issue 33 item 8: a rate in bytes reads in the largest unit that leaves at least 1 of it. 1,151,620.5 B is
// 1151620.5 / 2^20 = 1.098 MiB.
TEST(Format, BytesInReadableUnits) {
  EXPECT_EQ(bytes_str(512), "512 B");
  EXPECT_EQ(bytes_str(1000), "1000 B");
  EXPECT_EQ(bytes_str(1024), "1.00 KiB");
  EXPECT_EQ(bytes_str(1151620.5), "1.10 MiB");
  EXPECT_EQ(bytes_str(3.25 * 1024 * 1024 * 1024), "3.25 GiB");
}
}  // namespace
}  // namespace headroom
