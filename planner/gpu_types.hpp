// gpu_types.hpp: GPUs by name (--gpu-type): the capacity a training process sees (what cudaMemGetInfo /
// nvidia-smi report as total, below the marketing size), the dense bf16 rate and the link speeds the ranking
// uses, each with its source. Explicit flags (--gpu-mem, --tflops, --intra-node-gbs, --inter-node-gbs)
// override a type's figures.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace headroom {

struct gpu_type {
  const char* name;          // "h100-80gb"
  std::int64_t capacity;     // bytes: the total the driver reports
  double tflops;             // dense bf16 TFLOP/s (no sparsity)
  double intra_node_gbs;     // GB/s per GPU inside a node (NVLink / Infinity Fabric, one direction)
  double inter_node_gbs;     // GB/s per GPU across nodes (one 400 Gb/s NIC per GPU = 50 GB/s)
  int gpus_per_node;
  const char* source;        // where the capacity comes from, and whether it was measured
  // The architecture, and whether its tensor cores multiply FP8 (NVIDIA from sm89, AMD CDNA3): an FP8 recipe
  // on a GPU without them does not run (Transformer Engine and torchao refuse it), so a plan for one is refused.
  const char* arch;          // "sm80", "sm90", "sm100", "gfx942"
  bool fp8 = false;
};

// Returns every known GPU type, in the order `headroom gpus` lists them.
std::span<const gpu_type> gpu_types();
// Returns the GPU type called `name`; throws bad_input naming the closest known names.
const gpu_type& find_gpu_type(const std::string& name);
// Returns whether a device name as CUDA or ROCm reports it ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB")
// may be the GPU type `g`: false when the name holds another family than g's ("a100" for h100-80gb) or states
// another memory size in GB; true when it names g's family and states no other size ("NVIDIA H100 NVL").
bool device_name_may_be(const std::string& device_name, const gpu_type& g);
// How far a device total a record or row states may lie from the capacity of the GPU type it names, as a
// fraction of that capacity: what CUDA, torch and nvidia-smi report for one card differ by about 1% (this
// table keeps nvidia-smi's), a nominal "80" for a 79.6 GiB card by 0.5%; another size of the card, or GB taken
// for GiB (7%), lies beyond it.
inline constexpr double device_total_tolerance = 0.05;
// Returns whether `total` bytes may be the memory of a device named `device_name`: true when no GPU type may
// be it (an unknown device: nothing to check) or when one that may be it has a capacity within
// device_total_tolerance of `total`.
bool device_total_may_be(const std::string& device_name, std::int64_t total);
// Returns the GPU type called exactly `name`, or nullptr (a record's or calibration's GPU, which may be unknown).
const gpu_type* known_gpu_type(const std::string& name);

}  // namespace headroom
