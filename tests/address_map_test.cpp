// address_map_test.cpp: the flat address map of the snapshot walks (probes/snapshots/address_map.hpp)
// against std::map under a long random mix of inserts, overwrites, erases and lookups, with addresses
// that share their low bits as real block addresses do (so the probes collide and the backward shift of
// erase is exercised across the table's wrap-around).
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "probes/snapshots/address_map.hpp"

namespace {

using headroom::probes::address_map;

TEST(AddressMap, AgreesWithAnOrderedMapUnderRandomChurn) {
  std::mt19937_64 rng(20261201);
  address_map<std::int64_t> flat;
  std::map<std::uint64_t, std::int64_t> ref;
  // 4,096 distinct addresses, 512-byte aligned, at a CUDA-like base: the live set grows through several
  // rehashes and churns (the table never shrinks; erase shifts entries back instead).
  const auto address = [&] { return 0x7f0000000000ull + (rng() % 4096) * 512; };
  for (int step = 0; step < 400'000; ++step) {
    const std::uint64_t a = address();
    const auto op = rng() % 10;
    if (op < 4) {
      const auto v = static_cast<std::int64_t>(rng() % 1'000'000);
      flat.set(a, v);
      ref[a] = v;
    } else if (op < 8) {
      EXPECT_EQ(flat.erase(a), ref.erase(a) == 1) << "step " << step;
    } else {
      const std::int64_t* got = flat.find(a);
      const auto it = ref.find(a);
      ASSERT_EQ(got != nullptr, it != ref.end()) << "step " << step;
      if (got) {
        EXPECT_EQ(*got, it->second) << "step " << step;
      }
    }
    ASSERT_EQ(flat.size(), ref.size()) << "step " << step;
  }
  std::map<std::uint64_t, std::int64_t> listed;
  flat.for_each([&](std::uint64_t k, std::int64_t v) { listed[k] = v; });
  EXPECT_EQ(listed, ref);
}

TEST(AddressMap, ZeroIsAnAddressLikeAnyOther) {
  address_map<int> m;
  EXPECT_EQ(m.find(0), nullptr);
  m.set(0, 7);
  ASSERT_NE(m.find(0), nullptr);
  EXPECT_EQ(*m.find(0), 7);
  EXPECT_TRUE(m.erase(0));
  EXPECT_FALSE(m.erase(0));
  EXPECT_EQ(m.size(), 0u);
}

}  // namespace
