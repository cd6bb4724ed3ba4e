// cli_gpu_checks_test.cpp: what the GPU a plan names must agree with (planner/gpu_types.hpp): an FP8 recipe
// needs FP8 tensor cores, and a calibration made on one GPU is not silently applied to a plan for another
// (issue 34, classes B and C). The calibration is tests/data/calibration_h200_example.json ("NVIDIA H200").
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_support.hpp"
#include "planner/gpu_types.hpp"

namespace {

TEST(GpuChecks, DeviceNamesMatchTheirTypeByFamilyAndSize) {
  using headroom::device_name_may_be;
  using headroom::find_gpu_type;
  EXPECT_TRUE(device_name_may_be("NVIDIA H100 80GB HBM3", find_gpu_type("h100-80gb")));
  EXPECT_FALSE(device_name_may_be("NVIDIA H100 80GB HBM3", find_gpu_type("h100-94gb")));
  EXPECT_FALSE(device_name_may_be("NVIDIA H100 80GB HBM3", find_gpu_type("a100-80gb")));
  EXPECT_TRUE(device_name_may_be("NVIDIA A100-SXM4-40GB", find_gpu_type("a100-40gb")));
  EXPECT_FALSE(device_name_may_be("NVIDIA A100-SXM4-40GB", find_gpu_type("a100-80gb")));
  EXPECT_TRUE(device_name_may_be("NVIDIA H100 NVL", find_gpu_type("h100-94gb")));  // no size stated
  EXPECT_TRUE(device_name_may_be("NVIDIA H200", find_gpu_type("h200-141gb")));
  EXPECT_TRUE(device_name_may_be("AMD Instinct MI300X", find_gpu_type("mi300x-192gb")));
  EXPECT_FALSE(device_name_may_be("NVIDIA H200", find_gpu_type("b200-192gb")));
  // A GB200's Blackwell GPU names itself "NVIDIA GB200" (nvidia-smi in SlinkyProject/slurm-operator's
  // installation guide); an HGX B200 is not one.
  EXPECT_TRUE(device_name_may_be("NVIDIA GB200", find_gpu_type("gb200-186gb")));
  EXPECT_FALSE(device_name_may_be("NVIDIA B200", find_gpu_type("gb200-186gb")));
}

// The GB200 total nvidia-smi prints there, 189471 MiB (185.03 GiB), passes the device check; an 80 GiB total
// under that name does not.
TEST(GpuChecks, AGb200TotalIsTheGb200s) {
  using headroom::device_total_may_be;
  const std::int64_t mib = 1024 * 1024;
  EXPECT_EQ(headroom::find_gpu_type("gb200-186gb").capacity, 189471 * mib);
  EXPECT_TRUE(device_total_may_be("NVIDIA GB200", 189471 * mib));
  EXPECT_TRUE(device_total_may_be("NVIDIA GB200", static_cast<std::int64_t>(185.03 * 1024) * mib));
  EXPECT_FALSE(device_total_may_be("NVIDIA GB200", 81559 * mib));
  EXPECT_EQ(headroom::find_gpu_type("gb200-186gb").gpus_per_node, 4);
  EXPECT_STREQ(headroom::find_gpu_type("gb200-186gb").arch, "sm100");
}

// Class C: every way a plan trains in FP8 (a recipe named, a torchtitan float8 converter) on an Ampere GPU.
TEST(GpuChecks, Fp8OnAGpuWithoutFp8TensorCoresIsRefused) {
  for (const std::string& args :
       {std::string("plan --preset llama3-8b --gpus 8 --zero 3 --recipe fsdp2-fp8 --gpu-type a100-80gb"),
        std::string("plan --preset llama3-8b --gpus 8 --recipe megatron-fp8 --gpu-type a100-40gb"),
        std::string("plan --preset llama3-8b --gpus 8 --recipe megatron-distopt-fp8 --zero 1 --gpu-type a100-80gb")}) {
    SCOPED_TRACE(args);
    const result r = run(args);
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("has no FP8 tensor cores"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("(sm80)"), std::string::npos) << r.err;
  }
  const std::string toml = scratch("float8.toml");
  std::ofstream(toml) << "[model]\nname = \"llama3\"\nflavor = \"8B\"\nconverters = [\"quantize.linear.float8\"]\n"
                         "[training]\nlocal_batch_size = 1\nseq_len = 8192\n[activation_checkpoint]\nmode = \"full\"\n";
  const result titan = run("plan --gpus 8 --gpu-type a100-80gb --torchtitan-config " + toml);
  EXPECT_EQ(titan.status, 2) << titan.out;
  EXPECT_NE(titan.err.find("fsdp2-fp8 trains in FP8 and a100-80gb (sm80) has no FP8 tensor cores"),
            std::string::npos)
      << titan.err;
  // The same on Hopper plans; bf16 on Ampere plans.
  const result hopper = run("plan --gpus 8 --gpu-type h100-80gb --torchtitan-config " + toml);
  EXPECT_TRUE(hopper.status == 0 || hopper.status == 3) << hopper.err;
  const result bf16 = run("plan --preset llama3-8b --gpus 8 --zero 3 --recipe fsdp2-bf16 --gpu-type a100-80gb");
  EXPECT_TRUE(bf16.status == 0 || bf16.status == 3) << bf16.err;
}

// Class B: --gpu-type is checked against the calibration's GPU like --calibration-gpu; --strict-calibration
// makes the mismatch an error.
TEST(GpuChecks, ACalibrationFromAnotherGpuIsNamedAndStrictlyRefused) {
  const std::string cal = data + "/calibration_h200_example.json";
  const std::string plan = "plan --preset llama3-8b --gpus 8 --zero 1 --calibration " + cal + " ";
  const result other = run(plan + "--gpu-type a100-80gb");
  EXPECT_TRUE(other.status == 0 || other.status == 3) << other.err;
  EXPECT_NE((other.out + other.err).find("GPU: calibrated on 'NVIDIA H200', planning for --gpu-type a100-80gb"),
            std::string::npos)
      << other.out << other.err;
  const result strict = run(plan + "--gpu-type a100-80gb --strict-calibration");
  EXPECT_EQ(strict.status, 2) << strict.out;
  EXPECT_EQ(lines(strict.err), 1) << strict.err;
  EXPECT_NE(strict.err.find("planning for --gpu-type a100-80gb (--strict-calibration)"), std::string::npos)
      << strict.err;
  const result same = run(plan + "--gpu-type h200-141gb --strict-calibration");
  EXPECT_EQ(same.err.find("planning for --gpu-type"), std::string::npos) << same.err;
}

}  // namespace

namespace {

// `headroom gpus`, which --gpu-type's help names: every type, as a table and as JSON.
TEST(GpuChecks, GpusListsEveryTypeTheFlagTakes) {
  const result r = run("gpus");
  EXPECT_EQ(r.status, 0) << r.err;
  for (const char* name :
       {"a100-40gb", "h100-80gb", "h200-141gb", "b200-192gb", "gb200-186gb", "mi300x-192gb"})
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  const result j = run("gpus --json");
  ASSERT_EQ(j.status, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc["gpus"].size(), headroom::gpu_types().size());
  for (const auto& g : doc["gpus"]) {
    const auto& t = headroom::find_gpu_type(g["name"].get<std::string>());
    EXPECT_EQ(g["capacity_bytes"], t.capacity);
    EXPECT_EQ(g["fp8"], t.fp8);
  }
}

}  // namespace
