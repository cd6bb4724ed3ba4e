// workspaces.hpp: the library workspaces a training process allocates through PyTorch's caching allocator
// at first use and keeps for the whole run: PyTorch's own cuBLAS workspaces and TransformerEngine's. They
// sit inside allocated and reserved memory (torch.cuda.max_memory_allocated counts them), so the step peak's
// check adds them (device_spec::allocator_workspaces, stage_terms.hpp peak_total), and docs/model.md,
// "Library workspaces", gives the sources.
#pragma once

#include <cstdint>
#include <string_view>

namespace headroom {

// What a launch runs that owns workspaces.
struct workspace_use {
  // TransformerEngine's GEMMs (Megatron-Core: its TE layers, and its MoE router's GEMM whenever TE imports).
  bool transformer_engine = false;
  // TE's grouped GEMM (Megatron's --moe-grouped-gemm): one more workspace for each of TE's compute streams.
  bool grouped_gemm = false;
  // CUBLAS_WORKSPACE_CONFIG=:4096:8 (32 MiB a workspace on every GPU), which Megatron's --deterministic-mode
  // requires and its functional tests set.
  bool cublas_config_4096_8 = false;
};

// TransformerEngine's compute streams for grouped GEMM, each with its own workspace (TE
// common/util/multi_stream.cpp num_compute_streams).
inline constexpr int te_grouped_gemm_streams = 4;
// PyTorch's cuBLAS workspaces alive in a training step: the forward's handle and autograd's backward thread's
// (one per (handle, stream), aten/src/ATen/cuda/CublasHandlePool.cpp); two is what Megatron's functional
// tests measure on top of TE's (docs/model.md, "Library workspaces").
inline constexpr int torch_cublas_workspaces = 2;

// Returns one PyTorch cuBLAS workspace on a GPU of architecture `arch` ("sm80", "sm90", "sm100"; "" unknown,
// taken as the larger), bytes: 32 MiB from sm90 on (CublasHandlePool.cpp's default for compute capability 9
// and, since 2026, 10-12), 4096 KiB x 2 + 16 KiB x 8 = 8.125 MiB on the others, 32 MiB everywhere under :4096:8.
std::int64_t torch_cublas_workspace(std::string_view arch, const workspace_use& use);
// Returns one TransformerEngine cuBLAS workspace on `arch`, bytes: 32 MiB + 1 KiB from sm90 (and unknown), 4 MiB
// before
// (TE pytorch/cpp_extensions/gemm.py get_cublas_workspace_size_bytes).
std::int64_t te_cublas_workspace(std::string_view arch);
// Returns the bytes of every library workspace a launch using `use` keeps on a GPU of `arch`: PyTorch's two,
// TE's one, and TE's four grouped-GEMM ones.
std::int64_t allocator_workspaces(std::string_view arch, const workspace_use& use);

}  // namespace headroom
