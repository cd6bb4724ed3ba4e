// pickle_reader_test.cpp: the pickle subset reader on hand-assembled streams (each opcode as
// CPython's pickletools documents it), on refusals (globals, reduce, unknown opcodes), on truncated and
// corrupted files, and on a real snapshot cut at every length.
#include "probes/snapshots/pickle_reader.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "planner/errors.hpp"
#include "test_support.hpp"

namespace headroom::probes {
namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s.push_back(static_cast<char>(c));
  return s;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// {"a": [1, -2, 300, 70000, True, None, 1.5, "x"], "b": (7, 8)} as protocol 4 writes it, by hand.
TEST(PickleReader, ReadsEveryPlainOpcode) {
  const std::string p = bytes({0x80, 4,    '}',  0x94, '(',              // PROTO 4, EMPTY_DICT, MEMOIZE, MARK
                               0x8c, 1,    'a',  0x94, ']',  0x94, '(',  // "a", EMPTY_LIST, MARK
                               'K',  1,                                  // BININT1 1
                               'J',  0xfe, 0xff, 0xff, 0xff,             // BININT -2
                               'M',  0x2c, 0x01,                         // BININT2 300
                               0x8a, 3,    0x70, 0x11, 0x01,             // LONG1 70000
                               0x88, 'N',                                // NEWTRUE, NONE
                               'G',  0x3f, 0xf8, 0,    0,    0,    0,   0,    0,  // BINFLOAT 1.5
                               'X',  1,    0,    0,    0,    'x',                 // BINUNICODE "x"
                               'e',                                               // APPENDS
                               0x8c, 1,    'b',  'K',  7,    'K',  8,   0x86,     // "b", (7, 8)
                               'u',  '.'});                                       // SETITEMS, STOP
  const pdoc d = read_pickle(p, "test");
  ASSERT_EQ(d.at(d.root).k, pnode::kind::dict);
  auto a = d.get(d.root, "a");
  ASSERT_TRUE(a);
  const auto& items = d.at(*a).kids;
  ASSERT_EQ(items.size(), 8u);
  EXPECT_EQ(d.integer(items[0]), 1);
  EXPECT_EQ(d.integer(items[1]), -2);
  EXPECT_EQ(d.integer(items[2]), 300);
  EXPECT_EQ(d.integer(items[3]), 70000);
  EXPECT_EQ(d.at(items[4]).k, pnode::kind::boolean);
  EXPECT_EQ(d.at(items[5]).k, pnode::kind::none);
  EXPECT_DOUBLE_EQ(d.at(items[6]).f, 1.5);
  EXPECT_EQ(d.string(items[7]), "x");
  auto b = d.get(d.root, "b");
  ASSERT_TRUE(b);
  EXPECT_EQ(d.at(*b).k, pnode::kind::tuple);
  EXPECT_EQ(d.integer(d.at(*b).kids[1]), 8);
}

// The memo shares one value: a dict memoised empty and filled later is seen filled through BINGET.
TEST(PickleReader, MemoSharesValuesByReference) {
  const std::string p = bytes({0x80, 4,    ']',  0x94, '(',               // outer list, memo 0
                               '}',  0x94,                                // inner dict, memo 1
                               'h',  1,                                   // BINGET 1: the same dict again
                               'e',                                       // APPENDS: [d, d]
                               'h',  1,    0x8c, 1,    'k', 'K', 5, 's',  // d["k"] = 5 after it was shared
                               '0',  '.'});                               // POP the dict, STOP with the list
  const pdoc d = read_pickle(p, "test");
  const auto& l = d.at(d.root).kids;
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0], l[1]);
  EXPECT_EQ(d.integer(*d.get(l[1], "k")), 5);
}

// Containers grown in several batches with others stored in between (CPython writes APPENDS and SETITEMS
// 1000 items at a time, each item built before its batch) keep every item, in order.
TEST(PickleReader, ContainersGrownInBatchesKeepTheirItems) {
  const std::string p = bytes({0x80, 4,    ']',  0x94, '(', 'K', 1,   'K', 2,   'e',  // L = [1, 2], memo 0
                               ']',  0x94, '(',  'K',  9,   'K', 8,   'e',            // M = [9, 8], memo 1
                               '0',                                                   // POP M
                               '(',  'K',  3,    'K',  4,   'K', 5,   'e',            // L += [3, 4, 5]
                               '}',  0x94, 0x8c, 1,    'k', 'K', 6,   's',            // D = {"k": 6}, memo 2
                               '0',  'h',  1,    'K',  7,   'a', '0',                 // M.append(7)
                               '(',  'h',  1,    'h',  2,   'e',                      // L += [M, D]
                               'h',  2,    '(',  0x8c, 1,   'm', 'K', 10,  'u', '0',  // D["m"] = 10
                               '.'});
  const pdoc d = read_pickle(p, "test");
  const auto l = d.at(d.root).kids;
  ASSERT_EQ(l.size(), 7u);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(d.integer(l[i]), static_cast<std::int64_t>(i + 1));
  const auto m = d.at(l[5]).kids;
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(d.integer(m[0]), 9);
  EXPECT_EQ(d.integer(m[1]), 8);
  EXPECT_EQ(d.integer(m[2]), 7);
  EXPECT_EQ(d.integer(*d.get(l[6], "k")), 6);
  EXPECT_EQ(d.integer(*d.get(l[6], "m")), 10);
}

// A list that contains itself (legal in Python) is stored once, without leaking or looping.
TEST(PickleReader, SelfReferenceIsHarmless) {
  const pdoc d = read_pickle(bytes({0x80, 2, ']', 'q', 0, 'h', 0, 'a', '.'}), "test");
  EXPECT_EQ(d.at(d.root).kids.size(), 1u);
  EXPECT_EQ(d.at(d.root).kids[0], d.root);
}

TEST(PickleReader, WideAndNegativeIntegers) {
  // LONG1 of 9 bytes: 2^64 (beyond int64): kept as an approximate double, refused as an integer.
  const pdoc d = read_pickle(bytes({0x80, 2, 0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0, 1, '.'}), "test");
  EXPECT_TRUE(d.at(d.root).wide);
  EXPECT_DOUBLE_EQ(d.at(d.root).f, 18446744073709551616.0);
  EXPECT_FALSE(d.integer(d.root));
  // LONG1 0xff: -1; LONG1 of length 0: 0.
  const pdoc minus_one = read_pickle(bytes({0x80, 2, 0x8a, 1, 0xff, '.'}), "t");
  EXPECT_EQ(minus_one.integer(minus_one.root), -1);
  const pdoc zero = read_pickle(bytes({0x80, 2, 0x8a, 0, '.'}), "t");
  EXPECT_EQ(zero.integer(zero.root), 0);
}

// Anything that would execute or reference code is refused with a line that says so.
TEST(PickleReader, RefusesCodeAndUnknownOpcodes) {
  const struct {
    std::string p;
    const char* says;
  } cases[] = {
      {bytes({0x80, 2, 'c', 'o', 's', '\n', 's', 'y', 's', 't', 'e', 'm', '\n', '.'}), "never loads code"},
      {bytes({0x80, 4, 0x8c, 1, 'o', 0x8c, 1, 's', 0x93, '.'}), "never loads code"},
      {bytes({0x80, 2, 'N', ')', 'R', '.'}), "never executes"},
      {bytes({0x80, 2, 'N', '}', 'b', '.'}), "never executes"},
      {bytes({0x80, 2, 0xff, '.'}), "unknown opcode 0xff"},
      {bytes({0x80, 9, 'N', '.'}), "protocol 9"},
      {bytes({0x80, 2, 'I', '1', '\n', '.'}), "unknown opcode"},
      {bytes({0x80, 4, 0x8f, '.'}), "a set"},
  };
  for (const auto& c : cases) {
    try {
      read_pickle(c.p, "evil.pickle");
      ADD_FAILURE() << "accepted " << c.says;
    } catch (const bad_input& e) {
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("evil.pickle"), std::string::npos);
    }
  }
}

TEST(PickleReader, MalformedStreamsAreBadInput) {
  const std::string cases[] = {
      bytes({0x80, 2}),                                         // no STOP
      bytes({0x80, 2, 'X', 0xff, 0xff, 0xff, 0x7f, 'a', '.'}),  // a string longer than the file
      bytes({0x80, 2, 'h', 3, '.'}),                            // memo never stored
      bytes({0x80, 2, 'a', '.'}),                               // APPEND on an empty stack
      bytes({0x80, 2, 'N', 'N', '.'}),                          // two values at STOP
      bytes({0x80, 2, 'N', 'K', 1, 's', '.'}),                  // SETITEM on a non-dict (stack too short)
      bytes({0x80, 2, 'K', 1, ']', 'K', 1, 'K', 2, 's', '.'}),  // SETITEM on a list
      bytes({0x80, 2, 'e', '.'}),                               // APPENDS without a mark
      bytes({0x80, 2, '(', '.'}),                               // a mark left open
      bytes({0x80, 2, 0x8b, 0xff, 0xff, 0xff, 0xff, '.'}),      // LONG4 with a negative length
      bytes({0x80, 2, 'r', 0xff, 0xff, 0xff, 0xff, '.'}),       // memo index beyond the limit, empty stack
  };
  for (const auto& c : cases) EXPECT_THROW(read_pickle(c, "bad"), bad_input);
}

// A real snapshot cut at every length up to 64 KiB, and with random bytes flipped: never anything but a
// document or bad_input.
TEST(PickleReader, TruncatedAndCorruptedSnapshotsNeverCrash) {
  const std::string real = slurp(data + "/snapshots/NiuHuangxiaozi__forward_memory_snapshot_100.pickle");
  ASSERT_GT(real.size(), 100000u);
  EXPECT_NO_THROW(read_pickle(real, "real"));
  for (std::size_t n = 0; n < 65536; n += 37) EXPECT_THROW(read_pickle(real.substr(0, n), "cut"), bad_input);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string c = real.substr(0, 20000 + static_cast<std::size_t>(trial) * 50);
    for (int k = 0; k < 8; ++k) c[rng() % c.size()] = static_cast<char>(rng());
    c += '.';
    try {
      read_pickle(c, "corrupt");
    } catch (const bad_input&) {
    }
  }
}

}  // namespace
}  // namespace headroom::probes
