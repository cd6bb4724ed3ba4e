// cuda_libraries.cpp: opening GPU libraries at run time (see cuda_libraries.hpp).
#include "probes/devices/cuda_libraries.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <type_traits>

namespace headroom::probes {

namespace {
std::vector<std::string> search_dirs() {
  std::vector<std::string> dirs;
  if (const char* extra = std::getenv("HEADROOM_LIBRARY_PATH")) {
    std::string s = extra;
    for (std::size_t at = 0; at <= s.size();) {
      const auto colon = s.find(':', at);
      const auto end = colon == std::string::npos ? s.size() : colon;
      if (end > at) dirs.push_back(s.substr(at, end - at));
      at = end + 1;
    }
  }
  if (const char* home = std::getenv("CUDA_HOME")) dirs.push_back(std::string(home) + "/lib64");
  dirs.push_back("/usr/local/cuda/lib64");
  return dirs;
}
}  // namespace

std::optional<shared_library> shared_library::open(const std::vector<std::string>& names, std::string& why) {
  std::string tried;
  for (const auto& n : names) {
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return shared_library(h, n);
    tried += (tried.empty() ? "" : ", ") + n;
  }
  for (const auto& d : search_dirs())
    for (const auto& n : names) {
      const std::string path = d + "/" + n;
      if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return shared_library(h, path);
    }
  why = "cannot open " + tried +
        " (searched the loader's path, HEADROOM_LIBRARY_PATH, $CUDA_HOME/lib64, "
        "/usr/local/cuda/lib64)";
  return std::nullopt;
}

shared_library::~shared_library() {
  if (m_handle) dlclose(m_handle);
}

void* shared_library::symbol(const char* name, std::string& why) const {
  void* p = dlsym(m_handle, name);
  if (!p) why = std::string(name) + " not found in " + m_path;
  return p;
}

const nvml_api* load_nvml(std::string& why) {
  // Opened once and kept for the process: NVML is initialised once, like the driver.
  static std::string failure;
  static const nvml_api* api = []() -> const nvml_api* {
    static std::optional<shared_library> lib =
        shared_library::open({"libnvidia-ml.so.1", "libnvidia-ml.so"}, failure);
    if (!lib) return nullptr;
    static nvml_api a;
    symbol_binder get(*lib, failure);
    get(a.init, "nvmlInit_v2");
    get(a.shutdown, "nvmlShutdown");
    get(a.device_by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
    get(a.device_memory, "nvmlDeviceGetMemoryInfo");
    get(a.driver_version, "nvmlSystemGetDriverVersion");
    get(a.error_string, "nvmlErrorString");
    if (!get.ok()) return nullptr;
    if (const int rc = a.init(); rc != 0) {
      failure = std::string("nvmlInit_v2 failed: ") + a.error_string(rc);
      return nullptr;
    }
    return &a;
  }();
  if (!api) why = failure;
  return api;
}

}  // namespace headroom::probes
