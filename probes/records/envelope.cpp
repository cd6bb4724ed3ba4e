// envelope.cpp: the envelope (envelope.hpp). The version and revision come from the build
// (probes/records/CMakeLists.txt generates headroom_git_revision.hpp at every build).
#include "probes/records/envelope.hpp"

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#if __has_include("headroom_git_revision.hpp")
#include "headroom_git_revision.hpp"
#endif
#ifndef HEADROOM_VERSION
#define HEADROOM_VERSION "0.0.0"
#endif
#ifndef HEADROOM_GIT_REVISION
#define HEADROOM_GIT_REVISION "unknown"
#endif

namespace headroom::records {

std::string tool_version() {
  return HEADROOM_VERSION;
}
std::string git_revision() {
  return HEADROOM_GIT_REVISION;
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json envelope(kind k) {
  // nlohmann::json keeps keys sorted; the envelope's fields are the same in every document.
  return {{"schema", schema_of(k)},
          {"tool", "headroom"},
          {"tool_version", tool_version()},
          {"git_revision", git_revision()},
          {"created", utc_now()}};
}

nlohmann::json enveloped(kind k, const nlohmann::json& doc) {
  nlohmann::json j = envelope(k);
  if (doc.is_object())
    for (const auto& [key, value] : doc.items())
      if (!j.contains(key)) j[key] = value;
  return j;
}

}  // namespace headroom::records
