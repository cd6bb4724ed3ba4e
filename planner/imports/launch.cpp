// launch.cpp: how the keys an importer could not model are named to the user (launch.hpp): every one of them,
// by name, on the refusal line, and with its reason in a plan's JSON.
#include "planner/imports/launch.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace headroom {

namespace {
// Splits an unmodelled entry "key: why" into its key and its reason (the whole entry is the key without one).
std::pair<std::string, std::string> launch_split_entry(const std::string& entry) {
  const std::size_t colon = entry.find(": ");
  if (colon == std::string::npos) return {entry, ""};
  return {entry.substr(0, colon), entry.substr(colon + 2)};
}
}  // namespace

std::vector<std::string> unmodelled_keys(const launch_import& imp) {
  std::vector<std::string> keys;
  for (const auto& entry : imp.unmodelled) {
    std::string key = launch_split_entry(entry).first;
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(std::move(key));
  }
  return keys;
}

std::string unmodelled_refusal(const launch_import& imp) {
  const auto keys = unmodelled_keys(imp);
  if (keys.empty()) return "";
  // The keys first and the text short: the error line ("headroom: bad input: ORIGIN: ...") holds 280
  // characters (cli/one_line.hpp), which would cut a longer one in its middle; keys that do not fit are
  // counted whole ("and 3 more"), and --explain or plan --json (not_modelled) names them all.
  const bool one = keys.size() == 1;
  const std::string tail = std::string(one ? " changes memory and is not modelled" : " change memory and are not modelled") +
                           ": refused (--allow-unmodelled plans anyway, --explain says why)";
  const std::size_t line = 280, fixed = std::string("headroom: bad input: : ").size() + imp.origin.size();
  const std::size_t room = line > fixed + tail.size() ? line - fixed - tail.size() : 0;
  std::string list;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::string more = ", and " + std::to_string(keys.size() - i) + " more";
    const std::string next = (list.empty() ? "" : ", ") + keys[i];
    const bool last = i + 1 == keys.size();
    if (!list.empty() && list.size() + next.size() + (last ? 0 : more.size()) > room) {
      list += more;
      break;
    }
    list += next;
  }
  return list + tail;
}

nlohmann::json unmodelled_json(const std::vector<launch_import>& imports) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& imp : imports)
    for (const auto& entry : imp.unmodelled) {
      auto [key, why] = launch_split_entry(entry);
      list.push_back({{"origin", imp.origin}, {"key", std::move(key)}, {"why", std::move(why)}});
    }
  return list;
}

}  // namespace headroom
