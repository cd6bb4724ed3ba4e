// overheads_test.cpp: the layered overhead arithmetic over a fake GPU stack whose device-used memory moves
// by chosen amounts at each call: each layer is the delta its call caused, the probe's own buffers are
// layers but not overhead, and a library that cannot be loaded is "not measured" with its reason.
#include "test_support.hpp"
#include "probes/cases/overheads.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "planner/units.hpp"

namespace headroom::probes {
namespace {


class fake_stack final : public overhead_stack {
 public:
  std::optional<std::int64_t> nvml = 600 * MiB;  // the driver's own use before the context
  std::int64_t context = 534 * MiB, handle = 2 * MiB, workspace = 32 * MiB, comm = 290 * MiB,
               collective = 226 * MiB;
  bool have_blas = true, have_nccl = true;
  std::vector<std::string> calls;

  std::optional<std::int64_t> used_before_context(std::string& why) override {
    calls.push_back("nvml");
    if (!nvml) why = "cannot open libnvidia-ml.so.1";
    return nvml;
  }
  void create_context() override {
    calls.push_back("context");
    m_used = nvml.value_or(600 * MiB) + context;
  }
  std::int64_t device_used() override { return m_used; }
  void allocate_buffer(const std::string& name, std::int64_t bytes) override {
    calls.push_back("alloc " + name);
    m_buffers[name] = (bytes + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
    m_used += m_buffers[name];
  }
  void free_buffer(const std::string& name) override {
    calls.push_back("free " + name);
    m_used -= m_buffers.at(name);
  }
  bool create_blas(std::string& why) override {
    if (!have_blas) why = "cannot open libcublas.so.13";
    if (have_blas) m_used += handle;
    return have_blas;
  }
  void gemm(std::int64_t, std::int64_t, std::int64_t) override { m_used += workspace; }
  bool create_nccl(std::string& why) override {
    if (!have_nccl) why = "cannot open libnccl.so.2";
    if (have_nccl) m_used += comm;
    return have_nccl;
  }
  void all_reduce(std::int64_t) override { m_used += collective; }

 private:
  std::int64_t m_used = 0;
  std::map<std::string, std::int64_t> m_buffers;
};

overhead_shapes shapes() {
  overhead_shapes s;
  s.m = 2048;
  s.n = 3 * 2048;
  s.k = 2048;
  s.bucket_bytes = 25 * MiB;
  return s;
}

TEST(Overheads, EachLayerIsTheDeltaItsCallCaused) {
  fake_stack s;
  const overheads o = measure_overheads(s, shapes(), "LAZY");
  auto bytes = [&](const char* n) { return o.find(n) ? o.find(n)->bytes : std::nullopt; };
  EXPECT_EQ(bytes("CUDA context"), 534 * MiB);
  EXPECT_EQ(bytes("cuBLAS handle"), 2 * MiB);
  EXPECT_EQ(bytes("cuBLAS workspace"), 32 * MiB);
  EXPECT_EQ(bytes("NCCL communicator"), 290 * MiB);
  EXPECT_EQ(bytes("NCCL first all-reduce"), 226 * MiB);
  // The probe's own buffers, 2 MiB-rounded: A 8 MiB + B 24 MiB + C 24 MiB = 56 MiB; the bucket 25 -> 26.
  EXPECT_EQ(bytes("GEMM operands"), 56 * MiB);
  EXPECT_EQ(bytes("gradient bucket"), 26 * MiB);
  EXPECT_EQ(o.fixed_bytes(), (534 + 2 + 32 + 290 + 226) * MiB);  // buffers are not overhead
  EXPECT_EQ(o.module_loading, "LAZY");
  // NVML is read before the context is made; the buffers are given back.
  ASSERT_GE(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0], "nvml");
  EXPECT_EQ(s.calls[1], "context");
  EXPECT_EQ(std::count(s.calls.begin(), s.calls.end(), "free gemm operands"), 1);
  EXPECT_EQ(std::count(s.calls.begin(), s.calls.end(), "free gradient bucket"), 1);
}

TEST(Overheads, WhatCannotBeLoadedIsNotMeasuredWithItsReason) {
  fake_stack s;
  s.nvml.reset();
  s.have_nccl = false;
  const overheads o = measure_overheads(s, shapes(), "EAGER");
  EXPECT_FALSE(o.find("CUDA context")->bytes);
  EXPECT_NE(o.find("CUDA context")->note.find("libnvidia-ml"), std::string::npos);
  EXPECT_FALSE(o.find("NCCL communicator")->bytes);
  EXPECT_NE(o.find("NCCL first all-reduce")->note.find("libnccl.so.2"), std::string::npos);
  EXPECT_EQ(o.fixed_bytes(), (2 + 32) * MiB);  // only what was measured
}

}  // namespace
}  // namespace headroom::probes
