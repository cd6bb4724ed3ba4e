// snapshot_fuzz.cpp: libFuzzer target for the snapshot reader: any bytes go through parse_snapshot (the
// pickle subset reader or the JSON path), then the summary, the trace conversion and a replay of the trace
// through the caching-allocator emulation. The only acceptable outcomes are a result or bad_input; a crash,
// a sanitizer report, a hang or a leak is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "planner/errors.hpp"
#include "probes/snapshot.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace headroom::probes;
  try {
    const torch_snapshot s =
        parse_snapshot(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    const snap_summary sum = summarise(s);
    (void)sum;
    for (int d = 0; d < static_cast<int>(s.devices.size()) && d < 2; ++d) {
      const snapshot_trace t = snapshot_to_trace(s, d);
      if (t.trace.events.size() < 20000)
        replay_snapshot(s, t, recorded_options(s), std::int64_t{1} << 34, true);
    }
  } catch (const headroom::bad_input&) {
  }
  return 0;
}
