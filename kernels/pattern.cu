// pattern.cu: fill / verify kernels (see pattern.hpp). Grid-stride loops over 8-byte words; the verify
// kernel reduces in registers and touches the tally only when a thread saw a mismatch.
#include "pattern.hpp"

namespace headroom::kernels {

namespace {

__device__ inline std::uint64_t mix(std::uint64_t x) {
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
                              unsigned long long tag, mismatch_tally* tally) {
  unsigned long long local = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    local += p[i] != mix(seed ^ i);
  if (local) {
    atomicAdd(&tally->words, local);
    atomicCAS(&tally->first_tag_plus_one, 0ULL, tag + 1);
  }
}

constexpr int threads = 256;
// Enough blocks to fill every multiprocessor several times over; the loops stride over the rest.
int blocks_for(std::size_t words) {
  const std::size_t b = (words + threads - 1) / threads;
  return static_cast<int>(b < 4096 ? (b ? b : 1) : 4096);
}

}  // namespace

cudaError_t fill_pattern(void* device_ptr, std::size_t bytes, std::uint64_t seed, cudaStream_t stream) {
  const std::size_t words = bytes / 8;
  if (words == 0) return cudaSuccess;
  fill_kernel<<<blocks_for(words), threads, 0, stream>>>(static_cast<std::uint64_t*>(device_ptr), words,
                                                         seed);
  return cudaGetLastError();
}

cudaError_t verify_pattern(const void* device_ptr, std::size_t bytes, std::uint64_t seed, std::uint64_t tag,
                           mismatch_tally* device_tally, cudaStream_t stream) {
  const std::size_t words = bytes / 8;
  if (words == 0) return cudaSuccess;
  verify_kernel<<<blocks_for(words), threads, 0, stream>>>(static_cast<const std::uint64_t*>(device_ptr),
                                                           words, seed, tag, device_tally);
  return cudaGetLastError();
}

}  // namespace headroom::kernels
