// megatron_workspaces.cpp: the library workspaces a Megatron-Core launch keeps in the caching allocator
// (planner/workspaces.hpp), read from its flags and environment. Line numbers cite NVIDIA/Megatron-LM
// @ d98e8a64 and NVIDIA/TransformerEngine @ 4329ff84 (the version Megatron's uv.lock pins).
#include "planner/imports/megatron_args_detail.hpp"
#include "planner/workspaces.hpp"

namespace headroom::detail {

void megatron_reader::read_workspaces() {
  workspace_use use;
  // TE's GEMMs run in every Megatron-Core launch: its layers under the default --transformer-impl
  // transformer_engine, and the MoE router's GEMM whenever TE imports, even under local
  // (megatron/core/transformer/moe/moe_utils.py l.1394).
  use.transformer_engine = true;
  // TE's GroupedLinear (Megatron's TEGroupedMLP) keeps a workspace per compute stream
  // (transformer_engine/pytorch/cpp_extensions/gemm.py l.53-59).
  use.grouped_gemm = has("--moe-grouped-gemm");
  // --deterministic-mode needs CUBLAS_WORKSPACE_CONFIG=:4096:8 and sets it when unset
  // (megatron/training/determinism.py l.27-30); a launch may export it itself.
  const auto env = m_text.variables.find("CUBLAS_WORKSPACE_CONFIG");
  const bool exported = env != m_text.variables.end() && env->second.unresolved.empty() &&
                        env->second.text == ":4096:8";
  use.cublas_config_4096_8 = exported || has("--deterministic-mode");
  m_out.workspaces = use;
  derive("library workspaces",
         std::string("TransformerEngine's cuBLAS workspace") +
             (use.grouped_gemm ? " and one per grouped-GEMM stream (--moe-grouped-gemm)" : "") +
             ", PyTorch's two" + (use.cublas_config_4096_8 ? " of 32 MiB (CUBLAS_WORKSPACE_CONFIG=:4096:8)" : ""),
         "Megatron-Core runs TE's GEMMs; sized for the GPU planned on (planner/workspaces.hpp)");
}

}  // namespace headroom::detail
