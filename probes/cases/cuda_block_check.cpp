// cuda_block_check.cpp: fill / verify on a real GPU and its throughput (see cuda_block_check.hpp).
#include "probes/cases/cuda_block_check.hpp"

#include <algorithm>
#include <vector>

#include "probes/devices/cuda_check.hpp"
#include "kernels/pattern.hpp"

namespace headroom::probes {

cuda_block_checker::cuda_block_checker(cudaStream_t stream) : m_stream(stream) {
  HEADROOM_CUDA_CALL(cudaMalloc(&m_tally, sizeof(kernels::mismatch_tally)));
  HEADROOM_CUDA_CALL(cudaMemsetAsync(m_tally, 0, sizeof(kernels::mismatch_tally), m_stream));
}

cuda_block_checker::~cuda_block_checker() {
  (void)HEADROOM_CUDA_CALL_NOTHROW(cudaStreamSynchronize(m_stream));
  (void)HEADROOM_CUDA_CALL_NOTHROW(cudaFree(m_tally));
}

void cuda_block_checker::on_alloc(std::int32_t tensor, std::uint64_t address, std::int64_t bytes) {
  HEADROOM_CUDA_CALL(kernels::fill_pattern(reinterpret_cast<void*>(address), static_cast<std::size_t>(bytes),
                                           pattern_seed(tensor), m_stream));
  ++m_v.blocks_filled;
  m_v.bytes_filled += bytes;
}

void cuda_block_checker::on_free(std::int32_t tensor, std::uint64_t address, std::int64_t bytes) {
  HEADROOM_CUDA_CALL(kernels::verify_pattern(
      reinterpret_cast<const void*>(address), static_cast<std::size_t>(bytes), pattern_seed(tensor),
      static_cast<std::uint64_t>(tensor), static_cast<kernels::mismatch_tally*>(m_tally), m_stream));
  ++m_v.blocks_verified;
  m_v.bytes_verified += bytes;
}

verification cuda_block_checker::finish() {
  kernels::mismatch_tally host{};
  HEADROOM_CUDA_CALL(cudaMemcpyAsync(&host, m_tally, sizeof host, cudaMemcpyDeviceToHost, m_stream));
  HEADROOM_CUDA_CALL(cudaStreamSynchronize(m_stream));
  m_v.mismatched_words = static_cast<std::int64_t>(host.words);
  if (host.first_tag_plus_one) m_v.first_mismatch = static_cast<std::int32_t>(host.first_tag_plus_one - 1);
  return m_v;
}

namespace {

// Times `work` on `stream` with events: the median of five runs after one warm-up, milliseconds.
template <class F>
float median_ms(cudaStream_t stream, F work) {
  cudaEvent_t start{}, stop{};
  HEADROOM_CUDA_CALL(cudaEventCreate(&start));
  HEADROOM_CUDA_CALL(cudaEventCreate(&stop));
  std::vector<float> ms;
  try {
    work();
    for (int i = 0; i < 5; ++i) {
      HEADROOM_CUDA_CALL(cudaEventRecord(start, stream));
      work();
      HEADROOM_CUDA_CALL(cudaEventRecord(stop, stream));
      HEADROOM_CUDA_CALL(cudaEventSynchronize(stop));
      float t = 0;
      HEADROOM_CUDA_CALL(cudaEventElapsedTime(&t, start, stop));
      ms.push_back(t);
    }
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw;
  }
  HEADROOM_CUDA_CALL(cudaEventDestroy(start));
  HEADROOM_CUDA_CALL(cudaEventDestroy(stop));
  std::nth_element(ms.begin(), ms.begin() + 2, ms.end());
  return ms[2];
}

}  // namespace

touch_throughput measure_touch_throughput(cudaStream_t stream, std::int64_t bytes) {
  void* a = nullptr;
  void* b = nullptr;
  void* tally = nullptr;
  touch_throughput t;
  t.bytes = bytes;
  const auto n = static_cast<std::size_t>(bytes);
  try {
    HEADROOM_CUDA_CALL(cudaMalloc(&a, n));
    HEADROOM_CUDA_CALL(cudaMalloc(&b, n));
    HEADROOM_CUDA_CALL(cudaMalloc(&tally, sizeof(kernels::mismatch_tally)));
    HEADROOM_CUDA_CALL(cudaMemsetAsync(tally, 0, sizeof(kernels::mismatch_tally), stream));
    const float touch = median_ms(stream, [&] {
      HEADROOM_CUDA_CALL(kernels::fill_pattern(a, n, 7, stream));
      HEADROOM_CUDA_CALL(
          kernels::verify_pattern(a, n, 7, 0, static_cast<kernels::mismatch_tally*>(tally), stream));
    });
    const float copy = median_ms(
        stream, [&] { HEADROOM_CUDA_CALL(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, stream)); });
    kernels::mismatch_tally host{};
    HEADROOM_CUDA_CALL(cudaMemcpy(&host, tally, sizeof host, cudaMemcpyDeviceToHost));
    if (host.words != 0) throw device_error("the throughput buffer failed its own verification");
    // Both move 2 x bytes: fill writes and verify reads them; a copy reads and writes them.
    t.fill_verify_gbs = 2.0 * static_cast<double>(bytes) / (touch * 1e6);
    t.copy_gbs = 2.0 * static_cast<double>(bytes) / (copy * 1e6);
  } catch (...) {
    cudaFree(a);
    cudaFree(b);
    cudaFree(tally);
    throw;
  }
  HEADROOM_CUDA_CALL(cudaFree(a));
  HEADROOM_CUDA_CALL(cudaFree(b));
  HEADROOM_CUDA_CALL(cudaFree(tally));
  return t;
}

}  // namespace headroom::probes
