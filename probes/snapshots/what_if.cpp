// what_if.cpp: a snapshot's trace under other allocator settings (what_if.hpp).
#include "probes/snapshots/what_if.hpp"

#include <algorithm>
#include <cstdio>

#include "planner/format.hpp"
#include "planner/units.hpp"

namespace headroom::probes {

snapshot_trace common_start(const snapshot_trace& t) {
  snapshot_trace c = t;
  // replay_snapshot adopts the reconstructed start only when it is marked reconstructed (replay.hpp); the
  // leading allocs of the blocks alive before the window are in the trace either way (convert.hpp).
  c.start.reconstructed = false;
  return c;
}

std::string common_start_text(const snapshot_trace& t) {
  return t.cold ? "an empty allocator (cold trace)"
                : "the blocks alive before recording allocated first (warm trace; the same start for every "
                  "setting)";
}

std::int64_t least_capacity(const torch_snapshot& s, const snapshot_trace& t, const caching_options& o,
                            const snapshot_replay& at_full) {
  if (at_full.oom_event) return 0;  // does not run at the given capacity
  // Bisection in 2 MiB steps between the requested peak and what the replay reserved at the full capacity
  // (retries can make it run below that).
  std::int64_t lo = std::max<std::int64_t>(1, at_full.peak_requested / (2 * mib)),
               hi = (at_full.peak_reserved + 2 * mib - 1) / (2 * mib);
  lo = std::min(lo, hi);
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (replay_snapshot(s, t, o, mid * 2 * mib, false).oom_event)
      lo = mid + 1;
    else
      hi = mid;
  }
  return hi * 2 * mib;
}

std::vector<what_if_row> what_if(const torch_snapshot& s, const snapshot_trace& t, std::int64_t capacity) {
  std::vector<std::pair<std::string, caching_options>> settings;
  settings.push_back({"default (no options)", {}});
  caching_options exp;
  exp.expandable_segments = true;
  settings.push_back({"expandable_segments:True", exp});
  for (std::int64_t ms : {128, 512}) {
    caching_options o;
    o.max_split_size = ms * mib;
    settings.push_back({"max_split_size_mb:" + std::to_string(ms), o});
  }
  const caching_options recorded = recorded_options(s);
  caching_options recorded_exp = recorded;
  recorded_exp.expandable_segments = !recorded.expandable_segments;
  for (const auto& o : {recorded, recorded_exp})
    if (std::none_of(settings.begin(), settings.end(), [&](const auto& st) { return st.second == o; }))
      settings.push_back({(o == recorded ? "as recorded (" : "as recorded, expandable toggled (") +
                              std::string(o.expandable_segments ? "expandable" : "not expandable") +
                              (o.max_split_size ? ", max_split_size " + mib_str(*o.max_split_size, 0) + " MiB)" : ")"),
                          o});
  const snapshot_trace same = common_start(t);
  std::vector<what_if_row> rows;
  for (const auto& [name, o] : settings) {
    what_if_row row;
    row.setting = name;
    row.options = o;
    row.replayed = replay_snapshot(s, same, o, capacity, false);
    row.least_capacity = least_capacity(s, same, o, row.replayed);
    rows.push_back(std::move(row));
  }
  return rows;
}

expandable_verdict expandable_from_rows(const std::vector<what_if_row>& rows, const torch_snapshot& s) {
  caching_options off = recorded_options(s), on = off;
  off.expandable_segments = false;
  on.expandable_segments = true;
  expandable_verdict v;
  for (const auto& r : rows) {
    if (r.options == off) {
      v.peak_off = r.replayed.peak_reserved;
      v.least_off = r.least_capacity;
      v.oom_off = r.replayed.oom_event.has_value();
    } else if (r.options == on) {
      v.peak_on = r.replayed.peak_reserved;
      v.least_on = r.least_capacity;
      v.oom_on = r.replayed.oom_event.has_value();
    }
  }
  v.saving_bytes = v.peak_off - v.peak_on;
  v.least_change_bytes = v.least_on - v.least_off;
  v.worth_setting = !v.oom_off && !v.oom_on && v.least_off > 0 && v.least_on > 0 &&
                    -static_cast<double>(v.least_change_bytes) >=
                        worth_setting_fraction * static_cast<double>(v.least_off);
  return v;
}

std::string expandable_line(const expandable_verdict& v, const std::string& start) {
  const auto m = [](std::int64_t b) { return mib_str(b, 2) + " MiB"; };
  const auto change = [&](std::int64_t lower_by, const char* what) {
    if (lower_by == 0) return std::string(what) + " stays the same";
    return std::string(what) + (lower_by > 0 ? " falls by " + m(lower_by) : " rises by " + m(-lower_by));
  };
  const std::string emulated = " (emulated, both from " + start + ")";
  if (v.oom_off || v.oom_on)
    return std::string("expandable_segments: out of memory at the capacity ") +
           (v.oom_off ? "without" : "with") + " them: give a larger --gpu-mem to compare" + emulated;
  const double pct = v.least_off > 0 ? 100.0 * static_cast<double>(-v.least_change_bytes) /
                                           static_cast<double>(v.least_off)
                                     : 0;
  char share[32];
  std::snprintf(share, sizeof share, "%.1f%%", pct);
  std::string verdict;
  if (v.worth_setting)
    verdict = std::string("worth setting: the step runs on ") + share + " less";
  else if (v.least_change_bytes > 0)
    verdict = "not worth it: the step needs more memory with them";
  else if (v.least_change_bytes < 0)
    verdict = std::string("not worth it: the step runs on only ") + share + " less (under " +
              std::to_string(static_cast<int>(100 * worth_setting_fraction)) + "%)";
  else
    verdict = "not worth it: the step needs the same memory with them";
  const std::string reserved = change(v.saving_bytes, "the reserved peak") + " (" + m(v.peak_off) + " off, " +
                               m(v.peak_on) + " on)";
  const std::string least = change(-v.least_change_bytes, "the least capacity that runs this step") + " (" +
                            m(v.least_off) + " off, " + m(v.least_on) + " on)";
  return "expandable_segments: " + reserved + "; " + least + ": " + verdict + emulated;
}

std::string what_if_definitions() {
  return "reserved peak: the most the allocator holds on a card large enough that it never frees its "
         "cache; least capacity that runs: the smallest allocator share (2 MiB steps) on which the step "
         "runs, freeing its cache when a request fails: it decides whether the step fits";
}

}  // namespace headroom::probes
