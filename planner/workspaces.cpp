// workspaces.cpp: the library workspaces' sizes (see workspaces.hpp).
#include "planner/workspaces.hpp"

#include "planner/units.hpp"

namespace headroom {

namespace {

// Returns the compute capability of NVIDIA's "smNN" as NN (90 for "sm90"), 0 for anything else.
int sm_version(std::string_view arch) {
  if (arch.size() < 3 || arch.substr(0, 2) != "sm") return 0;
  int v = 0;
  for (char c : arch.substr(2)) {
    if (c < '0' || c > '9') return 0;
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace

std::int64_t torch_cublas_workspace(std::string_view arch, const workspace_use& use) {
  // PyTorch's CublasHandlePool.cpp parseChosenWorkspaceSize: 32 MiB from compute capability 9 on (v2.6.0 had
  // it on 9 only; PyTorch PR #175344, merged 2026-02-19, added 10 and 12, PR #189312, 2026-07-09, 11), else
  // 8.125 MiB (docs/fixed-overheads.md); an unknown GPU is taken as the larger.
  if (use.cublas_config_4096_8 || arch.empty() || sm_version(arch) >= 90) return 32 * mib;
  return 4096 * kib * 2 + 16 * kib * 8;
}

std::int64_t te_cublas_workspace(std::string_view arch) {
  return arch.empty() || sm_version(arch) >= 90 ? 32 * mib + kib : 4 * mib;
}

std::int64_t allocator_workspaces(std::string_view arch, const workspace_use& use) {
  std::int64_t bytes = torch_cublas_workspaces * torch_cublas_workspace(arch, use);
  if (use.transformer_engine)
    bytes += te_cublas_workspace(arch) * (1 + (use.grouped_gemm ? te_grouped_gemm_streams : 0));
  return bytes;
}

}  // namespace headroom
