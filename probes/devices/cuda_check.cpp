// cuda_check.cpp: building the one-line error of a failed CUDA / driver / NCCL / NVML call
// (see cuda_check.hpp).
#include "probes/devices/cuda_check.hpp"

namespace headroom::probes {

cuda_error::cuda_error(const std::string& api, const std::string& error, const char* call, const char* file,
                       int line)
    : device_error(api + " call failed: " + call + " returned " + error + " (" + file + ":" +
                   std::to_string(line) + ")"),
      m_error(error) {}

namespace detail {

void throw_call_failure(const char* api, const std::string& error, const char* call, const char* file,
                        int line) {
  // The file as written relative to the repository, not the build machine's absolute path.
  std::string f = file;
  for (const char* top : {"/probes/", "/kernels/"}) {
    const auto at = f.rfind(top);
    if (at != std::string::npos) {
      f = f.substr(at + 1);
      break;
    }
  }
  throw cuda_error(api, error, call, f.c_str(), line);
}

std::string driver_error_name(CUresult e) {
  using name_fn = CUresult (*)(CUresult, const char**);
  static name_fn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuGetErrorName", &p, 12000, cudaEnableDefault, &q) != cudaSuccess)
      cudaGetLastError();
    return q == cudaDriverEntryPointSuccess ? reinterpret_cast<name_fn>(p) : nullptr;
  }();
  const char* name = nullptr;
  if (fn && fn(e, &name) == CUDA_SUCCESS && name) return name;
  return "CUresult " + std::to_string(static_cast<int>(e));
}

void check_library_call(const char* api, int code, const std::string& text, const char* call,
                        const char* file, int line) {
  if (code != 0) throw_call_failure(api, text + " (" + std::to_string(code) + ")", call, file, line);
}

}  // namespace detail

}  // namespace headroom::probes
