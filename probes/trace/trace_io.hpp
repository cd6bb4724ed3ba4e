// trace_io.hpp: the step trace as JSON (records::kind::trace: 1.1 added empty_cache events, per-event
// streams and the recorded capacity, 1.2 the envelope; readers of 1.x keep working on traces that use none of
// them), so anyone can replay it elsewhere (probes/trace/torch_replay.py replays it through PyTorch's own allocator).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <ostream>

#include "probes/trace/step_trace.hpp"

namespace headroom::probes {

// Returns the trace as a JSON document under `envelope` (records::envelope(records::kind::trace) when
// omitted).
nlohmann::json trace_to_json(const step_trace& t, const nlohmann::json& envelope);
nlohmann::json trace_to_json(const step_trace& t);
// Writes exactly trace_to_json(t, envelope).dump() to `out`, streamed: memory stays that of the trace
// itself, not of a JSON document of it (a 100,000-layer model's trace is hundreds of MB of text).
void write_trace_json(std::ostream& out, const step_trace& t, const nlohmann::json& envelope);
void write_trace_json(std::ostream& out, const step_trace& t);
// Returns the trace a JSON document describes. Throws bad_input naming the problem: an unknown schema
// major, a missing field, an event naming no tensor, a free of a tensor not allocated, a double allocation.
step_trace trace_from_json(const nlohmann::json& j, const std::string& origin);

}  // namespace headroom::probes
