// cuda_device.cpp: the CUDA device (see cuda_device.hpp).
#include "probes/devices/cuda_device.hpp"

#include <type_traits>

#include "probes/devices/cuda_check.hpp"
#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/units.hpp"

namespace headroom::probes {

std::optional<std::string> no_device_reason() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaErrorInsufficientDriver || e == cudaErrorStubLibrary || e == cudaErrorNoDevice) {
    cudaGetLastError();  // clear the error for later calls
    return std::string(e == cudaErrorNoDevice ? "no CUDA device" : "no CUDA driver") + " (" +
           cudaGetErrorName(e) + ": " + cudaGetErrorString(e) + ")";
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string("CUDA unusable (") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e) + ")";
  }
  if (count == 0) return std::string("no CUDA device (cudaGetDeviceCount returned 0)");
  return std::nullopt;
}

// The driver's VMM entry points, looked up once for the process.
struct cuda_device::driver_api {
  decltype(&::cuMemAddressReserve) address_reserve = nullptr;
  decltype(&::cuMemAddressFree) address_free = nullptr;
  decltype(&::cuMemCreate) create = nullptr;
  decltype(&::cuMemRelease) release = nullptr;
  decltype(&::cuMemMap) map = nullptr;
  decltype(&::cuMemUnmap) unmap = nullptr;
  decltype(&::cuMemSetAccess) set_access = nullptr;
  decltype(&::cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetAttribute) attribute = nullptr;

  static const driver_api* load() {
    static const driver_api* api = []() -> const driver_api* {
      static driver_api a;
      bool ok = true;
      auto get = [&](auto& fn, const char* name) {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult q{};
        const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q);
        if (e != cudaSuccess) cudaGetLastError();
        ok = ok && e == cudaSuccess && q == cudaDriverEntryPointSuccess && p;
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
      };
      get(a.address_reserve, "cuMemAddressReserve");
      get(a.address_free, "cuMemAddressFree");
      get(a.create, "cuMemCreate");
      get(a.release, "cuMemRelease");
      get(a.map, "cuMemMap");
      get(a.unmap, "cuMemUnmap");
      get(a.set_access, "cuMemSetAccess");
      get(a.granularity, "cuMemGetAllocationGranularity");
      get(a.device_get, "cuDeviceGet");
      get(a.attribute, "cuDeviceGetAttribute");
      return ok ? &a : nullptr;
    }();
    return api;
  }
};

cuda_device::cuda_device(int ordinal, std::optional<std::int64_t> cap, cudaStream_t stream)
    : m_ordinal(ordinal), m_stream(stream), m_cap(cap) {
  cudaDeviceProp prop{};
  HEADROOM_CUDA_CALL(cudaGetDeviceProperties(&prop, ordinal));
  m_name = prop.name;
  const memory_info now = memory();
  m_total = now.total;
  if (cap && *cap > m_total)
    throw bad_input("gpu-mem", "the cap " + gib_str(*cap, 1) + " GiB is above this card's " +
                                   gib_str(m_total, 1) + " GiB (" + m_name + ")");
  // What the allocator may map: the card's free memory now, or the cap less what is already used.
  m_budget = cap ? *cap - now.used() : now.free;
  if (m_budget <= 0)
    throw bad_input("gpu-mem", "the cap " + gib_str(*cap, 1) +
                                   " GiB is below what the device already uses (" + gib_str(now.used(), 2) +
                                   " GiB: context and other processes)");
  if (const driver_api* api = driver_api::load()) {
    CUdevice d{};
    int vmm = 0;
    HEADROOM_CUDA_CALL(api->device_get(&d, ordinal));
    HEADROOM_CUDA_CALL(api->attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d));
    if (vmm) m_driver = api;
  }
  m_prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  m_prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  m_prop.location.id = ordinal;
  if (m_driver) {
    std::size_t g = 0;
    HEADROOM_CUDA_CALL(m_driver->granularity(&g, &m_prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    m_granularity = static_cast<std::int64_t>(g);
  }
}

// Every allocator is gone by now; pages left mapped mean an allocator leaked, and are returned quietly.
cuda_device::~cuda_device() {
  if (!m_driver) return;
  for (auto& [addr, page] : m_pages) {
    (void)m_driver->unmap(static_cast<CUdeviceptr>(addr), page.size);
    (void)m_driver->release(page.handle);
  }
}

memory_info cuda_device::memory() const {
  std::size_t free = 0, total = 0;
  HEADROOM_CUDA_CALL(cudaMemGetInfo(&free, &total));
  return {static_cast<std::int64_t>(free), static_cast<std::int64_t>(total)};
}

std::optional<std::uint64_t> cuda_device::map(std::int64_t bytes) {
  if (!within_budget(bytes)) return std::nullopt;
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, static_cast<std::size_t>(bytes));
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return std::nullopt;
  }
  HEADROOM_CUDA_CALL(e);
  m_used += bytes;
  return reinterpret_cast<std::uint64_t>(p);
}

void cuda_device::unmap(std::uint64_t address, std::int64_t bytes) {
  HEADROOM_CUDA_CALL(cudaFree(reinterpret_cast<void*>(address)));  // waits for the device
  m_used -= bytes;
}

std::optional<std::uint64_t> cuda_device::reserve_range(std::int64_t bytes) {
  if (!m_driver) throw device_error("expandable segments need the driver's VMM, which this device lacks");
  CUdeviceptr base = 0;
  const CUresult r = m_driver->address_reserve(&base, static_cast<std::size_t>(bytes), 0, 0, 0);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return std::nullopt;
  HEADROOM_CUDA_CALL(r);
  return static_cast<std::uint64_t>(base);
}

bool cuda_device::map_at(std::uint64_t base, std::int64_t offset, std::int64_t bytes, std::int64_t page) {
  if (!m_driver) throw device_error("expandable segments need the driver's VMM, which this device lacks");
  if (!within_budget(bytes)) return false;
  CUmemAccessDesc access{};
  access.location = m_prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  std::int64_t done = 0;
  for (; done < bytes; done += page) {
    const auto at = static_cast<CUdeviceptr>(base + static_cast<std::uint64_t>(offset + done));
    CUmemGenericAllocationHandle h{};
    const CUresult r = m_driver->create(&h, static_cast<std::size_t>(page), &m_prop, 0);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) break;
    HEADROOM_CUDA_CALL(r);
    m_pages[at] = {h,
                   static_cast<std::size_t>(
                       page)};  // recorded first, so a failure below still unmaps it in unmap_at's rollback
    HEADROOM_CUDA_CALL(m_driver->map(at, static_cast<std::size_t>(page), 0, h, 0));
    HEADROOM_CUDA_CALL(m_driver->set_access(at, static_cast<std::size_t>(page), &access, 1));
  }
  if (done < bytes) {  // out of memory part way: give back what this call mapped
    m_used += done;
    if (done > 0) unmap_at(base, offset, done, page);
    return false;
  }
  m_used += bytes;
  return true;
}

void cuda_device::unmap_at(std::uint64_t base, std::int64_t offset, std::int64_t bytes, std::int64_t page) {
  // Kernels still reading a page must finish before it goes (PyTorch synchronises here too).
  HEADROOM_CUDA_CALL(cudaStreamSynchronize(m_stream));
  for (std::int64_t done = 0; done < bytes; done += page) {
    const auto at = static_cast<CUdeviceptr>(base + static_cast<std::uint64_t>(offset + done));
    const auto it = m_pages.find(at);
    if (it == m_pages.end())
      throw device_error("unmapping a page that was never mapped at " + std::to_string(at));
    HEADROOM_CUDA_CALL(m_driver->unmap(at, static_cast<std::size_t>(page)));
    HEADROOM_CUDA_CALL(m_driver->release(it->second.handle));
    m_pages.erase(it);
  }
  m_used -= bytes;
}

void cuda_device::release_range(std::uint64_t base, std::int64_t bytes) {
  HEADROOM_CUDA_CALL(m_driver->address_free(static_cast<CUdeviceptr>(base), static_cast<std::size_t>(bytes)));
}

std::string cuda_device::describe() const {
  std::string s = "cuda (" + m_name + ", " + gib_str(m_total, 1) + " GiB";
  if (m_cap) s += ", capped at " + gib_str(*m_cap, 1) + " GiB";
  return s + ", " + trim(to_mib(m_granularity), 3) + " MiB granularity)";
}

}  // namespace headroom::probes
