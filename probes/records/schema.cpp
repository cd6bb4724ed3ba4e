// schema.cpp: the registry's table and the schema string's grammar (schema.hpp).
#include "probes/records/schema.hpp"

#include <array>
#include <charconv>
#include <nlohmann/json.hpp>

#include "planner/errors.hpp"

namespace headroom::records {

namespace {

struct entry {
  kind k;
  std::string_view name;
  int major, minor;  // the version written
};

// One row a kind; its history is in results/README.md.
constexpr std::array<entry, 14> registry{{
    {kind::plan, "plan", 2, 4},
    {kind::suggest, "suggest", 2, 2},
    {kind::min_gpus, "min_gpus", 3, 0},
    {kind::plan_max_fit, "plan_max_fit", 1, 0},
    {kind::trace, "trace", 1, 2},
    {kind::measurement, "measurement", 1, 6},
    {kind::overheads, "overheads", 1, 1},
    {kind::max_fit, "max_fit", 1, 1},
    {kind::multi_rank, "multi_rank", 1, 1},
    {kind::snapshot_replay, "snapshot_replay", 1, 1},
    {kind::calibration, "calibration", 1, 4},
    {kind::validation_pack, "validation", 2, 0},
    {kind::validate, "validate", 1, 4},
    {kind::torch_replay, "torch_replay", 1, 0},
}};

const entry& entry_of(kind k) {
  for (const auto& e : registry)
    if (e.k == k) return e;
  return registry.front();  // unreachable: every kind has a row
}

std::optional<int> number(std::string_view s) {
  int v = 0;
  if (s.empty() || s.size() > 6 || s[0] < '0' || s[0] > '9') return std::nullopt;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string_view name_of(kind k) {
  return entry_of(k).name;
}

version current(kind k) {
  const auto& e = entry_of(k);
  return {std::string(e.name), e.major, e.minor};
}

std::string to_string(const version& v) {
  // Appended piece by piece: GCC 12's -Wrestrict misreads a chain of operator+ on a temporary here.
  std::string s = "headroom.";
  s += v.kind;
  s += '/';
  s += std::to_string(v.major);
  if (v.minor != 0) {
    s += '.';
    s += std::to_string(v.minor);
  }
  return s;
}

std::string schema_of(kind k) {
  return to_string(current(k));
}

std::optional<version> parse(std::string_view schema) {
  constexpr std::string_view prefix = "headroom.";
  if (schema.substr(0, prefix.size()) != prefix) return std::nullopt;
  schema.remove_prefix(prefix.size());
  const auto slash = schema.find('/');
  if (slash == std::string_view::npos || slash == 0) return std::nullopt;
  version v;
  v.kind = std::string(schema.substr(0, slash));
  const auto rest = schema.substr(slash + 1);
  const auto dot = rest.find('.');
  const auto major = number(rest.substr(0, dot));
  const auto minor = dot == std::string_view::npos ? std::optional<int>(0) : number(rest.substr(dot + 1));
  if (!major || !minor) return std::nullopt;
  v.major = *major;
  v.minor = *minor;
  return v;
}

version require(const nlohmann::json& doc, kind k, const std::string& origin) {
  const auto& e = entry_of(k);
  const std::string accepted = "headroom." + std::string(e.name) + "/" + std::to_string(e.major) + ".x";
  const auto it = doc.is_object() ? doc.find("schema") : doc.end();
  const std::string what = "not a headroom." + std::string(e.name) + " document";
  if (it == doc.end() || !it->is_string())
    throw bad_input(origin, what + " (no schema; expected " + accepted + ")");
  const std::string s = it->get<std::string>();
  const auto v = parse(s);
  if (!v || v->kind != e.name)
    throw bad_input(origin, what + " (schema '" + s.substr(0, 80) + "'; expected " + accepted + ")");
  if (v->major != e.major)
    throw bad_input(origin, "unsupported version '" + s + "' (this build reads " + accepted + ")");
  return *v;
}

}  // namespace headroom::records
