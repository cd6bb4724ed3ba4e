// observations.cpp: reading a table of observed runs and writing their records (observations.hpp).
#include "observations.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>

#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "planner/format.hpp"
#include "planner/gpu_types.hpp"
#include "planner/json_fields.hpp"
#include "probes/records/envelope.hpp"
#include "probes/records/measurement_record.hpp"

namespace headroom::calibrate {

namespace {

const std::vector<std::string>& observation_columns() {
  static const std::vector<std::string> cols = {"name",      "problem", "figure", "value", "unit",
                                                "gpu",       "driver",  "cuda",   "nccl",  "software",
                                                "allocator", "source",  "date"};
  return cols;
}

// Units a figure may be given in, bytes each. nvidia-smi prints MiB; PyTorch's memory_summary and
// torchtitan's `max_reserved` print GiB (torchtitan/components/metrics.py divides by 1024**3); decimal units
// are accepted for published tables that use them.
struct observation_unit {
  const char* name;
  double bytes;
};
constexpr observation_unit observation_units[] = {
    {"B", 1},    {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
    {"KB", 1e3}, {"MB", 1e6},     {"GB", 1e9},        {"TB", 1e12}};

std::string observation_unit_list() {
  std::string s;
  for (const auto& u : observation_units) s += (s.empty() ? "" : ", ") + std::string(u.name);
  return s;
}

// Returns a CSV text's records (RFC 4180: fields separated by commas, double-quoted fields may hold commas,
// newlines and doubled quotes), each with the 1-based line it starts on. Throws on an unterminated quote,
// naming the row (0: the header) and the line where the quote opened.
std::vector<std::pair<std::size_t, std::vector<std::string>>> observation_csv_rows(
    const std::string& text, const std::string& origin) {
  std::vector<std::pair<std::size_t, std::vector<std::string>>> rows;
  std::vector<std::string> fields;
  std::string cur;
  bool quoted = false, any = false;
  std::size_t line = 1, start = 1, quote_line = 1;
  auto end_row = [&] {
    fields.push_back(cur);
    cur.clear();
    bool blank = fields.size() == 1 && fields[0].empty();
    if (!blank) rows.emplace_back(start, std::move(fields));
    fields.clear();
    any = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (!any) start = line;
    any = true;
    if (quoted) {
      if (ch == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (ch == '"') {
        quoted = false;
      } else {
        if (ch == '\n') ++line;
        cur += ch;
      }
    } else if (ch == '"' && cur.empty()) {
      quoted = true;
      quote_line = line;
    } else if (ch == ',') {
      fields.push_back(cur);
      cur.clear();
    } else if (ch == '\n' || ch == '\r') {
      if (ch == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      end_row();
      ++line;
    } else {
      cur += ch;
    }
    if (rows.size() > max_observation_rows + 1)
      throw bad_input(origin, "more than " + std::to_string(max_observation_rows) + " runs");
  }
  if (quoted)
    throw bad_input(rows.empty() ? origin + ": header" : cell_where(origin, rows.size(), ""),
                    "a quoted field is not closed: it opened on line " + std::to_string(quote_line) +
                        " (a closing '\"' is missing)");
  if (any) end_row();
  return rows;
}

std::string observation_trimmed(const std::string& s) {
  const auto a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

// Returns " (did you mean '<name>'?)" for the name of `known` nearest `got`, "" when none is near.
std::string near_one(const std::string& got, const std::vector<std::string>& known) {
  const std::string near = detail::closest_name(got, known);
  return near.empty() ? "" : " (did you mean '" + near + "'?)";
}

// Returns the figure in bytes from `value` and `unit`; throws naming the cell.
std::int64_t observation_bytes(const std::string& value, const std::string& unit, const std::string& origin,
                               std::size_t row) {
  double v = 0;
  const std::string t = observation_trimmed(value);
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc{} || end != t.data() + t.size())
    throw bad_input(cell_where(origin, row, "value"), "'" + printable(t, 40) + "' is not a number");
  if (!std::isfinite(v) || v <= 0)
    throw bad_input(cell_where(origin, row, "value"),
                    "must be a positive memory figure, got " + printable(t, 40));
  const observation_unit* u = nullptr;
  for (const auto& x : observation_units)
    if (observation_trimmed(unit) == x.name) u = &x;
  if (!u) {
    std::vector<std::string> names;
    for (const auto& x : observation_units) names.emplace_back(x.name);
    throw bad_input(cell_where(origin, row, "unit"), "unknown unit '" + printable(observation_trimmed(unit), 20) +
                                                         "'" + near_one(observation_trimmed(unit), names) +
                                                         " (one of " + observation_unit_list() + ")");
  }
  const double bytes = v * u->bytes;
  if (!(bytes >= 1 && bytes <= static_cast<double>(probes::max_record_bytes)))
    throw bad_input(
        cell_where(origin, row, "value"),
        printable(t, 40) + " " + u->name + " is not a memory figure a GPU produces (1 B to 16 TiB)");
  return std::llround(bytes);
}

// Returns half the last digit of the number `value` (as observation_bytes read it) in a unit of `unit_bytes`
// bytes: "69.7" -> 0.05, "61234" -> 0.5, "7.5e1" -> 0.5, at least 1 byte.
std::int64_t observation_rounding(const std::string& value, double unit_bytes) {
  const std::string t = observation_trimmed(value);
  const auto e = t.find_first_of("eE");
  const std::string mantissa = t.substr(0, e);
  int exponent = 0;
  if (e != std::string::npos) {
    const char* from = t.data() + e + 1;
    if (from < t.data() + t.size() && *from == '+') ++from;
    (void)std::from_chars(from, t.data() + t.size(), exponent);
  }
  const auto dot = mantissa.find('.');
  const int decimals = dot == std::string::npos ? 0 : static_cast<int>(mantissa.size() - dot - 1);
  const double half = 0.5 * std::pow(10.0, exponent - decimals) * unit_bytes;
  return std::max<std::int64_t>(1,
                                std::llround(std::min(half, static_cast<double>(probes::max_record_bytes))));
}

// Returns the bytes of the unit called `unit` (one of observation_units), 1 when unknown.
double observation_unit_bytes(const std::string& unit) {
  for (const auto& x : observation_units)
    if (observation_trimmed(unit) == x.name) return x.bytes;
  return 1;
}

// Fills one row from its cells (column name -> text); `problem` was read by the caller.
observation_row observation_from_cells(const std::vector<std::pair<std::string, std::string>>& cells,
                                       const std::string& origin, std::size_t row) {
  observation_row r;
  r.row = row;
  std::string value, unit;
  bool has_figure = false;
  for (const auto& [col, text] : cells) {
    const std::string t = observation_trimmed(text);
    if (col == "name") r.name = t;
    if (col == "problem") r.flags = t;
    if (col == "figure") {
      const auto f = figure_from(t);
      if (!f)
        throw bad_input(
            cell_where(origin, row, "figure"),
            "unknown figure '" + printable(t, 40) + "'" +
                near_one(t, {"device_used", "reserved_peak", "allocated_peak"}) +
                " (device_used, reserved_peak or allocated_peak)");
      r.figure = *f;
      has_figure = true;
    }
    if (col == "value") value = t;
    if (col == "unit") unit = t;
    if (col == "gpu") r.gpu = t;
    if (col == "driver") r.driver = t;
    if (col == "cuda") r.cuda_runtime = t;
    if (col == "nccl") r.nccl = t;
    if (col == "software") r.software = t;
    if (col == "allocator") r.allocator = t;
    if (col == "source") r.source = t;
    if (col == "date") r.date = t;
  }
  if (!has_figure) throw bad_input(cell_where(origin, row, "figure"), "missing");
  r.bytes = observation_bytes(value, unit, origin, row);
  r.rounding = observation_rounding(value, observation_unit_bytes(unit));
  r.as_given = value + " " + unit;
  for (char ch : r.name)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.') ||
        r.name.size() > 100 || r.name.front() == '.')
      throw bad_input(cell_where(origin, row, "name"),
                      "'" + printable(r.name, 40) + "' is not a file name stem (letters, digits, - _ .)");
  if (r.name.empty()) r.name = "obs-" + std::to_string(row);
  return r;
}

const std::vector<std::string> observation_required = {"problem", "figure", "value", "unit"};

}  // namespace

const char* figure_name(figure_kind f) {
  switch (f) {
    case figure_kind::device_used:
      return "device_used";
    case figure_kind::reserved_peak:
      return "reserved_peak";
    case figure_kind::allocated_peak:
      return "allocated_peak";
  }
  return "?";
}

std::optional<figure_kind> figure_from(std::string_view name) {
  for (auto f : {figure_kind::device_used, figure_kind::reserved_peak, figure_kind::allocated_peak})
    if (name == figure_name(f)) return f;
  return std::nullopt;
}

std::string cell_where(const std::string& origin, std::size_t row, const std::string& column) {
  return origin + ": row " + std::to_string(row) + (column.empty() ? "" : ", column '" + column + "'");
}

std::vector<observation_row> observations_from_csv(const std::string& text, const std::string& origin) {
  // A UTF-8 byte order mark (Excel's "CSV UTF-8" writes one) is no part of the first column's name.
  constexpr std::string_view bom = "\xEF\xBB\xBF";
  const std::string_view body = std::string_view(text).substr(text.rfind(bom, 0) == 0 ? bom.size() : 0);
  const auto rows = observation_csv_rows(std::string(body), origin);
  if (rows.empty()) throw bad_input(origin, "empty: a header row and one row per run are needed");
  const auto& header = rows[0].second;
  std::vector<std::string> cols;
  for (const auto& h : header) {
    const std::string c = observation_trimmed(h);
    const auto& known = observation_columns();
    if (std::find(known.begin(), known.end(), c) == known.end()) {
      const std::string near = detail::closest_name(c, known);
      throw bad_input(origin + ": header, column '" + printable(c, 40) + "'",
                      "unknown column" + (near.empty() ? "" : " (did you mean '" + near + "'?)"));
    }
    if (std::find(cols.begin(), cols.end(), c) != cols.end())
      throw bad_input(origin + ": header, column '" + c + "'", "given twice");
    cols.push_back(c);
  }
  for (const auto& need : observation_required)
    if (std::find(cols.begin(), cols.end(), need) == cols.end())
      throw bad_input(origin + ": header", "missing column '" + need + "'");
  if (rows.size() == 1) throw bad_input(origin, "no runs after the header");
  std::vector<observation_row> out;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const auto& fields = rows[i].second;
    if (fields.size() != cols.size())
      throw bad_input(cell_where(origin, i, ""), std::to_string(fields.size()) + " fields for " +
                                                     std::to_string(cols.size()) +
                                                     " columns: give one per header column (leave one empty "
                                                     "as ,,; quote a field that holds a comma)");
    std::vector<std::pair<std::string, std::string>> cells;
    for (std::size_t c = 0; c < cols.size(); ++c) cells.emplace_back(cols[c], fields[c]);
    out.push_back(observation_from_cells(cells, origin, i));
    if (out.back().flags.empty()) throw bad_input(cell_where(origin, i, "problem"), "empty");
  }
  return out;
}

std::vector<observation_row> observations_from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object() || !j.contains("runs") || !j["runs"].is_array())
    throw bad_input(origin, "expected an object with \"runs\": [ {...}, ... ] (docs/calibrating.md)");
  detail::require_known_keys(j, {"runs", "source"}, origin);
  const auto& runs = j["runs"];
  if (runs.empty()) throw bad_input(origin, "no runs");
  if (runs.size() > max_observation_rows)
    throw bad_input(origin, "more than " + std::to_string(max_observation_rows) + " runs");
  std::vector<observation_row> out;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& run = runs[i];
    const std::size_t row = i + 1;
    if (!run.is_object()) throw bad_input(cell_where(origin, row, ""), "must be an object");
    std::vector<std::pair<std::string, std::string>> cells;
    for (const auto& [k, v] : run.items()) {
      const auto& known = observation_columns();
      if (std::find(known.begin(), known.end(), k) == known.end()) {
        const std::string near = detail::closest_name(k, known);
        throw bad_input(cell_where(origin, row, printable(k, 40)),
                        "unknown key" + (near.empty() ? "" : " (did you mean '" + near + "'?)"));
      }
      if (k == "problem" && v.is_object()) continue;
      if (k == "value" && v.is_number()) {
        cells.emplace_back(k, v.dump());
      } else if (v.is_string()) {
        cells.emplace_back(k, v.get<std::string>());
      } else {
        throw bad_input(cell_where(origin, row, k), k == "value" ? "must be a number" : "must be a string");
      }
    }
    for (const auto& need : observation_required)
      if (!run.contains(need)) throw bad_input(cell_where(origin, row, need), "missing");
    observation_row r = observation_from_cells(cells, origin, row);
    if (run["problem"].is_object()) r.problem = run["problem"];
    if (r.flags.empty() && r.problem.is_null()) throw bad_input(cell_where(origin, row, "problem"), "empty");
    out.push_back(std::move(r));
  }
  return out;
}

void check_observation_floor(const observation_row& r, const problem& p, const layout& l,
                             const std::string& origin) {
  // Every kind of figure holds the state: the allocator's reserved and allocated peaks hold the live
  // tensors, the device's used memory holds the reserved bytes. The fixed overheads (CUDA context, NCCL)
  // are not part of the floor even for device_used: the planner's 1024 MiB (planner/layout.hpp,
  // device_spec::fixed_overheads) is a documented default, not a least value, and measuring the real one is
  // what a calibration on device_used figures is for (calibration.hpp, the fixed term).
  // And no figure of a GPU passes its memory: the problem's capacity (--gpu-type, --gpu-mem, or the default
  // GPU) is what the driver reports as total, which every kind of figure is a part of.
  if (r.bytes > p.device.capacity)
    throw bad_input(cell_where(origin, r.row, "value"),
                    std::string(figure_name(r.figure)) + " " + printable(r.as_given, 40) + " is above the " +
                        gib_str(p.device.capacity, 2) +
                        " GiB the problem's GPU holds: give the GPU that measured it (--gpu-type or --gpu-mem in "
                        "the problem), or check the figure's unit");
  const breakdown b = estimate(p, l);
  std::int64_t floor = b.stages.front().persistent;
  for (const auto& s : b.stages) floor = std::min(floor, s.persistent);
  if (r.bytes >= floor) return;
  throw bad_input(cell_where(origin, r.row, "value"),
                  std::string(figure_name(r.figure)) + " " + printable(r.as_given, 40) + " is below the " +
                      gib_str(floor, 2) + " GiB of state (parameters, gradients, optimizer) the planner predicts" +
                      (b.stages.size() > 1 ? " (the stage that holds least)" : "") +
                      ": the problem does not describe the run that was measured, or the figure is of another kind");
}

void check_record_floor(const probes::measurement_record& r) {
  const std::int64_t figure = r.figure == "device_used"      ? r.device_used_at_peak.value_or(0)
                              : r.figure == "allocated_peak" ? r.peak_allocated
                                                             : r.peak_reserved;
  if (!r.where || r.where->pp != 1 || figure <= 0 || figure >= r.persistent) return;
  throw bad_input(r.origin, printable(r.figure, 40) + " " + gib_str(figure, 2) + " GiB is below the " +
                                gib_str(r.persistent, 2) +
                                " GiB of state (parameters, gradients, optimizer) the planner predicts: the problem "
                                "does not describe the run that was measured, or the figure is of another kind");
}

void check_observation_device(const observation_row& r, const problem& p, const std::string& total_from,
                              const std::string& origin) {
  std::vector<const gpu_type*> named;
  if (const gpu_type* t = known_gpu_type(p.device.gpu_type)) {
    if (!r.gpu.empty() && !device_name_may_be(r.gpu, *t))
      throw bad_input(
          cell_where(origin, r.row, "gpu"),
          "'" + printable(r.gpu, 60) + "' cannot be the problem's --gpu-type " + t->name +
              " (another family or memory size): one of the two is not the GPU that measured the run");
    named.push_back(t);
  } else if (!r.gpu.empty()) {
    for (const auto& t : gpu_types())
      if (device_name_may_be(r.gpu, t)) named.push_back(&t);
  }
  if (named.empty()) return;
  // The GPU as the line names it: the gpu cell, and the types it may be.
  std::string types, capacities;
  std::int64_t largest = 0;
  for (const gpu_type* t : named) {
    types += (types.empty() ? "" : " or ") + std::string(t->name);
    capacities += (capacities.empty() ? "" : " or ") + gib_str(t->capacity, 2);
    largest = std::max(largest, t->capacity);
  }
  const std::string gpu = (r.gpu.empty() ? std::string() : "'" + printable(r.gpu, 60) + "', ") + types;
  auto agrees = [&](const gpu_type* t) {
    return std::fabs(static_cast<double>(p.device.capacity - t->capacity)) <=
           device_total_tolerance * static_cast<double>(t->capacity);
  };
  if (!total_from.empty() && std::none_of(named.begin(), named.end(), agrees))
    throw bad_input(cell_where(origin, r.row, "problem"),
                    "the device total " + gib_str(p.device.capacity, 2) + " GiB (" + total_from +
                        ") disagrees with the " + capacities + " GiB of " + gpu +
                        " (planner/gpu_types.hpp): give --gpu-type alone, or the total the driver reports");
  if (static_cast<double>(r.bytes - r.rounding) > (1 + device_total_tolerance) * static_cast<double>(largest))
    throw bad_input(cell_where(origin, r.row, "value"),
                    std::string(figure_name(r.figure)) + " " + printable(r.as_given, 40) + " is above the " +
                        capacities + " GiB of " + gpu +
                        " (planner/gpu_types.hpp): check the figure's unit, or the "
                        "gpu cell");
}

void check_observations_agree(const std::vector<observation_row>& rows, const std::vector<std::string>& cases,
                              const std::string& origin) {
  // Within one run: allocated peak <= reserved peak <= device used (what each figure holds:
  // observations.hpp).
  // The rank of a figure in that order, and why the order holds.
  auto rank = [](figure_kind f) {
    return f == figure_kind::allocated_peak ? 0 : f == figure_kind::reserved_peak ? 1 : 2;
  };
  auto why = [](figure_kind lo, figure_kind hi) -> std::string {
    if (lo == figure_kind::allocated_peak && hi == figure_kind::reserved_peak)
      return "the allocator hands out only what it reserved";
    if (lo == figure_kind::reserved_peak) return "the device's used memory holds the reserved segments";
    return "the device's used memory holds every allocated byte";
  };
  // Per run (case and environment): for each kind of figure the rows that bound it so far, the largest
  // (least value within rounding) and the smallest (greatest value within rounding).
  struct bounds {
    const observation_row* most[3] = {nullptr, nullptr, nullptr};
    const observation_row* least[3] = {nullptr, nullptr, nullptr};
  };
  std::map<std::string, bounds> runs;
  for (std::size_t i = 0; i < rows.size() && i < cases.size(); ++i) {
    const observation_row& r = rows[i];
    std::string key = cases[i];
    for (const std::string* cell : {&r.gpu, &r.driver, &r.cuda_runtime, &r.nccl, &r.software, &r.allocator}) {
      key.push_back('\x1f');
      key.append(*cell);
    }
    bounds& b = runs[key];
    const int k = rank(r.figure);
    const std::int64_t low = r.bytes - r.rounding, high = r.bytes + r.rounding;
    // Against every earlier row of the run whose figure should be at least this one's, or at most.
    for (int other = 0; other < 3; ++other) {
      if (other == k) continue;
      const bool this_is_lower = k < other;
      const observation_row* o = this_is_lower ? b.least[other] : b.most[other];
      if (!o) continue;
      const bool contradicts = this_is_lower ? low > o->bytes + o->rounding : o->bytes - o->rounding > high;
      if (!contradicts) continue;
      const figure_kind lo = this_is_lower ? r.figure : o->figure, hi = this_is_lower ? o->figure : r.figure;
      throw bad_input(cell_where(origin, r.row, "value"),
                      std::string(figure_name(r.figure)) + " " + printable(r.as_given, 40) + " is " +
                          (this_is_lower ? "above" : "below") + " the " + figure_name(o->figure) + " " +
                          printable(o->as_given, 40) + " of row " + std::to_string(o->row) +
                          " (same problem, same environment): " + why(lo, hi) +
                          "; one row is of another run or another kind of figure");
    }
    if (!b.most[k] || low > b.most[k]->bytes - b.most[k]->rounding) b.most[k] = &r;
    if (!b.least[k] || high < b.least[k]->bytes + b.least[k]->rounding) b.least[k] = &r;
  }
}

nlohmann::json observation_record(const observation_row& r, const problem& p, const layout& l,
                                  const std::string& command_line) {
  const breakdown b = estimate(p, l);
  const auto& w = b.worst_stage();
  auto str = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  nlohmann::json j;
  j["backend"] = "observation";
  j["measured"] = true;
  j["allocator"] = str(r.allocator);
  j["environment"] = {{"command_line", command_line}, {"gpu", str(r.gpu)},
                      {"driver", str(r.driver)},      {"cuda_runtime", str(r.cuda_runtime)},
                      {"nccl", str(r.nccl)},          {"software", str(r.software)}};
  j["observation"] = {{"figure", figure_name(r.figure)},
                      {"bytes", r.bytes},
                      {"as_given", r.as_given},
                      {"run", r.name},
                      {"row", r.row},
                      {"source", str(r.source)},
                      {"date", str(r.date)},
                      {"problem_flags", str(r.flags)}};
  j["inputs"] = probes::record_inputs(p, l);
  j["stage"] = w.stage;
  j["predicted"] = probes::predicted_block(w);
  j["predicted"]["note"] = "predicted by the analytic model for the run's case (worst stage), beside the observed figure";
  return records::enveloped(records::kind::measurement, j);
}

}  // namespace headroom::calibrate
