// no_cuda_backend.cpp: the CUDA backend of a build without nvcc (the sanitizer build, a machine without
// the toolkit): every entry reports that the build has no GPU backend, so `probe replay --backend cuda` exits 4.
#include "probes/cases/gpu_backend.hpp"

namespace headroom::probes {

namespace {
const char* why = "this build has no CUDA backend (no CUDA compiler was found at configure time)";
}

std::optional<std::string> cuda_unavailable_reason() {
  return std::string(why);
}

std::unique_ptr<gpu_backend> open_gpu_backend(std::optional<std::int64_t>) {
  throw device_error(why);
}

overheads probe_overheads(const overhead_shapes&) {
  throw device_error(why);
}

overhead_layer probe_context_only() {
  throw device_error(why);
}

gpu_environment read_gpu_environment() {
  throw device_error(why);
}

}  // namespace headroom::probes
