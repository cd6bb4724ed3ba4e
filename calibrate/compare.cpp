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

// A record of one side with its case: `id` (case_of, as text: equal for records of one case), `label` (for
// output), `flat` (the case's fields by path, to name what differs between two cases).
struct cmp_entry {
  const probes::measurement_record* r = nullptr;
  std::string id, label;
  std::map<std::string, std::string> flat;
};

// Adds the leaves of `j` to `out` by path ("problem.training.micro_batch",
// "problem.recipe.buffers[0].bytes").
void cmp_flatten(const nlohmann::json& j, const std::string& at, std::map<std::string, std::string>& out) {
  const bool nested_array = j.is_array() && std::any_of(j.begin(), j.end(), [](const nlohmann::json& x) {
                              return x.is_structured();
                            });
  if (j.is_object() && !j.empty()) {
    for (const auto& [k, v] : j.items()) {
      std::string path = at;
      if (!path.empty()) path.push_back('.');
      path.append(k);
      cmp_flatten(v, path, out);
    }
  } else if (nested_array) {
    for (std::size_t i = 0; i < j.size(); ++i) {
      std::string path = at;
      path.append("[").append(std::to_string(i)).append("]");
      cmp_flatten(j[i], path, out);
    }
  } else {
    out[at] = j.is_string() ? j.get<std::string>() : j.dump();
  }
}

// A path of a case as printed: the problem's fields without "problem." ("training.micro_batch").
std::string cmp_shown_path(const std::string& path) {
  return path.rfind("problem.", 0) == 0 ? path.substr(8) : path;
}

// Returns the value at `path` of a flattened case, "none" where it has none.
std::string cmp_value_at(const std::map<std::string, std::string>& flat, const std::string& path) {
  const auto it = flat.find(path);
  return it == flat.end() ? "none" : it->second;
}

// Returns the paths at which two flattened cases differ.
std::vector<std::string> cmp_differing(const std::map<std::string, std::string>& a,
                                       const std::map<std::string, std::string>& b) {
  std::set<std::string> paths;
  for (const auto& [p, _] : a) paths.insert(p);
  for (const auto& [p, _] : b) paths.insert(p);
  std::vector<std::string> out;
  for (const auto& p : paths)
    if (cmp_value_at(a, p) != cmp_value_at(b, p)) out.push_back(p);
  return out;
}

// Returns `paths` with every path under an object whose "name" is among them replaced by that name: a recipe
// or model of another name is named, not listed field by field.
std::vector<std::string> cmp_named(const std::vector<std::string>& paths) {
  const std::set<std::string> all(paths.begin(), paths.end());
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::string shown = p;
    for (auto dot = p.find('.'); dot != std::string::npos; dot = p.find('.', dot + 1))
      if (const std::string name = p.substr(0, dot) + ".name"; all.count(name)) {
        shown = name;
        break;
      }
    if (std::find(out.begin(), out.end(), shown) == out.end()) out.push_back(shown);
  }
  return out;
}

// Returns the records of one side with their cases.
std::vector<cmp_entry> cmp_entries(const std::vector<probes::measurement_record>& set) {
  std::vector<cmp_entry> out;
  for (const auto& r : set) {
    cmp_entry e;
    e.r = &r;
    const nlohmann::json c = case_of(r);
    e.id = c.dump();
    e.label = case_key(r);
    cmp_flatten(c, "", e.flat);
    out.push_back(std::move(e));
  }
  return out;
}

// Makes every label name one case: where cases of both sides share a label (the same model, layout, sequence
// and micro-batch, another recipe or attention), each label gets the fields that tell them apart; where a
// side holds several records of one case, each label gets its record's file name.
void cmp_label_apart(std::vector<cmp_entry>& a, std::vector<cmp_entry>& b) {
  std::map<std::string, std::map<std::string, const cmp_entry*>> by_label;  // label -> case -> a record
  std::map<std::string, int> old_count, new_count;                          // case -> records on the side
  for (const auto& e : a) {
    by_label[e.label][e.id] = &e;
    ++old_count[e.id];
  }
  for (const auto& e : b) {
    by_label[e.label][e.id] = &e;
    ++new_count[e.id];
  }
  std::map<std::string, std::string> suffix;  // case -> what its label adds
  for (const auto& [label, cases] : by_label) {
    if (cases.size() < 2) continue;
    // The paths at which not every case of the label agrees, in one pass over the cases (a label may be
    // shared by thousands).
    std::map<std::string, std::set<std::string>> values;  // path -> the values the cases hold there
    for (const auto& [id, e] : cases)
      for (const auto& [p, _] : e->flat) values[p];
    for (const auto& [id, e] : cases)
      for (auto& [p, held] : values) held.insert(cmp_value_at(e->flat, p));
    std::vector<std::string> differing;
    for (const auto& [p, held] : values)
      if (held.size() > 1) differing.push_back(p);
    const std::vector<std::string> apart = cmp_named(differing);
    for (const auto& [id, e] : cases) {
      std::string s;
      std::size_t n = 0;
      for (const auto& p : apart) {
        if (++n > 3) {
          s += ", ...";
          break;
        }
        s += (s.empty() ? "" : ", ") + cmp_shown_path(p) + " " + cmp_value_at(e->flat, p);
      }
      suffix[id] = " {" + s + "}";
    }
  }
  for (auto* side : {&a, &b})
    for (auto& e : *side) {
      if (const auto it = suffix.find(e.id); it != suffix.end()) e.label += it->second;
      if (old_count[e.id] > 1 || new_count[e.id] > 1)
        e.label += " (" + std::filesystem::path(e.r->origin).filename().string() + ")";
    }
}

// Pairs the records of one case, `olds` on the baseline's side and `news` on the new one's: one each, the
// two; several, by file name (a set compared with itself, repeated runs saved under the same names), and
// what is left when it is one on each side. What is left on one side only goes to `lone_old` / `lone_new`.
// Several left on a side facing any on the other would be a guess: refused, naming two of them.
void cmp_pair_case(const std::vector<cmp_entry*>& olds, const std::vector<cmp_entry*>& news,
                   std::vector<std::pair<cmp_entry*, cmp_entry*>>& pairs, std::vector<cmp_entry*>& lone_old,
                   std::vector<cmp_entry*>& lone_new, std::vector<std::string>& paired) {
  if (olds.size() == 1 && news.size() == 1) {
    pairs.push_back({olds[0], news[0]});
    return;
  }
  auto name = [](const cmp_entry* e) { return std::filesystem::path(e->r->origin).filename().string(); };
  std::map<std::string, int> old_names;
  std::map<std::string, std::vector<cmp_entry*>> new_names;
  for (const cmp_entry* o : olds) ++old_names[name(o)];
  for (cmp_entry* n : news) new_names[name(n)].push_back(n);
  std::vector<cmp_entry*> left_old, left_new;
  for (cmp_entry* o : olds) {
    const std::string n = name(o);
    const auto it = new_names.find(n);
    if (!n.empty() && old_names[n] == 1 && it != new_names.end() && it->second.size() == 1) {
      pairs.push_back({o, it->second[0]});
      it->second.clear();
    } else {
      left_old.push_back(o);
    }
  }
  for (cmp_entry* n : news)
    if (!new_names[name(n)].empty()) left_new.push_back(n);
  if (left_old.size() == 1 && left_new.size() == 1) {
    paired.push_back("paired '" + left_old[0]->label + "' with '" + left_new[0]->label +
                     "' (the only records of their case on each side not paired by file name)");
    pairs.push_back({left_old[0], left_new[0]});
    return;
  }
  if (!left_old.empty() && !left_new.empty()) {
    const bool old_side = left_old.size() > 1;
    const auto& many = old_side ? left_old : left_new;
    const auto& other = old_side ? left_new : left_old;
    throw bad_input("compare",
                    std::string("the ") + (old_side ? "baseline" : "new") + " set holds " +
                        std::to_string(many.size()) + " records of one case, '" + many[0]->r->origin +
                        "' and '" + many[1]->r->origin + "', facing " + std::to_string(other.size()) +
                        " on the other side whose file names do not match: records of one case pair by "
                        "file name (name them alike on both sides, or split the set)");
  }
  lone_old.insert(lone_old.end(), left_old.begin(), left_old.end());
  lone_new.insert(lone_new.end(), left_new.begin(), left_new.end());
}

// The records of the other side a line of an unpaired record looks at for its nearest case.
constexpr std::size_t cmp_nearest_candidates = 64;

// Returns the fields in which the nearest record of `e`'s kind among `others` (the other side's records
// with no partner; the first cmp_nearest_candidates of its kind) differs from `e`, as baseline -> new
// ("training.micro_batch 1 -> 2"); "" when there is none.
std::string cmp_nearest_difference(const cmp_entry& e, const std::vector<cmp_entry*>& others,
                                   bool baseline_side) {
  const cmp_entry* nearest = nullptr;
  std::vector<std::string> fewest;
  std::size_t looked = 0;
  for (const cmp_entry* o : others) {
    if (o->r->kind != e.r->kind || o->r->backend != e.r->backend) continue;
    if (++looked > cmp_nearest_candidates) break;  // a hint, not a search: bounded for 10,000 records a side
    auto d = cmp_named(cmp_differing(e.flat, o->flat));
    if (!nearest || d.size() < fewest.size()) {
      nearest = o;
      fewest = std::move(d);
    }
  }
  if (!nearest) return "";
  const auto& from = baseline_side ? e.flat : nearest->flat;
  const auto& to = baseline_side ? nearest->flat : e.flat;
  std::string s;
  for (std::size_t i = 0; i < fewest.size() && i < 3; ++i)
    s += (s.empty() ? "" : ", ") + cmp_shown_path(fewest[i]) + " " + cmp_value_at(from, fewest[i]) + " -> " +
         cmp_value_at(to, fewest[i]);
  if (fewest.size() > 3) s += " and " + std::to_string(fewest.size() - 3) + " more";
  return s;
}

// Returns `p` as JSON less what does not change the run: the planner's allowance for what it does not derive
// (a calibration changes it, the run does not) and where a model or recipe was read from (a path differs
// between two machines' copies).
nlohmann::json cmp_problem_json(const problem& p) {
  nlohmann::json j = problem_to_json(p);
  for (const char* k : {"reserve", "reserve_bytes", "fixed_overheads_bytes"}) j["device"].erase(k);
  j["model"].erase("source");
  j["recipe"].erase("source");
  return j;
}

}  // namespace

nlohmann::json problem_case(const problem& p, const layout& l) {
  return {{"problem", cmp_problem_json(p)}, {"layout", layout_to_json(l)}};
}

nlohmann::json case_of(const probes::measurement_record& r) {
  nlohmann::json c = {{"kind", r.kind}, {"backend", r.backend}};
  if (r.inputs) c["problem"] = cmp_problem_json(*r.inputs);
  if (r.where)
    c["layout"] = layout_to_json(*r.where);
  else if (r.raw.contains("inputs") && r.raw["inputs"].contains("layout"))
    c["layout"] = r.raw["inputs"]["layout"];  // a record built in code with the layout's text alone
  if (r.kind == "probe") {
    c["stage"] = r.stage;
    c["allocator"] = r.allocator;
    if (r.rank) c["rank"] = *r.rank;
  }
  if (r.kind == "overheads") c["module_loading"] = r.raw.value("module_loading", std::string());
  if (r.kind == "observation") c["figure"] = r.figure;
  if (r.kind == "snapshot" && !r.inputs)
    c["snapshot_file"] = std::filesystem::path(r.raw.value("source", std::string())).filename().string();
  return c;
}

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
  if (r.inputs) {
    add("seq");
    add(std::to_string(r.inputs->training.seq));
    add("micro-batch");
    add(std::to_string(r.inputs->training.micro_batch));
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
  std::vector<cmp_entry> old_set = cmp_entries(baseline), new_set = cmp_entries(fresh);
  cmp_label_apart(old_set, new_set);
  // Each side's records by case, in the order read.
  std::map<std::string, std::vector<cmp_entry*>> old_by, new_by;
  for (auto& e : old_set) old_by[e.id].push_back(&e);
  for (auto& e : new_set) new_by[e.id].push_back(&e);
  std::vector<std::pair<cmp_entry*, cmp_entry*>> pairs;
  std::vector<cmp_entry*> lone_old, lone_new;
  for (auto& [id, olds] : old_by) {
    const auto n = new_by.find(id);
    if (n == new_by.end()) {
      lone_old.insert(lone_old.end(), olds.begin(), olds.end());
      continue;
    }
    cmp_pair_case(olds, n->second, pairs, lone_old, lone_new, c.paired);
  }
  for (auto& [id, news] : new_by)
    if (!old_by.count(id)) lone_new.insert(lone_new.end(), news.begin(), news.end());
  // Only records with no case attached (a snapshot named by its file) may be paired by elimination: two
  // records of different problems are different questions, never compared.
  std::map<std::string, std::vector<cmp_entry*>> caseless_old, caseless_new;  // by kind
  std::vector<cmp_entry*> unpaired_old, unpaired_new;
  for (cmp_entry* e : lone_old) (e->r->inputs ? unpaired_old : caseless_old[e->r->kind]).push_back(e);
  for (cmp_entry* e : lone_new) (e->r->inputs ? unpaired_new : caseless_new[e->r->kind]).push_back(e);
  for (auto& [kind, olds] : caseless_old) {
    auto& news = caseless_new[kind];
    if (olds.size() == 1 && news.size() == 1) {
      c.paired.push_back("paired '" + olds[0]->label + "' with '" + news[0]->label +
                         "' (the only unmatched " + kind + " record on each side)");
      pairs.push_back({olds[0], news[0]});
      olds.clear();
      news.clear();
    }
    unpaired_old.insert(unpaired_old.end(), olds.begin(), olds.end());
  }
  for (auto& [kind, news] : caseless_new) unpaired_new.insert(unpaired_new.end(), news.begin(), news.end());
  for (auto* side : {&unpaired_old, &unpaired_new})
    std::sort(side->begin(), side->end(),
              [](const cmp_entry* x, const cmp_entry* y) { return x->label < y->label; });
  for (int side = 0; side < 2; ++side)
    for (const cmp_entry* e : side == 0 ? unpaired_old : unpaired_new) {
      const std::string d = cmp_nearest_difference(*e, side == 0 ? unpaired_new : unpaired_old, side == 0);
      if (side == 0 && c.nearest_difference.empty()) c.nearest_difference = d;
      (side == 0 ? c.only_baseline : c.only_new)
          .push_back(e->label + (d.empty() ? ""
                                           : std::string(" (nearest case in the ") +
                                                 (side == 0 ? "new set" : "baseline") +
                                                 ", baseline -> new: " + d + ")"));
    }
  std::sort(pairs.begin(), pairs.end(),
            [](const auto& x, const auto& y) { return x.first->label < y.first->label; });
  c.compared = static_cast<int>(pairs.size());
  for (const auto& [o, n] : pairs) {
    const auto a = cmp_figures(*o->r), b = cmp_figures(*n->r);
    for (const auto& [name, vb] : b) {
      const auto va = a.find(name);
      if (va == a.end() || va->second.value == vb.value) continue;
      const moved_figure m = cmp_judged(o->label, name, va->second, vb, tol);
      c.regressions += m.exceeds && m.worse;
      c.improved += m.exceeds && !m.worse;
      c.moved.push_back(m);
    }
  }
  return c;
}

}  // namespace headroom::calibrate
