// overheads.cpp: the layered overhead arithmetic (see overheads.hpp).
#include "probes/cases/overheads.hpp"

#include <nlohmann/json.hpp>

namespace headroom::probes {

std::int64_t overheads::fixed_bytes() const {
  std::int64_t sum = 0;
  for (const auto& l : layers)
    if (l.library && l.bytes) sum += *l.bytes;
  return sum;
}

const overhead_layer* overheads::find(const std::string& name) const {
  for (const auto& l : layers)
    if (l.name == name) return &l;
  return nullptr;
}

overheads measure_overheads(overhead_stack& s, const overhead_shapes& shapes, std::string module_loading) {
  overheads o;
  o.shapes = shapes;
  o.module_loading = std::move(module_loading);
  std::string why;
  const std::optional<std::int64_t> before = s.used_before_context(why);
  s.create_context();
  std::int64_t used = s.device_used();
  o.layers.push_back({"CUDA context", before ? std::optional(used - *before) : std::nullopt, used, true,
                      before
                          ? "NVML device-used before the context, cudaMemGetInfo after it (module loading " +
                                o.module_loading + ")"
                          : "not measured: " + why});
  // Each later layer is a delta of cudaMemGetInfo around one step.
  auto layer = [&](const std::string& name, bool library, const std::string& note) {
    const std::int64_t now = s.device_used();
    o.layers.push_back({name, now - used, now, library, note});
    used = now;
  };
  auto skipped = [&](const std::string& name, const std::string& reason) {
    o.layers.push_back({name, std::nullopt, used, true, "not measured: " + reason});
  };

  const std::int64_t operand_bytes = 2 * (shapes.m * shapes.k + shapes.k * shapes.n + shapes.m * shapes.n);
  if (s.create_blas(why)) {
    layer("cuBLAS handle", true, "cublasCreate on the probe's stream");
    s.allocate_buffer("gemm operands", operand_bytes);
    layer("GEMM operands", false, "A, B, C in bf16 (the probe's own buffers, not an overhead)");
    s.gemm(shapes.m, shapes.n, shapes.k);
    layer("cuBLAS workspace", true,
          "after the first bf16 GEMM " + std::to_string(shapes.m) + " x " + std::to_string(shapes.n) + " x " +
              std::to_string(shapes.k) + " (" + shapes.gemm_origin + ")");
    s.free_buffer("gemm operands");
    used = s.device_used();
  } else {
    skipped("cuBLAS handle", why);
    skipped("cuBLAS workspace", why);
  }

  s.allocate_buffer("gradient bucket", shapes.bucket_bytes);
  layer("gradient bucket", false, "the all-reduce's buffer (the probe's own, not an overhead)");
  if (s.create_nccl(why)) {
    layer("NCCL communicator", true, "ncclCommInitRank, one rank on this GPU");
    s.all_reduce(shapes.bucket_bytes);
    layer(
        "NCCL first all-reduce", true,
        "buffers NCCL allocates at its first collective (" + std::to_string(shapes.bucket_bytes) + " bytes)");
  } else {
    skipped("NCCL communicator", why);
    skipped("NCCL first all-reduce", why);
  }
  s.free_buffer("gradient bucket");
  return o;
}

}  // namespace headroom::probes
