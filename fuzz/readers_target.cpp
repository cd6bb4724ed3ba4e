// readers_target.cpp: the fuzz targets of two readers of what users bring from their runs: observations
// (`headroom observe`'s rows of logged peaks, CSV or JSON: calibrate/observations.hpp) and sidecar (the JSON
// tools/headroom_capture.py writes beside a snapshot: probes/snapshots/sidecar.hpp). Each reader's contract:
// any input returns rows / a sidecar or throws bad_input naming the problem; anything else escaping, a crash, a
// hang or a sanitizer report is a finding. What a reader returns is checked too: values finite and positive.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "calibrate/observations.hpp"
#include "fuzz_internal.hpp"
#include "planner/errors.hpp"
#include "planner/model_files.hpp"
#include "probes/snapshots/sidecar.hpp"

namespace headroom::fuzz {

void fuzz_observations(std::string_view bytes) {
  const std::string text(bytes);
  auto check = [](const std::vector<calibrate::observation_row>& rows) {
    for (const auto& r : rows) require(r.bytes > 0);
  };
  try {
    check(calibrate::observations_from_csv(text, "fuzz"));
  } catch (const bad_input&) {
  }
  nlohmann::json j;
  try {
    j = parse_json_text(text, "fuzz");
  } catch (const bad_input&) {
    return;
  }
  try {
    check(calibrate::observations_from_json(j, "fuzz"));
  } catch (const bad_input&) {
  }
}

void fuzz_sidecar(std::string_view bytes) {
  nlohmann::json j;
  try {
    j = parse_json_text(std::string(bytes), "fuzz");
  } catch (const bad_input&) {
    return;
  }
  try {
    const probes::capture_sidecar c = probes::parse_sidecar(j, "fuzz", "snapshot.pickle");
    require(c.outside_allocator >= 0);
    (void)probes::sidecar_environment(c);
    (void)probes::sidecar_capture_block(c);
  } catch (const bad_input&) {
  }
}

}  // namespace headroom::fuzz
