// kernels_pattern_test.cpp: the fill / verify kernels on a real GPU; skips with the reason without one.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "kernels/pattern.hpp"

namespace headroom::kernels {
namespace {

TEST(GpuPattern, FillThenVerifyFindsNoMismatchAndCatchesOne) {
  if (auto why = no_device_reason()) GTEST_SKIP() << *why;
  const std::size_t bytes = 64ull << 20;
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
  ASSERT_EQ(fill_pattern(p, bytes, 42, nullptr), cudaSuccess);
  std::uint64_t bad = 1;
  ASSERT_EQ(count_mismatches(p, bytes, 42, nullptr, &bad), cudaSuccess);
  EXPECT_EQ(bad, 0u);
  ASSERT_EQ(cudaMemset(static_cast<char*>(p) + 4096, 0, 16), cudaSuccess);  // two words
  ASSERT_EQ(count_mismatches(p, bytes, 42, nullptr, &bad), cudaSuccess);
  EXPECT_EQ(bad, 2u);
  ASSERT_EQ(count_mismatches(p, bytes, 43, nullptr, &bad), cudaSuccess);  // another seed: all differ
  EXPECT_EQ(bad, bytes / 8);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
}

TEST(GpuPattern, NoDeviceReasonNamesTheCause) {
  auto why = no_device_reason();
  if (!why) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_NE(why->find("("), std::string::npos) << *why;
}

}  // namespace
}  // namespace headroom::kernels
