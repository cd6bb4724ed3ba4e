// gpu_types.cpp: the GPU type table (see gpu_types.hpp). Capacities are the driver's reported totals where a
// public report was found (nvidia-smi MiB), else the marketing size marked as such.
#include "gpu_types.hpp"

#include <array>
#include <cctype>
#include <cmath>

#include "errors.hpp"
#include "json_fields.hpp"
#include "units.hpp"

namespace headroom {

namespace {
constexpr std::int64_t MiB = 1024 * 1024;
// Dense bf16 rates: NVIDIA's A100, H100/H200 and B200 datasheets (312, 989, 835 for H100 NVL, 2250) and AMD's
// MI300X datasheet (1307). Links: NVLink 3 600 GB/s, NVLink 4 900 GB/s, NVLink 5 1800 GB/s (bidirectional
// per GPU, halved here to one direction), Infinity Fabric 7 x 64 GB/s; one 400 Gb/s NIC per GPU. FP8 tensor
// cores: Hopper and Blackwell (NVIDIA's H100 and B200 datasheets), CDNA3 (AMD's MI300X datasheet); Ampere has
// none (NVIDIA's A100 datasheet lists FP16, BF16, TF32, INT8 and INT4 tensor cores only). GB200: a Blackwell
// GPU of the Grace-Blackwell superchip at 1,200 W, 2500 dense bf16 (NVIDIA's Blackwell technical brief as
// glennklockwood.com/garden/processors/B200 tabulates it), NVLink 5, four GPUs to a compute tray (the GB200
// recipes, NVIDIA/Megatron-LM:tests/test_utils/recipes/gb200/*.yaml, launch 4 per node; an NVL72 rack's
// NVLink domain is larger: give --gpus-per-node for it).
constexpr std::array<gpu_type, 8> table = {{
    {"a100-40gb", 40960 * MiB, 312, 300, 25, 8,
     "nvidia-smi total 40960 MiB (modal-labs/modal-client PR #2797)", "sm80", false},
    {"a100-80gb", 81920 * MiB, 312, 300, 25, 8,
     "nvidia-smi total 81920 MiB (modal-labs/modal-client PR #2797)", "sm80", false},
    {"h100-80gb", 81559 * MiB, 989, 450, 50, 8,
     "nvidia-smi total 81559 MiB, 85,520,809,984 bytes (modal-labs/modal-client PR #2797)", "sm90", true},
    {"h100-94gb", 95830 * MiB, 835, 300, 50, 8,
     "assumed: the H100 NVL's 94 GB as nvidia-smi is commonly quoted (95830 MiB); not measured here", "sm90",
     true},
    {"h200-141gb", 143771 * MiB, 989, 450, 50, 8,
     "nvidia-smi total 143771 MiB on the H200 this project borrows (tool library device/KINDS.md)", "sm90", true},
    {"b200-192gb", static_cast<std::int64_t>(178.35 * 1024) * MiB, 2250, 900, 50, 8,
     "CUDA totalGlobalMem 178.35 GiB (pytorch/ao PR #4002); the marketing 192 GB is not what a process gets",
     "sm100", true},
    {"gb200-186gb", 189471 * MiB, 2500, 900, 50, 4,
     "nvidia-smi total 189471 MiB on four NVIDIA GB200, driver 590.48.01 "
     "(SlinkyProject/slurm-operator@f2ed3fc5 docs/installation.md); the marketing 186 GB per GPU",
     "sm100", true},
    {"mi300x-192gb", 196592 * MiB, 1307, 448, 50, 8,
     "assumed: 192 GiB less 16 MiB as rocm-smi is commonly quoted; not measured here", "gfx942", true},
}};
}  // namespace

std::span<const gpu_type> gpu_types() {
  return table;
}

bool device_name_may_be(const std::string& device_name, const gpu_type& g) {
  std::string lower;
  for (unsigned char c : device_name) lower += static_cast<char>(std::tolower(c));
  const std::string type = g.name;
  const std::string family = type.substr(0, type.find('-'));  // "h100" of "h100-80gb"
  if (lower.find(family) == std::string::npos) return false;
  // The memory size the name states, "80gb" (digits right before "gb"), if any, must be the type's.
  for (std::size_t at = lower.find("gb"); at != std::string::npos; at = lower.find("gb", at + 2)) {
    std::size_t from = at;
    while (from > 0 && std::isdigit(static_cast<unsigned char>(lower[from - 1]))) --from;
    if (from == at) continue;
    if (type.find("-" + lower.substr(from, at - from + 2)) == std::string::npos) return false;
  }
  return true;
}

bool device_total_may_be(const std::string& device_name, std::int64_t total) {
  bool named = false;
  for (const auto& g : table) {
    if (!device_name_may_be(device_name, g)) continue;
    named = true;
    const double cap = static_cast<double>(g.capacity);
    if (std::abs(static_cast<double>(total) - cap) <= device_total_tolerance * cap) return true;
  }
  return !named;
}

const gpu_type* known_gpu_type(const std::string& name) {
  for (const auto& g : table)
    if (name == g.name) return &g;
  return nullptr;
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
