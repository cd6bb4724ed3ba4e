// gpu_types.cpp: the GPU type table (see gpu_types.hpp). Capacities are the driver's reported totals where a
// public report was found (nvidia-smi MiB), else the marketing size marked as such.
#include "gpu_types.hpp"

#include <array>

#include "errors.hpp"
#include "json_fields.hpp"
#include "units.hpp"

namespace headroom {

namespace {
constexpr std::int64_t MiB = 1024 * 1024;
// Dense bf16 rates: NVIDIA's A100, H100/H200 and B200 datasheets (312, 989, 835 for H100 NVL, 2250) and AMD's
// MI300X datasheet (1307). Links: NVLink 3 600 GB/s, NVLink 4 900 GB/s, NVLink 5 1800 GB/s (bidirectional
// per GPU, halved here to one direction), Infinity Fabric 7 x 64 GB/s; one 400 Gb/s NIC per GPU.
constexpr std::array<gpu_type, 7> table = {{
    {"a100-40gb", 40960 * MiB, 312, 300, 25, 8,
     "nvidia-smi total 40960 MiB (modal-labs/modal-client PR #2797)"},
    {"a100-80gb", 81920 * MiB, 312, 300, 25, 8,
     "nvidia-smi total 81920 MiB (modal-labs/modal-client PR #2797)"},
    {"h100-80gb", 81559 * MiB, 989, 450, 50, 8,
     "nvidia-smi total 81559 MiB, 85,520,809,984 bytes (modal-labs/modal-client PR #2797)"},
    {"h100-94gb", 95830 * MiB, 835, 300, 50, 8,
     "assumed: the H100 NVL's 94 GB as nvidia-smi is commonly quoted (95830 MiB); not measured here"},
    {"h200-141gb", 143771 * MiB, 989, 450, 50, 8,
     "nvidia-smi total 143771 MiB on the H200 this project borrows (tool library device/KINDS.md)"},
    {"b200-192gb", static_cast<std::int64_t>(178.35 * 1024) * MiB, 2250, 900, 50, 8,
     "CUDA totalGlobalMem 178.35 GiB (pytorch/ao PR #4002); the marketing 192 GB is not what a process gets"},
    {"mi300x-192gb", 196592 * MiB, 1307, 448, 50, 8,
     "assumed: 192 GiB less 16 MiB as rocm-smi is commonly quoted; not measured here"},
}};
}  // namespace

std::span<const gpu_type> gpu_types() {
  return table;
}

const gpu_type& find_gpu_type(const std::string& name) {
  for (const auto& t : table)
    if (name == t.name) return t;
  std::vector<std::string> names;
  for (const auto& t : table) names.emplace_back(t.name);
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  const auto near = detail::closest_name(name, names);
  throw bad_input("gpu-type", "unknown GPU type '" + name.substr(0, 60) + "'" +
                                  (!near.empty() ? " (did you mean '" + near + "'?)" : "") + "; known: " + known);
}

}  // namespace headroom
