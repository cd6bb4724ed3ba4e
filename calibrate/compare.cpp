// compare.cpp: matching records by case, naming the two environments and listing what moved (see
// compare.hpp).
#include "compare.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

namespace headroom::calibrate {

namespace {

// Returns raw[a][b]... as a string, or "" when absent or not a string.
std::string cmp_raw_string(const nlohmann::json& raw, std::initializer_list<const char*> path) {
  const nlohmann::json* j = &raw;
  for (const char* k : path) {
    if (!j->is_object()) return "";
    const auto it = j->find(k);
    if (it == j->end()) return "";
    j = &*it;
  }
  return j->is_string() ? j->get<std::string>() : "";
}

// The torch version a record states: a capture's sidecar puts it in the environment block
// (tools/headroom_capture.py, headroom.capture/1).
std::string cmp_torch_of(const probes::measurement_record& r) {
  for (const char* k : {"torch", "torch_version"}) {
    const std::string v = cmp_raw_string(r.raw, {"environment", k});
    if (!v.empty()) return v;
  }
  return "";
}

// The parts of an environment, by name, in the order they are printed.
std::vector<std::pair<std::string, std::string>> cmp_environment_parts(const probes::measurement_record& r) {
  return {{"GPU", r.gpu},
          {"driver", r.driver},
          {"CUDA", r.cuda_runtime},
          {"torch", cmp_torch_of(r)},
          {"NCCL", r.nccl},
          {"PYTORCH_CUDA_ALLOC_CONF", cmp_raw_string(r.raw, {"environment", "PYTORCH_CUDA_ALLOC_CONF"})}};
}

// Returns the non-negative integer at object path `path` inside `j`, or -1.
std::int64_t cmp_count_at(const nlohmann::json& j, std::initializer_list<const char*> path) {
  const nlohmann::json* x = &j;
  for (const char* k : path) {
    if (!x->is_object()) return -1;
    const auto it = x->find(k);
    if (it == x->end()) return -1;
    x = &*it;
  }
  return x->is_number_integer() && x->get<std::int64_t>() >= 0 ? x->get<std::int64_t>() : -1;
}

struct cmp_watched {
  double value = 0;
  figure_unit unit = figure_unit::bytes;
};

// The figures of a record that a regression check watches, by name.
std::map<std::string, cmp_watched> cmp_figures(const probes::measurement_record& r) {
  std::map<std::string, cmp_watched> f;
  auto bytes = [&](const std::string& name, std::int64_t v) {
    f[name] = {static_cast<double>(v), figure_unit::bytes};
  };
  if (r.kind == "overheads") {
    if (r.fixed_overhead_bytes) bytes("fixed overheads", *r.fixed_overhead_bytes);
    for (const auto& l : r.raw.value("layers", nlohmann::json::array()))
      if (l.is_object() && l.contains("bytes") && l["bytes"].is_number_integer())
        bytes(l.value("name", std::string("?")), l["bytes"].get<std::int64_t>());
    return f;
  }
  if (r.kind == "observation") {  // one published figure, named by its kind
    if (r.figure == "device_used" && r.device_used_at_peak)
      bytes("device used (observed)", *r.device_used_at_peak);
    if (r.figure == "reserved_peak") bytes("peak reserved (observed)", r.peak_reserved);
    if (r.figure == "allocated_peak") bytes("peak allocated (observed)", r.peak_allocated);
    return f;
  }
  bytes("peak reserved", r.peak_reserved);
  if (r.kind == "probe") bytes("peak allocated", r.peak_allocated);
  f["fragmentation at the reserved peak"] = {r.fragmentation, figure_unit::fraction};
  if (r.device_used_at_peak) {
    bytes("device used at the reserved peak", *r.device_used_at_peak);
    // What the device holds beyond the allocator: the CUDA context, cuBLAS workspaces, NCCL's buffers.
    bytes("context and NCCL (device used - reserved)",
          *r.device_used_at_peak - r.used_before_context.value_or(0) - r.peak_reserved);
  }
  if (r.used_after_context && r.used_before_context)
    bytes("context (used after - before)", *r.used_after_context - *r.used_before_context);
  if (r.kind == "snapshot") {
    // Segments the capture created (cudaMalloc'd or mapped; the summary's per-action counts) and those held
    // at the peak (the report view's segments_at_peak, probes/snapshots/snapshot_record.cpp).
    if (r.raw.contains("devices") && r.raw["devices"].is_array() && !r.raw["devices"].empty()) {
      const auto& c = r.raw["devices"][0];
      const std::int64_t a = cmp_count_at(c, {"counts", "segment_alloc"}),
                         m = cmp_count_at(c, {"counts", "segment_map"});
      if (a >= 0 || m >= 0)
        f["segments created"] = {
            static_cast<double>(std::max<std::int64_t>(a, 0) + std::max<std::int64_t>(m, 0)),
            figure_unit::count};
    }
    const std::int64_t held = cmp_count_at(r.snapshot_view, {"segments_at_peak", "count"});
    if (held >= 0) f["segments at the peak"] = {static_cast<double>(held), figure_unit::count};
  }
  return f;
}

// Judges one moved figure against the tolerance of its unit.
moved_figure cmp_judged(const std::string& key, const std::string& name, const cmp_watched& a,
                        const cmp_watched& b, const tolerance& tol) {
  moved_figure m{key, name, a.value, b.value, b.unit, b.unit == figure_unit::bytes, false, false, 0};
  const double d = std::fabs(m.new_value - m.old_value);
  switch (m.unit) {
    case figure_unit::bytes:
      m.allowed = std::max(tol.fraction * std::fabs(m.old_value), static_cast<double>(tol.bytes));
      break;
    case figure_unit::fraction:
      m.allowed = tol.fragmentation;
      break;
    case figure_unit::count:
      m.allowed = tol.segments * std::fabs(m.old_value);
      break;
  }
  m.exceeds = d > m.allowed;
  m.worse = m.new_value > m.old_value;
  return m;
}

// The distinct environments of a set, one line each.
std::vector<std::string> cmp_environments(const std::vector<probes::measurement_record>& set) {
  std::set<std::string> s;
  for (const auto& r : set) s.insert(environment_of(r));
  return {s.begin(), s.end()};
}

// What differs between the environments of two sets: per part, the values on each side.
std::vector<std::string> cmp_changes(const std::vector<probes::measurement_record>& a,
                                     const std::vector<probes::measurement_record>& b) {
  std::map<std::string, std::set<std::string>> va, vb;
  std::vector<std::string> order;
  // By side, not by address: a set compared with itself is both sides.
  for (int side = 0; side < 2; ++side)
    for (const auto& r : side == 0 ? a : b)
      for (const auto& [part, value] : cmp_environment_parts(r)) {
        if (std::find(order.begin(), order.end(), part) == order.end()) order.push_back(part);
        (side == 0 ? va : vb)[part].insert(value.empty() ? "not stated" : value);
      }
  std::vector<std::string> out;
  auto join = [](const std::set<std::string>& s) {
    std::string t;
    for (const auto& v : s) t += (t.empty() ? "" : ", ") + v;
    return t;
  };
  for (const auto& part : order)
    if (va[part] != vb[part]) out.push_back(part + ": " + join(va[part]) + " -> " + join(vb[part]));
  return out;
}

}  // namespace

std::string case_key(const probes::measurement_record& r) {
  // Appended piece by piece: `"x" + std::string` temporaries trip GCC 12's -Wrestrict (bug 105651).
  std::string k = r.kind;
  auto add = [&](const std::string& part) {
    k.push_back(' ');
    k.append(part);
  };
  add(r.backend);
  if (r.inputs) add(r.inputs->model.name);
  if (r.raw.contains("inputs") && r.raw["inputs"].contains("layout") &&
      r.raw["inputs"]["layout"].is_string()) {
    std::string layout = r.raw["inputs"]["layout"].get<std::string>();
    layout.push_back(']');
    add(layout.insert(0, 1, '['));
  }
  if (r.kind == "probe") {
    add("stage");
    add(std::to_string(r.stage));
    add(r.allocator);
    if (r.rank) {
      add("rank");
      add(std::to_string(*r.rank));
    }
  }
  if (r.kind == "overheads") add(r.raw.value("module_loading", std::string()));
  if (r.kind == "observation") add(r.figure);
  // A snapshot with its run's case attached is matched by the case; one without, by its file name (the
  // directory differs between two machines' copies).
  if (r.kind == "snapshot" && !r.inputs)
    add(std::filesystem::path(r.raw.value("source", std::string())).filename().string());
  return k;
}

std::string environment_of(const probes::measurement_record& r) {
  std::string s;
  for (const auto& [part, value] : cmp_environment_parts(r))
    s += (s.empty() ? "" : ", ") + part + " " + (value.empty() ? "not stated" : value);
  return s;
}

comparison compare(const std::vector<probes::measurement_record>& baseline,
                   const std::vector<probes::measurement_record>& fresh, const tolerance& tol) {
  comparison c;
  c.baseline_environments = cmp_environments(baseline);
  c.new_environments = cmp_environments(fresh);
  c.environment_changes = cmp_changes(baseline, fresh);
  std::map<std::string, const probes::measurement_record*> old_by, new_by;
  // One record per case on each side: two records of one case would leave one of them unread (a regression
  // in it unseen), so they are refused, both named.
  auto index = [](const std::vector<probes::measurement_record>& set, const char* side,
                  std::map<std::string, const probes::measurement_record*>& by) {
    for (const auto& r : set) {
      const auto [it, added] = by.emplace(case_key(r), &r);
      if (!added)
        throw bad_input("compare", std::string("the ") + side + " set holds two records of one case, '" +
                                       it->second->origin + "' and '" + r.origin +
                                       "': compare needs one per case on each side (split the set)");
    }
  };
  index(baseline, "baseline", old_by);
  index(fresh, "new", new_by);
  std::vector<
      std::pair<std::string, std::pair<const probes::measurement_record*, const probes::measurement_record*>>>
      pairs;
  // Only records with no case attached (a snapshot named by its file) may be paired by elimination: two
  // records of different problems are different questions, never compared.
  std::map<std::string, std::vector<std::string>> lone_old, lone_new;  // by kind
  for (const auto& [k, r] : old_by)
    if (!new_by.count(k)) {
      if (r->inputs)
        c.only_baseline.push_back(k);
      else
        lone_old[r->kind].push_back(k);
    }
  for (const auto& [k, r] : new_by) {
    if (const auto o = old_by.find(k); o != old_by.end())
      pairs.push_back({k, {o->second, r}});
    else if (r->inputs)
      c.only_new.push_back(k);
    else
      lone_new[r->kind].push_back(k);
  }
  for (auto& [kind, keys] : lone_old) {
    auto& other = lone_new[kind];
    if (keys.size() == 1 && other.size() == 1) {
      c.paired.push_back("paired '" + keys[0] + "' with '" + other[0] + "' (the only unmatched " + kind +
                         " record on each side)");
      pairs.push_back({keys[0], {old_by[keys[0]], new_by[other[0]]}});
      keys.clear();
      other.clear();
    }
    for (const auto& k : keys) c.only_baseline.push_back(k);
  }
  for (const auto& [kind, keys] : lone_new)
    for (const auto& k : keys) c.only_new.push_back(k);
  std::sort(c.only_new.begin(), c.only_new.end());
  for (const auto& [k, p] : pairs) {
    const auto a = cmp_figures(*p.first), b = cmp_figures(*p.second);
    for (const auto& [name, vb] : b) {
      const auto va = a.find(name);
      if (va == a.end() || va->second.value == vb.value) continue;
      const moved_figure m = cmp_judged(k, name, va->second, vb, tol);
      c.regressions += m.exceeds && m.worse;
      c.improved += m.exceeds && !m.worse;
      c.moved.push_back(m);
    }
  }
  return c;
}

}  // namespace headroom::calibrate
