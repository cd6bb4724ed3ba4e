// multi_rank.cpp: rank messages, the per-rank summary and its record (see multi_rank.hpp).
#include "probes/ranks/multi_rank.hpp"

#include <algorithm>

#include "planner/errors.hpp"
#include "planner/json_fields.hpp"
#include "planner/model_files.hpp"
#include "probes/records/envelope.hpp"

namespace headroom::probes {

namespace {

nlohmann::json coords_json(const rank_coords& c) {
  return {{"tp", c.tp}, {"cp", c.cp}, {"dp", c.dp}, {"pp", c.pp}};
}

}  // namespace

std::optional<std::int64_t> nccl_total(const std::vector<nccl_group_memory>& nccl) {
  if (nccl.empty()) return std::nullopt;
  std::int64_t total = 0;
  for (const auto& g : nccl) total += g.total();
  return total;
}

nlohmann::json rank_block(const launch_info& li, const layout& l, const rank_coords& c,
                          const std::vector<nccl_group_memory>& nccl, const std::string& nccl_note) {
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : nccl)
    groups.push_back({{"group", g.name},
                      {"size", g.size},
                      {"rank_in_group", g.rank_in_group},
                      {"collective", g.collective},
                      {"first_collective_payload_bytes", g.first_bytes},
                      {"init_bytes", g.init_bytes ? nlohmann::json(*g.init_bytes) : nlohmann::json(nullptr)},
                      {"first_collective_bytes",
                       g.collective_bytes ? nlohmann::json(*g.collective_bytes) : nlohmann::json(nullptr)}});
  const auto total = nccl_total(nccl);
  return {{"rank", li.rank},
          {"world_size", li.size},
          {"local_rank", li.local_rank},
          {"launcher", li.launcher},
          {"hostname", li.hostname},
          {"order", "tp-cp-dp-pp (Megatron-LM's default, tp fastest)"},
          {"coordinates", coords_json(c)},
          {"sizes", {{"tp", l.tp}, {"cp", l.cp}, {"dp", l.dp()}, {"pp", l.pp}}},
          {"nccl",
           {{"groups", groups},
            {"total_bytes", total ? nlohmann::json(*total) : nlohmann::json(nullptr)},
            {"note", nccl_note}}}};
}

std::string to_message(const rank_outcome& o) {
  nlohmann::json j = {{"rank", o.rank},
                      {"hostname", o.hostname},
                      {"stage", o.stage},
                      {"error", o.error},
                      {"exit_status", o.exit_status},
                      {"record", o.record ? *o.record : nlohmann::json(nullptr)}};
  // Not UTF-8 (a path's bytes in an error line): replaced, so that the rank's outcome still reaches rank 0.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

rank_outcome outcome_from_message(const std::string& text, const std::string& origin) {
  const nlohmann::json j = parse_json_text(text, origin);
  if (!j.is_object()) throw bad_input(origin, "not a rank message");
  rank_outcome o;
  o.rank = static_cast<int>(detail::int_field(j, "rank", origin, 0, 1 << 24));
  o.hostname = detail::opt_string_field(j, "hostname", origin).value_or("");
  o.stage = static_cast<int>(detail::int_field(j, "stage", origin, 0, 1 << 24));
  o.error = detail::opt_string_field(j, "error", origin).value_or("");
  o.exit_status = static_cast<int>(detail::int_field(j, "exit_status", origin, 0, 255));
  if (j.contains("record") && j["record"].is_object()) o.record = j["record"];
  return o;
}

int rank_summary::exit_status() const {
  int worst = rank_exit::ok;
  // Device failures (5) and missing ranks first, then out of memory (3), then bad input (2), no device (4).
  for (const auto& r : rows)
    if (r.exit_status == rank_exit::device_failed) return rank_exit::device_failed;
  if (!missing.empty()) return rank_exit::device_failed;
  if (!out_of_memory.empty()) return rank_exit::does_not_fit;
  for (const auto& r : rows) worst = std::max(worst, r.exit_status);
  return worst;
}

namespace {

std::int64_t i64_at(const nlohmann::json& j, const char* a, const char* b) {
  if (!j.contains(a) || !j[a].is_object()) return 0;
  const auto& x = j[a];
  return x.contains(b) && x[b].is_number_integer() ? x[b].get<std::int64_t>() : 0;
}

}  // namespace

rank_summary summarise_ranks(const std::vector<std::optional<std::string>>& messages, const breakdown& b) {
  const layout& l = b.where;
  if (static_cast<int>(messages.size()) != l.gpus)
    throw bad_input("ranks", std::to_string(messages.size()) + " rank messages for a layout of " +
                                 std::to_string(l.gpus) + " ranks");
  rank_summary s;
  s.planner_worst_stage = b.worst;
  s.planner_worst_step_peak = b.worst_stage().step_peak;
  for (int r = 0; r < static_cast<int>(messages.size()); ++r) {
    rank_row row;
    row.rank = r;
    row.coords = coords_of(l, r);
    row.stage = row.coords.pp;
    row.predicted_step_peak = b.stages[static_cast<std::size_t>(row.stage)].step_peak;
    const auto& msg = messages[static_cast<std::size_t>(r)];
    if (!msg) {
      s.missing.push_back(r);
      s.rows.push_back(row);
      continue;
    }
    row.answered = true;
    rank_outcome o;
    try {
      o = outcome_from_message(*msg, "rank " + std::to_string(r));
    } catch (const bad_input& e) {
      o.error = e.what();
      o.exit_status = 1;
    }
    row.hostname = o.hostname;
    row.error = o.error;
    row.exit_status = o.exit_status;
    if (o.record) {
      const auto& rec = *o.record;
      row.requested = i64_at(rec, "replayed", "peak_requested_bytes");
      row.allocated = i64_at(rec, "replayed", "peak_allocated_bytes");
      row.reserved = i64_at(rec, "replayed", "peak_reserved_bytes");
      if (rec.contains("device_memory") && rec["device_memory"].is_object()) {
        const auto& d = rec["device_memory"];
        if (d.contains("used_at_reserved_peak_bytes") && d["used_at_reserved_peak_bytes"].is_number_integer())
          row.device_used = d["used_at_reserved_peak_bytes"].get<std::int64_t>();
      }
      if (rec.contains("rank") && rec["rank"].contains("nccl") &&
          rec["rank"]["nccl"].contains("total_bytes") &&
          rec["rank"]["nccl"]["total_bytes"].is_number_integer())
        row.nccl_bytes = rec["rank"]["nccl"]["total_bytes"].get<std::int64_t>();
      if (rec.contains("replayed") && rec["replayed"].contains("out_of_memory") &&
          rec["replayed"]["out_of_memory"].is_object()) {
        const auto& oom = rec["replayed"]["out_of_memory"];
        row.out_of_memory = true;
        row.oom_where = oom.value("phase", std::string("?")) + ", " + oom.value("tensor", std::string("?"));
      }
    }
    if (row.out_of_memory) s.out_of_memory.push_back(r);
    if (!o.record || row.exit_status == rank_exit::device_failed) s.failed.push_back(r);
    s.rows.push_back(row);
  }
  for (const auto& row : s.rows) {
    if (!row.answered || !row.error.empty()) continue;  // no record: nothing measured
    if (!s.worst_rank || row.footprint() > s.rows[static_cast<std::size_t>(*s.worst_rank)].footprint())
      s.worst_rank = row.rank;
  }
  if (s.worst_rank) {
    const int stage = s.rows[static_cast<std::size_t>(*s.worst_rank)].stage;
    s.worst_agrees = b.stages[static_cast<std::size_t>(stage)].step_peak == s.planner_worst_step_peak;
  }
  return s;
}

nlohmann::json summary_to_json(const rank_summary& s, const launch_info& li, const nlohmann::json& inputs,
                               const nlohmann::json& environment) {
  auto opt = [](const std::optional<std::int64_t>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : s.rows)
    rows.push_back(
        {{"rank", r.rank},
         {"hostname", r.hostname},
         {"coordinates", coords_json(r.coords)},
         {"stage", r.stage},
         {"answered", r.answered},
         {"error", r.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.error)},
         {"exit_status", r.exit_status},
         {"predicted_step_peak_bytes", r.predicted_step_peak},
         {"peak_requested_bytes", r.requested},
         {"peak_allocated_bytes", r.allocated},
         {"peak_reserved_bytes", r.reserved},
         {"device_used_at_peak_bytes", opt(r.device_used)},
         {"nccl_bytes", opt(r.nccl_bytes)},
         {"out_of_memory", r.out_of_memory ? nlohmann::json(r.oom_where) : nlohmann::json(nullptr)}});
  return records::enveloped(
      records::kind::multi_rank,
      {{"environment", environment},
       {"inputs", inputs},
       {"launcher", li.launcher},
       {"world_size", static_cast<int>(s.rows.size())},
       {"ranks", rows},
       {"missing_ranks", s.missing},
       {"out_of_memory_ranks", s.out_of_memory},
       {"failed_ranks", s.failed},
       {"worst_rank", s.worst_rank ? nlohmann::json(*s.worst_rank) : nlohmann::json(nullptr)},
       {"worst_rank_decided_by",
        "device used at the reserved peak when measured on a GPU, else peak reserved"},
       {"planner_worst_stage", s.planner_worst_stage},
       {"planner_worst_step_peak_bytes", s.planner_worst_step_peak},
       {"worst_rank_agrees_with_planner", s.worst_agrees},
       {"exit_status", s.exit_status()}});
}

std::string rank_record_path(const std::string& path, int rank, int world_size) {
  if (path.empty() || path == "-") return "";
  const int width = static_cast<int>(std::to_string(std::max(world_size - 1, 0)).size());
  std::string n = std::to_string(rank);
  n.insert(0, static_cast<std::size_t>(std::max(0, width - static_cast<int>(n.size()))), '0');
  const auto slash = path.find_last_of('/');
  const auto dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot == slash + 1)
    return path + ".rank" + n;
  return path.substr(0, dot) + ".rank" + n + path.substr(dot);
}

}  // namespace headroom::probes
