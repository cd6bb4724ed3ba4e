// sidecar.cpp: reading the capture sidecar (sidecar.hpp). Its fields are those tools/headroom_capture.py
// writes (the `sidecar` function there); every one is checked, and the first wrong one is named.
#include "probes/snapshots/sidecar.hpp"

#include <filesystem>

#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/gpu_types.hpp"
#include "planner/imports/config_file.hpp"
#include "planner/json_fields.hpp"
#include "planner/model_files.hpp"
#include "probes/records/measurement_record.hpp"

namespace headroom::probes {

namespace {

constexpr std::uintmax_t sidecar_max_bytes = std::uintmax_t{4} << 20;  // the problem text is at most 1 MiB

// Returns how a refusal of the absent `key` of object `j` ends: the key of `j` it resembles ("nmae" for
// "name"), or the fix when none does.
std::string missing_fix(const nlohmann::json& j, const char* key) {
  std::vector<std::string> keys;
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  const std::string near = detail::closest_name(key, keys);
  if (!near.empty()) return "; the sidecar has '" + shown_name(near) + "': did you mean it?";
  return ": tools/headroom_capture.py writes it; capture again, or add it";
}

// Returns j[key] as an object; throws naming "<origin>: <key>" when missing or not an object.
const nlohmann::json& sidecar_block(const nlohmann::json& j, const char* key, const std::string& origin) {
  const auto it = j.find(key);
  if (it == j.end()) throw bad_input(origin + ": " + key, "missing" + missing_fix(j, key));
  if (!it->is_object()) throw bad_input(origin + ": " + key, "must be an object, as tools/headroom_capture.py writes it");
  return *it;
}

// Returns j[key] as an integer in [lo, hi] (json_fields.hpp int_field), naming the key it resembles when absent.
std::int64_t sidecar_int(const nlohmann::json& j, const char* key, const std::string& where, std::int64_t lo,
                         std::int64_t hi) {
  if (const auto it = j.find(key); it == j.end() || it->is_null())
    throw bad_input(where + "." + key, "missing" + missing_fix(j, key));
  return detail::int_field(j, key, where, lo, hi);
}

// Returns j[key] as printable text; "" when absent or null and `nullable`, else refused.
std::string sidecar_text(const nlohmann::json& j, const char* key, const std::string& where, bool nullable) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (nullable) return "";
    throw bad_input(where + "." + key, "missing" + missing_fix(j, key));
  }
  if (!it->is_string()) throw bad_input(where + "." + key, "must be a string");
  const auto& s = it->get_ref<const std::string&>();
  if (s.size() > 4096) throw bad_input(where + "." + key, "longer than 4096 characters");
  return printable(s, 4096);
}

std::int64_t sidecar_bytes(const nlohmann::json& j, const char* key, const std::string& where) {
  return sidecar_int(j, key, where, 0, max_record_bytes);
}

}  // namespace

std::string sidecar_path(const std::string& snapshot_path) {
  return snapshot_path + ".headroom.json";
}

capture_sidecar parse_sidecar(const nlohmann::json& j, const std::string& origin, const std::string& snapshot_name) {
  if (!j.is_object()) throw bad_input(origin, "not a JSON object");
  capture_sidecar c;
  c.path = origin;
  const std::string schema = sidecar_text(j, "schema", origin + ": ", false);
  if (schema != "headroom.capture/1" && schema.rfind("headroom.capture/1.", 0) != 0)
    throw bad_input(origin + ": schema", "'" + schema + "' is not headroom.capture/1, the schema this headroom "
                                                        "reads: capture with the tools/headroom_capture.py beside it");
  if (const auto named = sidecar_text(j, "snapshot", origin + ": ", true); !named.empty() && named != snapshot_name)
    throw bad_input(origin + ": snapshot",
                    "names '" + named + "', not '" + printable(snapshot_name) + "' beside which it lies");
  const auto& gpu = sidecar_block(j, "gpu", origin);
  const std::string g = origin + ": gpu";
  c.gpu = sidecar_text(gpu, "name", g, false);
  c.gpu_total_memory = sidecar_int(gpu, "total_memory", g, 1, max_record_bytes);
  // The total must be one the named device has (planner/gpu_types.hpp): an H200's sidecar stating 80 GiB is
  // from another device or edited, and every check against the total below would trust it.
  if (!c.gpu.empty() && !device_total_may_be(c.gpu, c.gpu_total_memory))
    throw bad_input(origin + ": gpu.total_memory",
                    std::to_string(c.gpu_total_memory) + " bytes is not the memory of a " + printable(c.gpu, 60) +
                        " (headroom gpus lists the totals each type reports)");
  c.gpu_index = static_cast<int>(sidecar_int(gpu, "index", g, 0, 1 << 20));
  c.driver = sidecar_text(gpu, "driver", g, true);
  c.driver_from = sidecar_text(gpu, "driver_from", g, true);
  const auto& sw = sidecar_block(j, "software", origin);
  c.torch = sidecar_text(sw, "torch", origin + ": software", false);
  c.cuda_runtime = sidecar_text(sw, "cuda_runtime", origin + ": software", true);
  c.nccl = sidecar_text(sw, "nccl", origin + ": software", true);
  c.alloc_conf = sidecar_text(sidecar_block(j, "allocator", origin), "PYTORCH_CUDA_ALLOC_CONF",
                              origin + ": allocator", false);
  const auto& pl = sidecar_block(j, "placement", origin);
  const std::string p = origin + ": placement";
  c.launcher = sidecar_text(pl, "launcher", p, true);
  c.rank = static_cast<int>(sidecar_int(pl, "rank", p, 0, 1000000));
  // tools/headroom_capture.py writes null when the launcher set a rank but no world size: unknown (0), not 1.
  c.world_size = static_cast<int>(detail::opt_int_field(pl, "world_size", p, 1, 1000000).value_or(0));
  if (const auto l = detail::opt_int_field(pl, "local_rank", p, 0, 1000000)) c.local_rank = static_cast<int>(*l);
  // A rank is below the world size with or without a launcher (a single process is rank 0 of 1).
  if (c.world_size > 0 && c.rank >= c.world_size)
    throw bad_input(p + ".world_size", std::to_string(c.world_size) + " is not above rank " + std::to_string(c.rank) +
                                           ": a world holds ranks 0 to world_size - 1");
  const auto& peaks = sidecar_block(j, "peaks", origin);
  c.max_reserved = sidecar_bytes(peaks, "max_memory_reserved", origin + ": peaks");
  c.max_allocated = sidecar_bytes(peaks, "max_memory_allocated", origin + ": peaks");
  if (c.max_allocated > c.max_reserved)
    throw bad_input(origin + ": peaks.max_memory_allocated", "is larger than max_memory_reserved");
  if (c.max_reserved > c.gpu_total_memory)
    throw bad_input(origin + ": peaks.max_memory_reserved", "is larger than the GPU's total memory (gpu.total_memory)");
  const auto& used = sidecar_block(j, "device_used_at_peak", origin);
  c.device_used_at_peak = sidecar_bytes(used, "bytes", origin + ": device_used_at_peak");
  c.used_how = sidecar_text(used, "how", origin + ": device_used_at_peak", false);
  c.outside_allocator = sidecar_int(sidecar_block(j, "at_end", origin), "outside_allocator",
                                          origin + ": at_end", -max_record_bytes, max_record_bytes);
  // The capture script reads it as cudaMemGetInfo's used less memory_reserved (tools/headroom_capture.py,
  // `sidecar`): the device's used memory holds the allocator's reserved bytes, so it is never negative,
  // and it is part of the device, so never above the device's total. Either is a sidecar edited by hand or
  // written by another tool; it is refused, not defaulted (the least card would take the default instead).
  if (c.outside_allocator < 0)
    throw bad_input(origin + ": at_end.outside_allocator",
                    "is negative (" + std::to_string(c.outside_allocator) +
                        "): the device's used memory cannot be below the allocator's reserved bytes");
  if (c.outside_allocator > c.gpu_total_memory)
    throw bad_input(origin + ": at_end.outside_allocator",
                    "(the CUDA context and other memory outside the allocator) is larger than the GPU's total "
                    "memory (gpu.total_memory)");
  if (c.device_used_at_peak > c.gpu_total_memory)
    throw bad_input(origin + ": device_used_at_peak.bytes", "is larger than the GPU's total memory (gpu.total_memory)");
  const auto& when = sidecar_block(j, "captured_utc", origin);
  c.started_utc = sidecar_text(when, "start", origin + ": captured_utc", false);
  c.ended_utc = sidecar_text(when, "end", origin + ": captured_utc", false);
  c.ended_by = sidecar_text(j, "ended_by", origin + ": ", true);
  if (const auto pr = j.find("problem"); pr != j.end() && !pr->is_null()) {
    if (!pr->is_object()) throw bad_input(origin + ": problem", "must be an object or null");
    const std::string kind = sidecar_text(*pr, "kind", origin + ": problem", false);
    if (kind != "file" && kind != "megatron_args")
      throw bad_input(origin + ": problem.kind", "'" + kind + "' is neither 'file' nor 'megatron_args'" +
                                                      detail::did_you_mean(kind, {"file", "megatron_args"}));
    c.problem = *pr;
  }
  return c;
}

std::optional<capture_sidecar> load_sidecar_beside(const std::string& snapshot_path) {
  const std::string path = sidecar_path(snapshot_path);
  std::error_code ec;
  // Absent: no sidecar. Anything else there (unreadable, a directory, a FIFO) is read and refused.
  if (std::filesystem::symlink_status(path, ec).type() == std::filesystem::file_type::not_found) return std::nullopt;
  const std::string shown = shown_name(path);
  const nlohmann::json j = parse_json_text(read_regular_file(path, sidecar_max_bytes, "a capture sidecar"), shown);
  return parse_sidecar(j, shown, std::filesystem::path(snapshot_path).filename().string());
}

void check_sidecar_against(const capture_sidecar& c, const torch_snapshot& s) {
  // The snapshot's final segments on the captured GPU are what the allocator held when it was dumped: the
  // process's peaks, read after the steps, can only be at least that much (torch.cuda.max_memory_* never
  // fall), and the GPU holds it all.
  std::int64_t reserved = 0, allocated = 0;
  for (const auto& g : s.segments)
    if (g.device == c.gpu_index) reserved += g.total_size, allocated += g.allocated_size;
  const auto refuse = [&](const std::string& field, std::int64_t figure, const std::string& what, std::int64_t other) {
    throw bad_input(c.path + ": " + field, gib_str(figure, 2) + " GiB is below the " + gib_str(other, 2) + " GiB " +
                                               what + ": the sidecar is from another run, or was edited");
  };
  if (c.max_reserved < reserved)
    refuse("peaks.max_memory_reserved", c.max_reserved,
           "the snapshot's own segments reserve at its end on device " + std::to_string(c.gpu_index), reserved);
  if (c.max_allocated < allocated)
    refuse("peaks.max_memory_allocated", c.max_allocated,
           "the snapshot's own blocks hold at its end on device " + std::to_string(c.gpu_index), allocated);
  if (c.gpu_total_memory < reserved)
    refuse("gpu.total_memory", c.gpu_total_memory,
           "the snapshot's own segments reserve on device " + std::to_string(c.gpu_index), reserved);
  if (c.device_used_at_peak > 0 && c.device_used_at_peak < c.max_reserved)
    refuse("device_used_at_peak.bytes", c.device_used_at_peak, "the sidecar's own max_memory_reserved",
           c.max_reserved);
}

std::string sidecar_conf_warning(const capture_sidecar& c, const std::string& snapshot_conf) {
  // PyTorch records in the snapshot the last settings string its allocator parsed (c10/cuda/
  // CUDAAllocatorConfig.cpp, parseArgs: last_allocator_settings_ = env; torch/csrc/cuda/Module.cpp puts it in
  // allocator_settings["PYTORCH_CUDA_ALLOC_CONF"]): the environment variable at start, or the string given
  // later to torch.cuda.memory._set_allocator_settings. The sidecar holds the environment variable. They
  // can honestly differ (settings changed at run time), so this is a warning, not an error: the replay
  // runs under the snapshot's own settings, and only the record's environment shows the sidecar's.
  if (c.alloc_conf == snapshot_conf) return "";
  return "warning: " + c.path + ": allocator.PYTORCH_CUDA_ALLOC_CONF '" + printable(c.alloc_conf, 200) +
         "' differs from the snapshot's own allocator_settings '" + printable(snapshot_conf, 200) +
         "' (changed at run time, or the sidecar is from another run); the replay uses the snapshot's";
}

nlohmann::json sidecar_environment(const capture_sidecar& c) {
  auto opt = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  return {{"from", "capture sidecar " + c.path},
          {"gpu", c.gpu},
          {"gpu_total_memory", c.gpu_total_memory},
          {"gpu_index", c.gpu_index},
          {"driver", opt(c.driver)},
          {"driver_from", opt(c.driver_from)},
          {"cuda_runtime", opt(c.cuda_runtime)},
          {"nccl", opt(c.nccl)},
          {"torch", c.torch},
          {"PYTORCH_CUDA_ALLOC_CONF", c.alloc_conf},
          {"launcher", opt(c.launcher)},
          {"rank", c.rank},
          {"local_rank", c.local_rank ? nlohmann::json(*c.local_rank) : nlohmann::json(nullptr)},
          {"world_size", c.world_size > 0 ? nlohmann::json(c.world_size) : nlohmann::json(nullptr)}};
}

nlohmann::json sidecar_capture_block(const capture_sidecar& c) {
  return {{"sidecar", c.path},
          {"peaks", {{"max_memory_reserved", c.max_reserved}, {"max_memory_allocated", c.max_allocated}}},
          {"device_used_at_peak", {{"bytes", c.device_used_at_peak}, {"how", c.used_how}}},
          {"outside_allocator_at_end", c.outside_allocator},
          {"captured_utc", {{"start", c.started_utc}, {"end", c.ended_utc}}},
          {"ended_by", c.ended_by.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.ended_by)},
          {"problem", c.problem},
          {"note", "measured by torch.cuda in the captured process (tools/headroom_capture.py)"}};
}

}  // namespace headroom::probes
