// trace_io.cpp: reading and writing step traces as JSON (see trace_io.hpp).
#include "probes/trace/trace_io.hpp"

#include <nlohmann/json.hpp>

#include "planner/errors.hpp"
#include "planner/json_fields.hpp"
#include "probes/records/envelope.hpp"

namespace headroom::probes {

namespace {

constexpr std::int64_t max_stages = std::int64_t{1} << 20;  // a bound on counts, not bytes

phase phase_from(const std::string& s, const std::string& where) {
  for (auto p : {phase::state, phase::forward, phase::output, phase::backward, phase::optimizer})
    if (s == to_string(p)) return p;
  throw bad_input(where, "unknown phase '" + s + "'");
}
}  // namespace

nlohmann::json trace_to_json(const step_trace& t) {
  return trace_to_json(t, records::envelope(records::kind::trace));
}

nlohmann::json trace_to_json(const step_trace& t, const nlohmann::json& envelope) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& x : t.tensors)
    tensors.push_back(
        {{"name", x.name}, {"shape", x.shape}, {"dtype_bytes", x.dtype_bytes}, {"bytes", x.bytes}});
  nlohmann::json events = nlohmann::json::array();
  for (const auto& e : t.events) {
    nlohmann::json x = {to_string(e.kind), e.tensor, to_string(e.when)};
    if (e.stream != 0) x.push_back(e.stream);
    events.push_back(std::move(x));
  }
  nlohmann::json j = envelope;
  j.update(nlohmann::json{{"model", t.model},
                      {"layout", t.layout_text},
                      {"stage", t.stage},
                      {"stages", t.stages},
                      {"microbatches_per_step", t.microbatches_per_step},
                      {"microbatches_traced", t.microbatches_traced},
                      {"events_format",
                       "[alloc|free|empty_cache, tensor index (-1 for empty_cache), phase, stream if not 0]"},
                      {"tensors", tensors},
                      {"events", events}});
  if (t.capacity) j["capacity"] = *t.capacity;
  return j;
}

void write_trace_json(std::ostream& out, const step_trace& t) {
  write_trace_json(out, t, records::envelope(records::kind::trace));
}

void write_trace_json(std::ostream& out, const step_trace& t, const nlohmann::json& envelope) {
  // Keys in nlohmann's order (sorted), so the text is the same as the document's dump().
  auto str = [](const std::string& v) { return nlohmann::json(v).dump(); };
  auto env = [&](const char* key) {
    return std::string("\"") + key + "\":" + envelope.at(key).dump() + ",";
  };
  out << "{";
  if (t.capacity) out << "\"capacity\":" << *t.capacity << ",";
  out << env("created") << "\"events\":[";
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const trace_event& e = t.events[i];
    out << (i ? ",[\"" : "[\"") << to_string(e.kind) << "\"," << e.tensor << ",\"" << to_string(e.when)
        << '"';
    if (e.stream != 0) out << ',' << e.stream;
    out << ']';
  }
  out << "],\"events_format\":"
      << str("[alloc|free|empty_cache, tensor index (-1 for empty_cache), phase, stream if not 0]") << ","
      << env("git_revision") << "\"layout\":" << str(t.layout_text) << ",\"microbatches_per_step\":" << t.microbatches_per_step
      << ",\"microbatches_traced\":" << t.microbatches_traced << ",\"model\":" << str(t.model)
      << "," << env("schema") << "\"stage\":" << t.stage << ",\"stages\":" << t.stages
      << ",\"tensors\":[";
  for (std::size_t i = 0; i < t.tensors.size(); ++i) {
    const trace_tensor& x = t.tensors[i];
    out << (i ? ",{" : "{") << "\"bytes\":" << x.bytes << ",\"dtype_bytes\":" << x.dtype_bytes
        << ",\"name\":" << str(x.name) << ",\"shape\":[";
    for (std::size_t d = 0; d < x.shape.size(); ++d) out << (d ? "," : "") << x.shape[d];
    out << "]}";
  }
  out << "]," << env("tool") << "\"tool_version\":" << envelope.at("tool_version").dump() << "}";
}

step_trace trace_from_json(const nlohmann::json& j, const std::string& origin) {
  using namespace headroom::detail;
  if (!j.is_object()) throw bad_input(origin, "expected a JSON object");
  records::require(j, records::kind::trace, origin + ".schema");
  step_trace t;
  t.model = opt_string_field(j, "model", origin).value_or("");
  t.layout_text = opt_string_field(j, "layout", origin).value_or("");
  t.stage = static_cast<int>(opt_int_field(j, "stage", origin, 0, max_stages).value_or(0));
  t.stages = static_cast<int>(opt_int_field(j, "stages", origin, 1, max_stages).value_or(1));
  t.microbatches_per_step = opt_int_field(j, "microbatches_per_step", origin, 1, INT64_MAX).value_or(1);
  t.microbatches_traced = opt_int_field(j, "microbatches_traced", origin, 1, INT64_MAX).value_or(1);
  t.capacity = opt_int_field(j, "capacity", origin, 1, INT64_MAX / 4);
  auto tensors = j.find("tensors");
  auto events = j.find("events");
  if (tensors == j.end() || !tensors->is_array())
    throw bad_input(origin + ".tensors", "missing or not an array");
  if (events == j.end() || !events->is_array())
    throw bad_input(origin + ".events", "missing or not an array");
  for (std::size_t i = 0; i < tensors->size(); ++i) {
    const std::string w = origin + ".tensors[" + std::to_string(i) + "]";
    const auto& x = (*tensors)[i];
    trace_tensor tt;
    tt.name = opt_string_field(x, "name", w).value_or("tensor" + std::to_string(i));
    tt.bytes = int_field(x, "bytes", w, 0, INT64_MAX / 4);
    tt.dtype_bytes = opt_int_field(x, "dtype_bytes", w, 1, 64).value_or(1);
    if (auto s = x.find("shape"); s != x.end() && s->is_array())
      for (const auto& d : *s) {
        if (!d.is_number_integer() || d.get<std::int64_t>() < 0)
          throw bad_input(w + ".shape", "must hold non-negative integers");
        tt.shape.push_back(d.get<std::int64_t>());
      }
    t.tensors.push_back(std::move(tt));
  }
  std::vector<char> live(t.tensors.size(), 0);
  for (std::size_t i = 0; i < events->size(); ++i) {
    const std::string w = origin + ".events[" + std::to_string(i) + "]";
    const auto& e = (*events)[i];
    if (!e.is_array() || e.size() < 3 || e.size() > 4 || !e[0].is_string() || !e[1].is_number_integer() ||
        !e[2].is_string() || (e.size() == 4 && !e[3].is_number_integer()))
      throw bad_input(w, "expected [\"alloc\"|\"free\"|\"empty_cache\", tensor index, phase(, stream)]");
    trace_event ev;
    const auto kind = e[0].get<std::string>();
    if (kind == "alloc")
      ev.kind = event_kind::alloc;
    else if (kind == "free")
      ev.kind = event_kind::free;
    else if (kind == "empty_cache")
      ev.kind = event_kind::empty_cache;
    else
      throw bad_input(w, "unknown event '" + kind + "'");
    if (e.size() == 4) {
      const auto stream = e[3].get<std::int64_t>();
      if (stream < 0 || stream > INT32_MAX) throw bad_input(w, "stream out of range");
      ev.stream = static_cast<std::int32_t>(stream);
    }
    ev.when = phase_from(e[2].get<std::string>(), w);
    if (ev.kind == event_kind::empty_cache) {
      ev.tensor = -1;
      t.events.push_back(ev);
      continue;
    }
    const auto id = e[1].get<std::int64_t>();
    if (id < 0 || static_cast<std::size_t>(id) >= t.tensors.size())
      throw bad_input(w, "names tensor " + std::to_string(id) + ", which does not exist");
    ev.tensor = static_cast<std::int32_t>(id);
    char& l = live[static_cast<std::size_t>(id)];
    if (ev.kind == event_kind::alloc && l)
      throw bad_input(w, "allocates tensor '" + t.tensors[static_cast<std::size_t>(id)].name + "' twice");
    if (ev.kind == event_kind::free && !l)
      throw bad_input(
          w, "frees tensor '" + t.tensors[static_cast<std::size_t>(id)].name + "', which is not allocated");
    l = ev.kind == event_kind::alloc;
    t.events.push_back(ev);
  }
  return t;
}

}  // namespace headroom::probes
