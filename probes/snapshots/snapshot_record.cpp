// snapshot_record.cpp: the measurement record of a snapshot (snapshot_record.hpp).
#include "probes/snapshots/snapshot_record.hpp"

#include <nlohmann/json.hpp>

#include "probes/records/envelope.hpp"

namespace headroom::probes {

nlohmann::json snapshot_record(const torch_snapshot& s, const snap_summary& sum) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : sum.devices) {
    nlohmann::json largest = nlohmann::json::array();
    for (const auto& b : d.largest_at_peak)
      largest.push_back({{"address", b.addr}, {"bytes", b.size}, {"frame", b.frame}});
    nlohmann::json ooms = nlohmann::json::array();
    for (const auto& o : d.ooms)
      ooms.push_back(
          {{"event", o.event}, {"bytes", o.size}, {"device_free", o.device_free}, {"frame", o.frame}});
    devices.push_back({{"device", d.device},
                       {"events", d.events},
                       {"counts", d.counts},
                       {"streams", d.streams},
                       {"cold", d.cold},
                       {"cold_why", d.cold_why},
                       {"live_before_window", {{"blocks", d.live_before}, {"bytes", d.live_before_bytes}}},
                       {"start_state", d.cold ? nlohmann::json(nullptr)
                                              : nlohmann::json{{"reconstructed", d.start_reconstructed},
                                                               {"how", d.start_why}}},
                       {"peak_requested", {{"bytes", d.peak_requested}, {"event", d.peak_requested_event}}},
                       {"peak_reserved",
                        {{"bytes", d.peak_reserved},
                         {"event", d.peak_reserved_event},
                         {"from_segment_events", d.reserved_from_events}}},
                       {"requested_at_reserved_peak", d.requested_at_reserved_peak},
                       {"fragmentation_at_reserved_peak", d.fragmentation_at_reserved_peak},
                       {"largest_live_at_peak", largest},
                       {"ooms", ooms},
                       {"empty_cache_calls", d.empty_cache_calls}});
  }
  nlohmann::json settings = nullptr;
  if (s.settings.recorded)
    settings = {{"PYTORCH_CUDA_ALLOC_CONF", s.settings.conf},
                {"max_split_size", s.settings.max_split_size ? nlohmann::json(*s.settings.max_split_size)
                                                             : nlohmann::json(nullptr)},
                {"expandable_segments", s.settings.expandable_segments},
                {"garbage_collection_threshold", s.settings.garbage_collection_threshold}};
  return records::enveloped(records::kind::measurement,
                            {{"backend", "pytorch-snapshot"},
                             {"measured", true},
                             {"source", s.origin},
                             {"capacity", s.capacity ? nlohmann::json(*s.capacity) : nlohmann::json(nullptr)},
                             {"allocator_settings", settings},
                             {"devices", devices},
                             {"final_segments",
                              {{"count", sum.final_segments},
                               {"reserved", sum.final_reserved},
                               {"allocated", sum.final_allocated},
                               {"requested", sum.final_requested}}}});
}

}  // namespace headroom::probes
