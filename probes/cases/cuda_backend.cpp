// cuda_backend.cpp: the CUDA backend (see gpu_backend.hpp): opening device 0 with the driver's view read
// before and after the context, the allocators and checker on it, the GPU environment, and the layered
// overhead probe over the real stack (cuBLAS and NCCL opened at run time, cuda_libraries.hpp).
#include <cublas_v2.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <vector>

#include "probes/cases/cuda_block_check.hpp"
#include "probes/devices/cuda_check.hpp"
#include "probes/devices/cuda_device.hpp"
#include "probes/devices/cuda_libraries.hpp"
#include "probes/allocators/driver_pool_allocator.hpp"
#include "probes/cases/gpu_backend.hpp"
#include "planner/errors.hpp"
#include "probes/cases/probe_case.hpp"

#define HEADROOM_LIBRARY_CALL(api, expr, text)                                                               \
  do {                                                                                                       \
    const int headroom_rc_ = static_cast<int>(expr);                                                         \
    if (headroom_rc_ != 0)                                                                                   \
      ::headroom::probes::detail::check_library_call(api, headroom_rc_, text(headroom_rc_), #expr, __FILE__, \
                                                     __LINE__);                                              \
  } while (0)

namespace headroom::probes {

namespace {

std::string version_text(int v) {  // CUDA's 13000 -> "13.0"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string pci_bus_id(int ordinal) {
  char buf[32] = {0};
  HEADROOM_CUDA_CALL(cudaDeviceGetPCIBusId(buf, sizeof buf, ordinal));
  return buf;
}

// NVML's device-used for the GPU at `bus`, or nullopt with `why`.
std::optional<std::int64_t> nvml_used(const std::string& bus, std::string& why) {
  const nvml_api* nvml = load_nvml(why);
  if (!nvml) return std::nullopt;
  nvml_api::device_handle h = nullptr;
  if (const int rc = nvml->device_by_pci_bus_id(bus.c_str(), &h); rc != 0) {
    why = std::string("nvmlDeviceGetHandleByPciBusId_v2: ") + nvml->error_string(rc);
    return std::nullopt;
  }
  nvml_api::memory m{};
  if (const int rc = nvml->device_memory(h, &m); rc != 0) {
    why = std::string("nvmlDeviceGetMemoryInfo: ") + nvml->error_string(rc);
    return std::nullopt;
  }
  return static_cast<std::int64_t>(m.used);
}

void make_context(int ordinal) {
  HEADROOM_CUDA_CALL(cudaSetDevice(ordinal));
  HEADROOM_CUDA_CALL(cudaFree(nullptr));  // the primary context exists after this
}

// NCCL, opened at run time.
struct nccl_api {
  decltype(&::ncclGetVersion) get_version = nullptr;
  decltype(&::ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&::ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclGetErrorString) error_string = nullptr;
  decltype(&::ncclSend) send = nullptr;
  decltype(&::ncclRecv) recv = nullptr;
  decltype(&::ncclGroupStart) group_start = nullptr;
  decltype(&::ncclGroupEnd) group_end = nullptr;
};

const nccl_api* load_nccl(std::string& why) {
  static std::string failure;
  static const nccl_api* api = []() -> const nccl_api* {
    static std::optional<shared_library> lib = shared_library::open({"libnccl.so.2", "libnccl.so"}, failure);
    if (!lib) return nullptr;
    static nccl_api a;
    symbol_binder get(*lib, failure);
    get(a.get_version, "ncclGetVersion");
    get(a.get_unique_id, "ncclGetUniqueId");
    get(a.comm_init_rank, "ncclCommInitRank");
    get(a.all_reduce, "ncclAllReduce");
    get(a.comm_destroy, "ncclCommDestroy");
    get(a.error_string, "ncclGetErrorString");
    get(a.send, "ncclSend");
    get(a.recv, "ncclRecv");
    get(a.group_start, "ncclGroupStart");
    get(a.group_end, "ncclGroupEnd");
    return get.ok() ? &a : nullptr;
  }();
  if (!api) why = failure;
  return api;
}

// cuBLAS, opened at run time.
struct cublas_api {
  decltype(&::cublasCreate_v2) create = nullptr;
  decltype(&::cublasDestroy_v2) destroy = nullptr;
  decltype(&::cublasSetStream_v2) set_stream = nullptr;
  // Spelled out: the header overloads cublasGemmEx for C++.
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*,
                            void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};

const cublas_api* load_cublas(std::string& why) {
  static std::string failure;
  static const cublas_api* api = []() -> const cublas_api* {
    static std::optional<shared_library> lib =
        shared_library::open({"libcublas.so.13", "libcublas.so.12", "libcublas.so"}, failure);
    if (!lib) return nullptr;
    static cublas_api a;
    symbol_binder get(*lib, failure);
    get(a.create, "cublasCreate_v2");
    get(a.destroy, "cublasDestroy_v2");
    get(a.set_stream, "cublasSetStream_v2");
    get(a.gemm_ex, "cublasGemmEx");
    return get.ok() ? &a : nullptr;
  }();
  if (!api) why = failure;
  return api;
}

std::string nccl_error_text(int rc) {
  std::string why;
  const nccl_api* n = load_nccl(why);
  return n ? n->error_string(static_cast<ncclResult_t>(rc)) : "NCCL error";
}
std::string cublas_error_text(int rc) {
  return "cublasStatus_t " + std::to_string(rc);
}

class cuda_backend final : public gpu_backend {
 public:
  explicit cuda_backend(std::optional<std::int64_t> cap) {
    const std::string bus = pci_bus_id(0);
    std::string why;
    m_truth.before_context = nvml_used(bus, why);
    make_context(0);
    HEADROOM_CUDA_CALL(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
    const memory_info after = [&] {
      std::size_t f = 0, t = 0;
      HEADROOM_CUDA_CALL(cudaMemGetInfo(&f, &t));
      return memory_info{static_cast<std::int64_t>(f), static_cast<std::int64_t>(t)};
    }();
    m_truth.after_context = after.used();
    m_truth.card_total = after.total;
    m_truth.cap = cap;
    m_env = read_gpu_environment();
    m_device = std::make_unique<cuda_device>(0, cap, m_stream);
  }
  ~cuda_backend() override {
    m_device.reset();
    for (ncclComm_t c : m_comms) (void)m_nccl->comm_destroy(c);
    if (m_stream) (void)HEADROOM_CUDA_CALL_NOTHROW(cudaStreamDestroy(m_stream));
  }

  device& dev() override { return *m_device; }

  std::unique_ptr<allocator> make_allocator(const std::string& name, const caching_options& copt) override {
    if (name == "driver-pool") return make_driver_pool_allocator(*m_device);
    return policy_factory(name, copt)(*m_device);
  }

  std::unique_ptr<block_checker> make_checker() override {
    return std::make_unique<cuda_block_checker>(m_stream);
  }

  touch_throughput measure_throughput(std::int64_t bytes) override {
    return measure_touch_throughput(m_stream, bytes);
  }

  device_memory_truth truth() const override { return m_truth; }
  const gpu_environment& environment() const override { return m_env; }
  // cudaMemGetInfo is device-wide and the driver keeps its own small allocations: one page of slack.
  std::int64_t cleanup_slack() const override { return 2 << 20; }

  std::optional<std::string> nccl_unique_id(std::string& why) override {
    m_nccl = load_nccl(why);
    if (!m_nccl) return std::nullopt;
    ncclUniqueId id{};
    HEADROOM_LIBRARY_CALL("NCCL", m_nccl->get_unique_id(&id), nccl_error_text);
    return std::string(id.internal, sizeof id.internal);
  }

  std::vector<nccl_group_memory> join_nccl_groups(const std::vector<nccl_group_spec>& groups) override {
    std::string why;
    m_nccl = load_nccl(why);
    if (!m_nccl) throw device_error("NCCL cannot be loaded: " + why);
    std::vector<nccl_group_memory> out;
    for (const auto& g : groups) {
      nccl_group_memory m;
      m.name = g.name;
      m.size = g.size;
      m.rank_in_group = g.rank_in_group;
      m.first_bytes = g.first_bytes;
      m.collective = g.point_to_point ? "send/recv ring" : "all-reduce";
      ncclUniqueId id{};
      if (g.unique_id.size() != sizeof id.internal)
        throw device_error("NCCL unique id of group " + g.name + " has " +
                           std::to_string(g.unique_id.size()) + " bytes");
      std::copy(g.unique_id.begin(), g.unique_id.end(), id.internal);
      const std::int64_t before = used_now();
      ncclComm_t comm{};
      HEADROOM_LIBRARY_CALL("NCCL", m_nccl->comm_init_rank(&comm, g.size, id, g.rank_in_group),
                            nccl_error_text);
      m_comms.push_back(comm);
      const std::int64_t after_init = used_now();
      m.init_bytes = after_init - before;
      // The payload buffers are the probe's own: allocated before the reading, freed after the next.
      const std::size_t bytes = static_cast<std::size_t>(std::max<std::int64_t>(g.first_bytes / 2 * 2, 2));
      void* send = nullptr;
      void* recv = nullptr;
      HEADROOM_CUDA_CALL(cudaMalloc(&send, bytes));
      HEADROOM_CUDA_CALL(cudaMalloc(&recv, bytes));
      HEADROOM_CUDA_CALL(cudaMemset(send, 0, bytes));
      const std::int64_t with_buffers = used_now();
      if (g.point_to_point) {
        const int next = (g.rank_in_group + 1) % g.size, prev = (g.rank_in_group + g.size - 1) % g.size;
        HEADROOM_LIBRARY_CALL("NCCL", m_nccl->group_start(), nccl_error_text);
        HEADROOM_LIBRARY_CALL("NCCL", m_nccl->send(send, bytes / 2, ncclBfloat16, next, comm, m_stream),
                              nccl_error_text);
        HEADROOM_LIBRARY_CALL("NCCL", m_nccl->recv(recv, bytes / 2, ncclBfloat16, prev, comm, m_stream),
                              nccl_error_text);
        HEADROOM_LIBRARY_CALL("NCCL", m_nccl->group_end(), nccl_error_text);
      } else {
        HEADROOM_LIBRARY_CALL(
            "NCCL", m_nccl->all_reduce(send, recv, bytes / 2, ncclBfloat16, ncclSum, comm, m_stream),
            nccl_error_text);
      }
      HEADROOM_CUDA_CALL(cudaStreamSynchronize(m_stream));
      m.collective_bytes = used_now() - with_buffers;
      HEADROOM_CUDA_CALL(cudaFree(send));
      HEADROOM_CUDA_CALL(cudaFree(recv));
      out.push_back(m);
    }
    return out;
  }

 private:
  std::int64_t used_now() {
    HEADROOM_CUDA_CALL(cudaDeviceSynchronize());
    std::size_t f = 0, t = 0;
    HEADROOM_CUDA_CALL(cudaMemGetInfo(&f, &t));
    return static_cast<std::int64_t>(t - f);
  }

  const nccl_api* m_nccl = nullptr;
  std::vector<ncclComm_t> m_comms;
  cudaStream_t m_stream{};
  device_memory_truth m_truth;
  gpu_environment m_env;
  std::unique_ptr<cuda_device> m_device;
};

// The overhead probe's view of the real stack.
class cuda_overhead_stack final : public overhead_stack {
 public:
  ~cuda_overhead_stack() override {
    if (m_comm) (void)m_nccl->comm_destroy(m_comm);
    if (m_blas) (void)m_cublas->destroy(m_blas);
    for (auto& [name, p] : m_buffers) (void)HEADROOM_CUDA_CALL_NOTHROW(cudaFree(p));
    if (m_stream) (void)HEADROOM_CUDA_CALL_NOTHROW(cudaStreamDestroy(m_stream));
  }

  std::optional<std::int64_t> used_before_context(std::string& why) override {
    return nvml_used(pci_bus_id(0), why);
  }
  void create_context() override {
    make_context(0);
    HEADROOM_CUDA_CALL(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
  }
  std::int64_t device_used() override {
    HEADROOM_CUDA_CALL(cudaDeviceSynchronize());
    std::size_t f = 0, t = 0;
    HEADROOM_CUDA_CALL(cudaMemGetInfo(&f, &t));
    return static_cast<std::int64_t>(t - f);
  }
  void allocate_buffer(const std::string& name, std::int64_t bytes) override {
    void* p = nullptr;
    HEADROOM_CUDA_CALL(cudaMalloc(&p, static_cast<std::size_t>(bytes)));
    m_buffers[name] = p;
    HEADROOM_CUDA_CALL(cudaMemset(p, 0, static_cast<std::size_t>(bytes)));
  }
  void free_buffer(const std::string& name) override {
    HEADROOM_CUDA_CALL(cudaFree(m_buffers.at(name)));
    m_buffers.erase(name);
  }
  bool create_blas(std::string& why) override {
    m_cublas = load_cublas(why);
    if (!m_cublas) return false;
    HEADROOM_LIBRARY_CALL("cuBLAS", m_cublas->create(&m_blas), cublas_error_text);
    HEADROOM_LIBRARY_CALL("cuBLAS", m_cublas->set_stream(m_blas, m_stream), cublas_error_text);
    return true;
  }
  void gemm(std::int64_t m, std::int64_t n, std::int64_t k) override {
    auto* base = static_cast<char*>(m_buffers.at("gemm operands"));
    void* a = base;
    void* b = base + 2 * m * k;
    void* c = base + 2 * (m * k + k * n);
    const float alpha = 1, beta = 0;
    // Row-major C = A B is column-major C^T = B^T A^T.
    HEADROOM_LIBRARY_CALL(
        "cuBLAS",
        m_cublas->gemm_ex(m_blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                          static_cast<int>(k), &alpha, b, CUDA_R_16BF, static_cast<int>(n), a, CUDA_R_16BF,
                          static_cast<int>(k), &beta, c, CUDA_R_16BF, static_cast<int>(n), CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT),
        cublas_error_text);
    HEADROOM_CUDA_CALL(cudaStreamSynchronize(m_stream));
  }
  bool create_nccl(std::string& why) override {
    m_nccl = load_nccl(why);
    if (!m_nccl) return false;
    ncclUniqueId id{};
    HEADROOM_LIBRARY_CALL("NCCL", m_nccl->get_unique_id(&id), nccl_error_text);
    HEADROOM_LIBRARY_CALL("NCCL", m_nccl->comm_init_rank(&m_comm, 1, id, 0), nccl_error_text);
    return true;
  }
  void all_reduce(std::int64_t bytes) override {
    void* p = m_buffers.at("gradient bucket");
    HEADROOM_LIBRARY_CALL("NCCL",
                          m_nccl->all_reduce(p, p, static_cast<std::size_t>(bytes / 2), ncclBfloat16, ncclSum,
                                             m_comm, m_stream),
                          nccl_error_text);
    HEADROOM_CUDA_CALL(cudaStreamSynchronize(m_stream));
  }

 private:
  cudaStream_t m_stream{};
  std::map<std::string, void*> m_buffers;
  const cublas_api* m_cublas = nullptr;
  cublasHandle_t m_blas{};
  const nccl_api* m_nccl = nullptr;
  ncclComm_t m_comm{};
};

}  // namespace

std::optional<std::string> cuda_unavailable_reason() {
  return no_device_reason();
}

gpu_environment read_gpu_environment() {
  gpu_environment e;
  cudaDeviceProp prop{};
  HEADROOM_CUDA_CALL(cudaGetDeviceProperties(&prop, 0));
  e.gpu = prop.name;
  e.pci_bus_id = pci_bus_id(0);
  int v = 0;
  HEADROOM_CUDA_CALL(cudaRuntimeGetVersion(&v));
  e.cuda_runtime = version_text(v);
  std::string why;
  char driver[96] = {0};
  if (const nvml_api* nvml = load_nvml(why); nvml && nvml->driver_version(driver, sizeof driver) == 0) {
    e.driver = driver;
  } else {
    HEADROOM_CUDA_CALL(cudaDriverGetVersion(&v));
    e.driver = "CUDA " + version_text(v) + " driver API (NVML: " + why + ")";
  }
  if (const nccl_api* n = load_nccl(why)) {
    int code = 0;
    if (n->get_version(&code) == ncclSuccess)
      e.nccl = std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
               std::to_string(code % 100);
  }
  return e;
}

std::unique_ptr<gpu_backend> open_gpu_backend(std::optional<std::int64_t> cap) {
  if (auto why = no_device_reason()) throw device_error(*why);
  return std::make_unique<cuda_backend>(cap);
}

overheads probe_overheads(const overhead_shapes& shapes) {
  if (auto why = no_device_reason()) throw device_error(*why);
  const char* mode = std::getenv("CUDA_MODULE_LOADING");
  cuda_overhead_stack stack;
  return measure_overheads(stack, shapes, mode && *mode ? mode : "LAZY");
}

overhead_layer probe_context_only() {
  if (auto why = no_device_reason()) throw device_error(*why);
  cuda_overhead_stack stack;
  std::string why;
  const auto before = stack.used_before_context(why);
  stack.create_context();
  const std::int64_t after = stack.device_used();
  return {"CUDA context", before ? std::optional(after - *before) : std::nullopt, after, true,
          before ? "NVML before, cudaMemGetInfo after" : "not measured: " + why};
}

}  // namespace headroom::probes
