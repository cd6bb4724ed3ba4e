// cuda_libraries.hpp: the GPU libraries the probes open at run time instead of linking: NVML (ships with
// the driver, absent on a build machine), cuBLAS and NCCL (large, and found in different places on
// different machines: the toolkit, PyTorch's wheels). Opening at run time keeps `headroom` runnable
// everywhere: a missing library is a layer "not measured: <why>", never a binary that will not start.
// Searched: the loader's own path (LD_LIBRARY_PATH, ld.so.cache), then HEADROOM_LIBRARY_PATH (colon-
// separated folders), $CUDA_HOME/lib64 and /usr/local/cuda/lib64.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace headroom::probes {

class shared_library {
 public:
  // Opens the first of `names` found; nullopt with `why` naming what was tried.
  static std::optional<shared_library> open(const std::vector<std::string>& names, std::string& why);
  shared_library(shared_library&& o) noexcept : m_handle(o.m_handle), m_path(std::move(o.m_path)) {
    o.m_handle = nullptr;
  }
  shared_library(const shared_library&) = delete;
  shared_library& operator=(const shared_library&) = delete;
  shared_library& operator=(shared_library&&) = delete;
  ~shared_library();

  // Returns the symbol's address, or nullptr with `why`.
  void* symbol(const char* name, std::string& why) const;
  const std::string& path() const { return m_path; }

 private:
  shared_library(void* h, std::string path) : m_handle(h), m_path(std::move(path)) {}
  void* m_handle;
  std::string m_path;
};

// Resolves the symbols of one library into a struct of function pointers: `bind(fn, "name")` for each;
// ok() says whether all were found, the first missing one is named in `why`.
class symbol_binder {
 public:
  symbol_binder(const shared_library& lib, std::string& why) : m_lib(lib), m_why(why) {}
  template <class Fn>
  void operator()(Fn*& fn, const char* name) {
    void* p = m_lib.symbol(name, m_why);
    m_ok = m_ok && p;
    fn = reinterpret_cast<Fn*>(p);
  }
  bool ok() const { return m_ok; }

 private:
  const shared_library& m_lib;
  std::string& m_why;
  bool m_ok = true;
};

// NVML, as far as the probes use it. Return codes are NVML's (0 = success).
struct nvml_api {
  struct memory {
    unsigned long long total, free, used;  // nvmlMemory_t
  };
  using device_handle = void*;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*device_by_pci_bus_id)(const char*, device_handle*) = nullptr;
  int (*device_memory)(device_handle, memory*) = nullptr;
  int (*driver_version)(char*, unsigned) = nullptr;
  const char* (*error_string)(int) = nullptr;
};

// Returns NVML's functions (the library stays open for the process), or nullopt with `why`.
const nvml_api* load_nvml(std::string& why);

}  // namespace headroom::probes
