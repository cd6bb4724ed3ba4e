// pattern.cu: fill / verify kernels (see pattern.hpp).
#include "pattern.hpp"

namespace headroom::kernels {

namespace {

__device__ __host__ inline std::uint64_t mix(std::uint64_t x) {
  // splitmix64: every word differs from its neighbours and from other seeds.
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

__global__ void fill_kernel(std::uint64_t* p, std::size_t words, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = mix(seed ^ i);
}

__global__ void verify_kernel(const std::uint64_t* p, std::size_t words, std::uint64_t seed,
                              unsigned long long* mismatches) {
  unsigned long long local = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    local += p[i] != mix(seed ^ i);
  if (local) atomicAdd(mismatches, local);
}

constexpr int threads = 256;
int blocks_for(std::size_t words) {
  const std::size_t b = (words + threads - 1) / threads;
  return static_cast<int>(b < 4096 ? (b ? b : 1) : 4096);
}

}  // namespace

cudaError_t fill_pattern(void* device_ptr, std::size_t bytes, std::uint64_t seed, cudaStream_t stream) {
  const std::size_t words = bytes / 8;
  fill_kernel<<<blocks_for(words), threads, 0, stream>>>(static_cast<std::uint64_t*>(device_ptr), words,
                                                         seed);
  return cudaGetLastError();
}

cudaError_t count_mismatches(const void* device_ptr, std::size_t bytes, std::uint64_t seed,
                             cudaStream_t stream, std::uint64_t* mismatches) {
  const std::size_t words = bytes / 8;
  unsigned long long* counter = nullptr;
  cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&counter), sizeof *counter, stream);
  if (e != cudaSuccess) return e;
  e = cudaMemsetAsync(counter, 0, sizeof *counter, stream);
  if (e == cudaSuccess) {
    verify_kernel<<<blocks_for(words), threads, 0, stream>>>(static_cast<const std::uint64_t*>(device_ptr),
                                                             words, seed, counter);
    e = cudaGetLastError();
  }
  unsigned long long host = 0;
  if (e == cudaSuccess) e = cudaMemcpyAsync(&host, counter, sizeof host, cudaMemcpyDeviceToHost, stream);
  cudaError_t f = cudaFreeAsync(counter, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e == cudaSuccess) e = f;
  *mismatches = host;
  return e;
}

std::optional<std::string> no_device_reason() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaErrorInsufficientDriver || e == cudaErrorStubLibrary || e == cudaErrorNoDevice) {
    cudaGetLastError();  // clear the sticky error for later calls
    return std::string(e == cudaErrorNoDevice ? "no CUDA device" : "no CUDA driver") + " (" +
           cudaGetErrorName(e) + ": " + cudaGetErrorString(e) + ")";
  }
  if (e != cudaSuccess)
    return std::string("CUDA unusable (") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e) + ")";
  if (count == 0) return std::string("no CUDA device (cudaGetDeviceCount returned 0)");
  return std::nullopt;
}

}  // namespace headroom::kernels
