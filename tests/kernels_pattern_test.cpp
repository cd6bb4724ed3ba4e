// kernels_pattern_test.cpp: the fill / verify kernels on a real GPU; skips with the reason without one.
// The tally is allocated once by the caller; a planted corruption is counted and its buffer named.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "kernels/pattern.hpp"
#include "probes/devices/cuda_device.hpp"

namespace headroom::kernels {
namespace {

mismatch_tally read(mismatch_tally* d) {
  mismatch_tally h{};
  EXPECT_EQ(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

TEST(GpuPattern, FillThenVerifyFindsNoMismatchAndCatchesOne) {
  if (auto why = probes::no_device_reason()) GTEST_SKIP() << *why;
  const std::size_t bytes = 64ull << 20;
  void* p = nullptr;
  mismatch_tally* tally = nullptr;
  ASSERT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&tally), sizeof *tally), cudaSuccess);
  ASSERT_EQ(cudaMemset(tally, 0, sizeof *tally), cudaSuccess);
  ASSERT_EQ(fill_pattern(p, bytes, 42, nullptr), cudaSuccess);
  ASSERT_EQ(verify_pattern(p, bytes, 42, 5, tally, nullptr), cudaSuccess);
  EXPECT_EQ(read(tally).words, 0u);
  EXPECT_EQ(read(tally).first_tag_plus_one, 0u);
  ASSERT_EQ(cudaMemset(static_cast<char*>(p) + 4096, 0, 16), cudaSuccess);  // two words
  ASSERT_EQ(verify_pattern(p, bytes, 42, 9, tally, nullptr), cudaSuccess);
  EXPECT_EQ(read(tally).words, 2u);
  EXPECT_EQ(read(tally).first_tag_plus_one, 10u);
  ASSERT_EQ(verify_pattern(p, bytes, 43, 11, tally, nullptr),
            cudaSuccess);  // another seed: every word differs
  EXPECT_EQ(read(tally).words, 2u + bytes / 8);
  EXPECT_EQ(read(tally).first_tag_plus_one, 10u);  // still the first buffer that failed
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaFree(tally), cudaSuccess);
}

TEST(GpuPattern, NoDeviceReasonNamesTheCause) {
  auto why = probes::no_device_reason();
  if (!why) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_NE(why->find("("), std::string::npos) << *why;
}

}  // namespace
}  // namespace headroom::kernels
