// compare.cpp: matching records by case and listing what moved (see compare.hpp).
#include "compare.hpp"

#include <cmath>
#include <map>

namespace headroom::calibrate {

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
  if (r.kind == "snapshot") add(r.raw.value("source", std::string()));
  return k;
}

namespace {

// The figures of a record that a regression check watches, by name.
std::map<std::string, std::pair<double, bool>> figures(const probes::measurement_record& r) {
  std::map<std::string, std::pair<double, bool>> f;  // name -> (value, is bytes)
  if (r.kind == "overheads") {
    if (r.fixed_overhead_bytes) f["fixed overheads"] = {static_cast<double>(*r.fixed_overhead_bytes), true};
    for (const auto& l : r.raw.value("layers", nlohmann::json::array()))
      if (l.contains("bytes") && l["bytes"].is_number_integer())
        f[l.value("name", std::string("?"))] = {l["bytes"].get<double>(), true};
    return f;
  }
  f["peak reserved"] = {static_cast<double>(r.peak_reserved), true};
  if (r.kind == "probe") f["peak allocated"] = {static_cast<double>(r.peak_allocated), true};
  f["fragmentation"] = {r.fragmentation, false};
  if (r.device_used_at_peak)
    f["device used at the reserved peak"] = {static_cast<double>(*r.device_used_at_peak), true};
  if (r.used_after_context && r.used_before_context)
    f["context (used after - before)"] = {static_cast<double>(*r.used_after_context - *r.used_before_context),
                                          true};
  return f;
}

}  // namespace

comparison compare(const std::vector<probes::measurement_record>& baseline,
                   const std::vector<probes::measurement_record>& fresh, const tolerance& tol) {
  comparison c;
  std::map<std::string, const probes::measurement_record*> old_by, new_by;
  for (const auto& r : baseline) old_by[case_key(r)] = &r;
  for (const auto& r : fresh) new_by[case_key(r)] = &r;
  for (const auto& [k, r] : old_by)
    if (!new_by.count(k)) c.only_baseline.push_back(k);
  for (const auto& [k, r] : new_by) {
    auto o = old_by.find(k);
    if (o == old_by.end()) {
      c.only_new.push_back(k);
      continue;
    }
    const auto a = figures(*o->second), b = figures(*r);
    for (const auto& [name, vb] : b) {
      auto va = a.find(name);
      if (va == a.end() || va->second.first == vb.first) continue;
      moved_figure m{k, name, va->second.first, vb.first, vb.second, false};
      const double d = std::fabs(m.new_value - m.old_value);
      if (m.bytes)
        m.exceeds = d > std::max(tol.fraction * std::fabs(m.old_value), static_cast<double>(tol.bytes));
      else
        m.exceeds = d > tol.fragmentation;
      c.regressions += m.exceeds;
      c.moved.push_back(m);
    }
  }
  return c;
}

}  // namespace headroom::calibrate
