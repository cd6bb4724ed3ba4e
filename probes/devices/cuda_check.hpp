// cuda_check.hpp: the one error path for CUDA, the driver API, NCCL and NVML (nvbench's NVBENCH_CUDA_CALL
// is the model). Every call goes through a macro that turns a failure into a cuda_error carrying the API,
// the error's name and text, the call as written, the file and the line; main() catches it once and prints
// one line. Destructors use the _NOTHROW form, which reports failure by its return value instead.
// Out-of-memory is not handled here: the device code tests for it before checking, because it is an answer.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <string>

#include "probes/devices/device.hpp"

namespace headroom::probes {

class cuda_error : public device_error {
 public:
  cuda_error(const std::string& api, const std::string& error, const char* call, const char* file, int line);
  const std::string& error() const noexcept { return m_error; }

 private:
  std::string m_error;
};

namespace detail {

[[noreturn]] void throw_call_failure(const char* api, const std::string& error, const char* call,
                                     const char* file, int line);
// Returns the driver's name for a CUresult ("CUDA_ERROR_OUT_OF_MEMORY"), or its number.
std::string driver_error_name(CUresult e);

inline void check_call(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so later calls do not report it again
  throw_call_failure("CUDA", std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e), call, file,
                     line);
}
inline void check_call(CUresult e, const char* call, const char* file, int line) {
  if (e != CUDA_SUCCESS) throw_call_failure("CUDA driver", driver_error_name(e), call, file, line);
}
// NCCL's and NVML's codes are plain ints once loaded (libraries are opened at run time, probes/devices/cuda_libraries.hpp).
void check_library_call(const char* api, int code, const std::string& text, const char* call,
                        const char* file, int line);

inline bool succeeded(cudaError_t e) {
  if (e != cudaSuccess) cudaGetLastError();
  return e == cudaSuccess;
}
inline bool succeeded(CUresult e) {
  return e == CUDA_SUCCESS;
}

}  // namespace detail

}  // namespace headroom::probes

#define HEADROOM_CUDA_CALL(expr) ::headroom::probes::detail::check_call((expr), #expr, __FILE__, __LINE__)
// For destructors and cleanup paths that must not throw: evaluates to true when the call succeeded.
#define HEADROOM_CUDA_CALL_NOTHROW(expr) ::headroom::probes::detail::succeeded(expr)
// Checks the launch that just happened (a kernel's own errors surface at the next synchronising call).
#define HEADROOM_CUDA_LAUNCH_CHECK() HEADROOM_CUDA_CALL(cudaGetLastError())
