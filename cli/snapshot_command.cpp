// snapshot_command.cpp: `headroom snapshot` and `headroom probe snapshot` (see snapshot_command.hpp).
// Parsing and printing only: reading, summarising and replaying snapshots live in probes/snapshots/.
#include "snapshot_command.hpp"

#include "option_units.hpp"

#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <tuple>

#include "exit_codes.hpp"
#include "record_files.hpp"
#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "planner/format.hpp"
#include "planner/gpu_types.hpp"
#include "planner/layout.hpp"
#include "planner/units.hpp"
#include "probe_command.hpp"
#include "probes/cases/measurement.hpp"
#include "probes/io/results_file.hpp"
#include "probes/snapshots/sidecar.hpp"
#include "probes/snapshots/snapshot.hpp"
#include "probes/snapshots/snapshot_record.hpp"
#include "probes/snapshots/what_if.hpp"
#include "probes/trace/trace_io.hpp"
#include "tables.hpp"
#include "probes/records/envelope.hpp"

namespace headroom::cli {

using namespace headroom::probes;

namespace {

std::string mib(std::int64_t b) {
  return mib_str(b, 2) + " MiB";
}

// Which of a device trace's events `probe snapshot` replays and why the others are not, as both commands say
// it (snapshot.hpp, snap_event_tally): "events: 8646 of the 12976 replayed (...); 4330 not (...)".
std::string tally_line(const snap_event_tally& t) {
  std::string replayed, skipped;
  const auto part = [](std::string& to, std::size_t n, const std::string& what) {
    if (n) to += (to.empty() ? "" : ", ") + std::to_string(n) + " " + what;
  };
  part(replayed, t.allocs, "allocs");
  part(replayed, t.frees, "frees that end a block's life");
  part(replayed, t.releases, "runs of segment releases, each as one empty_cache");
  part(skipped, t.requests, "free_requested (a block's life ends at its free_completed)");
  part(skipped, t.unmatched_frees, "frees of no block alive in the trace");
  part(skipped, t.segment_events, "segment events (the emulation makes its own segments)");
  part(skipped, t.ooms, "out-of-memory events (the emulation finds its own)");
  part(skipped, t.others, "other events (no allocator effect)");
  return "events: " + std::to_string(t.replayed()) + " of the " + std::to_string(t.events) + " replayed" +
         (replayed.empty() ? "" : " (" + replayed + ")") + "; " + std::to_string(t.not_replayed()) + " not" +
         (skipped.empty() ? "" : ": " + skipped);
}

// The blocks alive at the requested peak, grouped by call site (largest first, the first `shown`; the rest
// summed), then split by phase and by kind, both said to be inferred (peak_breakdown.hpp).
void write_at_peak(std::ostream& out, const snap_peak_breakdown& b, std::size_t shown) {
  out << "  live at the requested peak: " << mib(b.total) << " in " << b.blocks.size()
      << " blocks; by call site (the allocation's top frame), largest first:\n";
  std::int64_t rest = 0;
  std::size_t rest_blocks = 0;
  for (std::size_t k = 0; k < b.sites.size(); ++k) {
    const auto& x = b.sites[k];
    if (k >= shown) {
      rest += x.bytes;
      rest_blocks += x.blocks;
      continue;
    }
    char line[96];
    std::snprintf(line, sizeof line, "    %14s  %5zu block%s  (largest %s)  ", mib(x.bytes).c_str(), x.blocks,
                  x.blocks == 1 ? " " : "s", mib(x.largest).c_str());
    out << line << x.site << "\n";
  }
  if (b.sites.size() > shown)
    out << "    " << mib(rest) << " in " << rest_blocks << " blocks at " << b.sites.size() - shown
        << " other call sites\n";
  if (!b.frames_recorded) {
    out << "  by phase and kind: unknown (inferred from stack frames, and the trace records none)\n";
    return;
  }
  out << "  by phase (inferred from each allocation's frames, else from those around it; docs/snapshots.md, "
         "\"Phases and kinds\"): the peak falls in "
      << to_string(b.peak_phase) << " (" << b.peak_phase_how << ")\n    ";
  // The known first, unknown last (its enumerator is 0 in each).
  for (std::size_t p = 1; p <= snap_phases; ++p)
    out << (p > 1 ? ", " : "") << to_string(static_cast<snap_phase>(p % snap_phases)) << " "
        << mib(b.by_phase[p % snap_phases]);
  out << "\n  by kind (inferred from the frames and the blocks' lifetimes, same rules):\n    ";
  for (std::size_t k = 1; k <= snap_kinds; ++k)
    out << (k > 1 ? ", " : "") << to_string(static_cast<snap_kind>(k % snap_kinds)) << " "
        << mib(b.by_kind[k % snap_kinds]);
  out << "\n";
}

// The record of `probe snapshot` (records::kind::snapshot_replay): the emulation's figures beside the real
// allocator's, and where they first differ.
nlohmann::json replay_record(const torch_snapshot& s, const snapshot_trace& t, const snapshot_replay& r,
                             bool same_settings, const caching_options& o) {
  nlohmann::json start = nullptr;
  if (!t.cold)
    start = {{"reconstructed", t.start.reconstructed}, {"how", t.start.why}, {"used", r.from_start_state}};
  nlohmann::json oom = nullptr;
  if (r.oom_event) oom = {{"event", *r.oom_event}, {"bytes", r.oom_bytes}};
  nlohmann::json real = nullptr;
  if (same_settings)
    real = {{"peak_reserved", r.real_peak_reserved}, {"segments_created", r.real_segments_created}};
  return records::enveloped(records::kind::snapshot_replay, {
      {"source", s.origin},
      {"device", t.device},
      {"cold", t.cold},
      {"trace_events", t.trace.events.size()},
      {"events_replayed", tally_json(t.tally)},
      {"leading_allocs", t.leading_allocs},
      {"start_state", start},
      {"settings",
       {{"emulated", r.settings},
        {"max_split_size", o.max_split_size ? nlohmann::json(*o.max_split_size) : nlohmann::json(nullptr)},
        {"expandable_segments", o.expandable_segments},
        {"as_recorded", same_settings}}},
      {"emulated",
       {{"peak_reserved", r.peak_reserved},
        {"peak_allocated", r.peak_allocated},
        {"peak_requested", r.peak_requested},
        {"segments_created", r.segments_created},
        {"retries", r.retries},
        {"oom", oom}}},
      {"real", real},
      {"comparison",
       {{"compared", same_settings},
        {"event_by_event", same_settings && (t.cold || r.from_start_state)},
        {"agrees", same_settings && !r.diverged_at && r.divergence.empty() && !r.oom_event},
        {"diverged_at", r.diverged_at ? nlohmann::json(*r.diverged_at) : nlohmann::json(nullptr)},
        {"divergence", r.divergence}}},
      {"note",
       "emulated: headroom's caching-allocator emulation replaying the snapshot's alloc / free sequence; "
       "real: what PyTorch's allocator did on the recording GPU (measured)"}});
}

// The planner's prediction for the run's model and layout (worst stage), when `headroom snapshot` is given
// them: the record's "inputs", "stage" and "predicted".
void add_prediction(nlohmann::json& record, const plan_options& o) {
  const problem p = problem_from(o);
  const layout l = layout_from(o);
  const breakdown b = estimate(p, l);
  const auto& w = b.worst_stage();
  record["inputs"] = record_inputs(p, l);
  record["stage"] = w.stage;
  record["predicted"] = predicted_block(w);
  record["predicted"]["note"] =
      "predicted by the analytic model for the run's model and layout (worst stage), beside the measured peaks";
}

// What one device's trace measured, as `headroom snapshot` prints it.
void write_device_summary(std::ostream& out, const snap_device_summary& d) {
  out << "\ndevice " << d.device << ": " << d.events << " events (";
  bool first = true;
  for (const auto& [k, n] : d.counts) {
    out << (first ? "" : ", ") << k << " " << n;
    first = false;
  }
  out << "), " << d.streams.size() << " stream" << (d.streams.size() == 1 ? "" : "s") << "\n";
  out << "  " << tally_line(d.tally) << "\n";
  out << "  " << (d.cold ? "cold" : "warm") << ": " << d.cold_why << "\n";
  if (d.live_before)
    out << "  alive before recording: " << d.live_before << " blocks, " << mib(d.live_before_bytes) << "\n";
  if (!d.cold)
    out << "  state at the start: "
        << (d.start_reconstructed ? d.start_why : "not reconstructed (" + d.start_why + ")") << "\n";
  out << "  peak requested   " << mib(d.peak_requested) << " at event " << d.peak_requested_event << "\n";
  out << "  peak reserved    " << mib(d.peak_reserved) << " at event " << d.peak_reserved_event
      << (d.reserved_from_events ? " (from segment events)"
                                 : " (no segment events: the final segments' total)")
      << "\n";
  char frag[64];
  std::snprintf(frag, sizeof frag, "%.1f%%", 100 * d.fragmentation_at_reserved_peak);
  // One line, grep "fragmentation:": the figure only where it describes the recorded window.
  if (d.fragmentation_measured)
    out << "  fragmentation: " << frag << " at the reserved peak (1 - requested / reserved; requested "
        << mib(d.requested_at_reserved_peak) << "), measured " << d.fragmentation_why << "\n";
  else
    out << "  fragmentation: not measured (" << d.fragmentation_why << ")\n";
  if (d.empty_cache_calls)
    out << "  empty_cache: " << d.empty_cache_calls << " (segment frees outside a retry)\n";
  write_at_peak(out, d.at_peak, 10);
  if (d.ooms.empty()) out << "  out-of-memory events: none\n";
  for (const auto& oom : d.ooms)
    out << "  OUT OF MEMORY at event " << oom.event << ": " << mib(oom.size) << " requested, "
        << (oom.device_free >= 0 ? mib(oom.device_free) : std::string("?")) << " free on the device"
        << (oom.frame.empty() ? "" : ", in " + oom.frame) << "\n";
}

// The comparison's verdict in one line, "comparison: agrees ..." or "comparison: differs ...", from the
// replay's outcome (the out-of-memory first: the real allocator served that request).
std::string comparison_line(const snapshot_replay& r, bool same_settings) {
  if (!same_settings) return "comparison: not made (the settings differ from the recorded ones)";
  if (r.oom_event)
    return "comparison: differs: the emulation ran out of memory at snapshot event " + std::to_string(*r.oom_event) +
           ", which the real allocator served (at this capacity; --gpu-mem sets it)";
  if (r.diverged_at)
    return "comparison: differs: diverges at snapshot event " + std::to_string(*r.diverged_at) + ": " +
           r.divergence;
  if (!r.divergence.empty())
    return std::string("comparison: ") + (r.real_peak_reserved == r.peak_reserved ? "agrees" : "differs") +
           " at the reserved peak (" + mib(r.real_peak_reserved) + " real, " + mib(r.peak_reserved) +
           " emulated): " + r.divergence;
  return std::string("comparison: agrees: every segment and every block address as the real allocator's") +
         (r.from_start_state ? ", from the reconstructed start" : "");
}

// The capacity a snapshot replays under: --gpu-mem, else the GPU's total memory from the capture sidecar,
// else the snapshot's when recorded, else unbounded (no out-of-memory emulated).
struct replay_capacity {
  std::int64_t bytes = std::int64_t{1} << 50;
  std::string from = "unknown (no out-of-memory emulated; give --gpu-mem)";
  const char* source = "unbounded";  // the record's "from"
};

replay_capacity capacity_of(const probe_snapshot_options& o, const torch_snapshot& s,
                            const std::optional<capture_sidecar>& side) {
  replay_capacity c;
  if (o.gpu_mem_gib) {
    if (!(*o.gpu_mem_gib > 0) || *o.gpu_mem_gib > 1e6)
      throw bad_input("gpu-mem", "must be a positive number of GiB");
    c.bytes = static_cast<std::int64_t>(*o.gpu_mem_gib * static_cast<double>(gib));
    c.from = gib_str(c.bytes, 2) + " GiB from --gpu-mem";
    c.source = "--gpu-mem";
  } else if (side) {
    c.bytes = side->gpu_total_memory;
    c.from = gib_str(c.bytes, 2) + " GiB, the total memory of the " + side->gpu + " (capture sidecar; " +
             mib(std::max<std::int64_t>(0, side->outside_allocator)) +
             " of it was outside the allocator when the capture ended)";
    c.source = "capture sidecar";
  } else if (s.capacity) {
    c.bytes = *s.capacity;
    c.from = gib_str(c.bytes, 2) + " GiB recorded in the snapshot";
    c.source = "snapshot";
  }
  return c;
}

// The settings the emulation replays under: the recorded ones, unless the command line gives others.
caching_options settings_of(const probe_snapshot_options& o, const torch_snapshot& s) {
  if (!o.expandable_segments && !o.max_split_size_mb) return recorded_options(s);
  caching_options copt;
  copt.expandable_segments = o.expandable_segments;
  if (o.max_split_size_mb) {
    if (!(*o.max_split_size_mb >= 20) || *o.max_split_size_mb > 1e9)
      throw bad_input("max-split-size-mb", "must be at least 20 (PyTorch's lower limit)");
    copt.max_split_size =
        static_cast<std::int64_t>(*o.max_split_size_mb * static_cast<double>(headroom::mib));
  }
  return copt;
}

// The head of `probe snapshot`'s text: the trace, its start, what is compared, the capacity.
void write_replay_head(std::ostream& out, const probe_snapshot_options& o, const snapshot_trace& t,
                       const snapshot_replay& r, const replay_capacity& cap) {
  out << "headroom probe snapshot " << o.file << ": device " << t.device << ", "
      << (t.cold ? "cold trace" : "warm trace") << ", " << t.tally.events << " events\n";
  out << tally_line(t.tally);
  if (t.leading_allocs)
    out << "; before them, " << t.leading_allocs << " allocs of the blocks alive before recording"
        << (r.from_start_state ? " (not run: the replay adopts the reconstructed start)" : "");
  out << "\n";
  if (!t.cold)
    out << (t.start.reconstructed ? "state at the start: " + t.start.why +
                                        (r.from_start_state ? "; the replay starts there"
                                                            : "; not used under other settings: the blocks "
                                                              "alive then are allocated first (approximate)")
                                  : "state at the start not reconstructed (" + t.start.why +
                                        "): the blocks alive then are allocated first (approximate)")
        << "\n";
  out << "real: measured by PyTorch on the recording GPU; emulated: headroom's " << r.settings << "\n";
  out << "capacity: " << cap.from << "\n\n";
}

// The emulation beside the real allocator (under the recorded settings), or alone (under others), then the
// comparison's verdict on one line (grep "comparison:"), after the replay's outcome: never "agrees" where
// the emulation ran out of memory and the real allocator did not.
void write_replay_comparison(std::ostream& out, const snapshot_replay& r, bool same_settings) {
  char line[160];
  if (same_settings) {
    std::snprintf(line, sizeof line, "%-22s %18s %18s\n", "", "real", "emulated");
    out << line;
    std::snprintf(line, sizeof line, "%-22s %18s %18s\n", "reserved peak", mib(r.real_peak_reserved).c_str(),
                  mib(r.peak_reserved).c_str());
    out << line;
    std::snprintf(line, sizeof line, "%-22s %18lld %18lld\n", "segments created",
                  static_cast<long long>(r.real_segments_created),
                  static_cast<long long>(r.segments_created));
    out << line;
  } else {
    out << "settings differ from the recorded ones: the real trace is not compared\n";
    std::snprintf(line, sizeof line, "%-22s %18s\n", "reserved peak", mib(r.peak_reserved).c_str());
    out << line;
    std::snprintf(line, sizeof line, "%-22s %18lld\n", "segments created",
                  static_cast<long long>(r.segments_created));
    out << line;
  }
  out << "emulated peak allocated " << mib(r.peak_allocated) << ", requested " << mib(r.peak_requested)
      << ", retries " << r.retries << "\n";
  if (r.oom_event)
    out << "OUT OF MEMORY in the emulation at snapshot event " << *r.oom_event << " (" << mib(r.oom_bytes)
        << " requested)\n";
  out << "\n" << comparison_line(r, same_settings) << "\n";
}

// The least card that runs the trace, on one line (grep "least card:"): the allocator's least capacity
// under the recorded settings plus the memory outside the allocator: the capture's measured figure when a
// sidecar is there, else the planner's default fixed overheads (device_spec::fixed_overheads,
// planner/layout.hpp; docs/fixed-overheads.md). Returns the record's "least_card" block.
nlohmann::json write_least_card(std::ostream& out, const what_if_row& recorded,
                                const std::optional<capture_sidecar>& side, const std::string& start) {
  const bool measured = side && side->outside_allocator > 0;
  const std::int64_t fixed = measured ? side->outside_allocator : device_spec{}.fixed_overheads;
  const std::string fixed_from =
      measured ? "outside the allocator when the capture ended (CUDA context, NCCL; measured, sidecar)"
               : "CUDA context and NCCL (the default fixed overheads, uncalibrated: docs/fixed-overheads.md)";
  if (!recorded.least_capacity) {
    out << "least card: not found: out of memory at the capacity under the recorded settings (give a larger "
           "--gpu-mem)\n";
    return {{"bytes", nullptr}, {"fixed_bytes", fixed}, {"fixed_from", measured ? "sidecar" : "default"}};
  }
  const std::int64_t card = recorded.least_capacity + fixed;
  out << "least card: " << mib(card) << " (" << gib_str(card, 2) << " GiB) = " << mib(recorded.least_capacity)
      << " for the allocator (" << recorded.setting << ", emulated from " << start << ") + " << mib(fixed) << " "
      << fixed_from << "\n";
  return {{"bytes", card},
          {"allocator_bytes", recorded.least_capacity},
          {"fixed_bytes", fixed},
          {"fixed_from", measured ? "sidecar" : "default"}};
}

// --what-if: the same sequence under other settings, its table, the expandable-segments verdict and the
// least card; returns the record's "what_if" rows and "answers".
std::pair<nlohmann::json, nlohmann::json> write_what_if(std::ostream& out, const torch_snapshot& s,
                                                        const snapshot_trace& t, std::int64_t capacity,
                                                        const std::optional<capture_sidecar>& side) {
  char line[200];
  const std::string start = common_start_text(t);
  out << "\nwhat if (the same sequence under other settings, emulated; every setting from " << start << "):\n";
  std::snprintf(line, sizeof line, "%-44s %16s %10s %26s\n", "setting", "reserved peak", "maps",
                "least capacity that runs");
  out << line;
  const char* start_word = t.cold ? "cold" : "alive blocks allocated first";
  nlohmann::json rows = nlohmann::json::array();
  const auto table = what_if(s, t, capacity);
  const what_if_row* recorded = nullptr;
  for (const auto& row : table) {
    if (row.options == recorded_options(s) && !recorded) recorded = &row;
    rows.push_back({{"setting", row.setting},
                    {"peak_reserved", row.replayed.peak_reserved},
                    {"maps", row.replayed.segments_created},
                    {"least_capacity",
                     row.least_capacity ? nlohmann::json(row.least_capacity) : nlohmann::json(nullptr)},
                    {"start", start_word}});
    std::snprintf(line, sizeof line, "%-44s %16s %10lld %26s\n", row.setting.c_str(),
                  mib(row.replayed.peak_reserved).c_str(),
                  static_cast<long long>(row.replayed.segments_created),
                  row.least_capacity ? mib(row.least_capacity).c_str() : "out of memory at capacity");
    out << line;
  }
  if (!t.cold)
    out << "(\"maps\" counts the segments mapped in the window; the replay above, under the recorded settings, "
           "may start from the reconstructed state instead)\n";
  out << "(" << what_if_definitions() << ")\n";
  const auto v = expandable_from_rows(table, s);
  const std::string verdict = expandable_line(v, start);
  out << "\n" << verdict << "\n";
  nlohmann::json answers = {{"expandable_segments",
                             {{"peak_off", v.peak_off},
                              {"peak_on", v.peak_on},
                              {"saving_bytes", v.saving_bytes},
                              {"least_off", v.least_off},
                              {"least_on", v.least_on},
                              {"least_change_bytes", v.least_change_bytes},
                              {"worth_setting", v.worth_setting},
                              {"verdict", verdict},
                              {"start", start_word}}}};
  if (recorded) answers["least_card"] = write_least_card(out, *recorded, side, start);
  return {rows, answers};
}

// The sidecar in a record: the environment (measurement_from_json reads gpu, driver, cuda_runtime, nccl) and
// the capture's own figures; the snapshot's capacity from the GPU when the snapshot has none.
void add_sidecar(nlohmann::json& record, const std::optional<capture_sidecar>& side) {
  if (!side) return;
  record["environment"] = sidecar_environment(*side);
  record["capture"] = sidecar_capture_block(*side);
  if (record.contains("capacity") && record["capacity"].is_null()) record["capacity"] = side->gpu_total_memory;
}

// The sidecar's lines in `headroom snapshot`: the GPU and software stack, and torch.cuda's own peaks.
void write_sidecar(std::ostream& out, const capture_sidecar& c) {
  out << "captured on " << c.gpu << " (" << gib_str(c.gpu_total_memory, 2) << " GiB), driver "
      << (c.driver.empty() ? "?" : c.driver) << ", CUDA " << (c.cuda_runtime.empty() ? "?" : c.cuda_runtime)
      << ", torch " << c.torch << ", rank " << c.rank << " of " << (c.world_size > 0 ? std::to_string(c.world_size) : std::string("an unknown world")) << " (sidecar " << c.path
      << ")\n";
  out << "measured by torch.cuda: max_memory_reserved " << mib(c.max_reserved) << ", max_memory_allocated "
      << mib(c.max_allocated) << "; device used at the peak about " << mib(c.device_used_at_peak)
      << " (the reserved peak + what was outside the allocator at the end)\n";
}

// Returns the sidecar beside the snapshot `s` read from `file` (nullopt: none), refusing one whose figures
// contradict the snapshot (sidecar.hpp, check_sidecar_against) and warning on stderr when its allocator
// settings differ from the snapshot's own (sidecar_conf_warning).
std::optional<capture_sidecar> checked_sidecar(const std::string& file, const torch_snapshot& s) {
  auto side = load_sidecar_beside(file);
  if (side) check_sidecar_against(*side, s);
  if (side && s.settings.recorded)
    if (const std::string w = sidecar_conf_warning(*side, s.settings.conf); !w.empty()) std::cerr << w << "\n";
  return side;
}

}  // namespace

CLI::App* add_snapshot_command(CLI::App& app, snapshot_options& o) {
  auto* c = app.add_subcommand(
      "snapshot", "Read a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot): what it measured");
  c->add_option("file", o.file, "The snapshot: a pickle, or the same content as JSON")->required();
  c->add_option("--json", o.json_out, "Write the record (headroom.measurement/1.2) to FILE ('-' for stdout)");
  c->add_option("--trace", o.trace_out,
                "Write the device's trace (headroom.trace/1.1) to FILE ('-' for stdout)");
  c->add_option("--device", o.device, "Device trace to convert with --trace")->capture_default_str();
  c->add_flag("--force", o.force, "Replace output files that exist");
  add_problem_options(c, o.problem);
  // The model and layout are optional here: given, the planner's prediction joins the record.
  c->get_option_group("model")->require_option(-1);
  return c;
}

CLI::App* add_probe_snapshot_command(CLI::App* probe, probe_snapshot_options& o) {
  auto* c = probe->add_subcommand(
      "snapshot", "Replay a PyTorch memory snapshot (pickle or JSON) through the allocator emulation");
  c->add_option("file", o.file, "The snapshot: a pickle, or the same content as JSON")->required();
  c->add_option("--device,--snapshot-device", o.device, "The device trace to replay")->capture_default_str();
  c->add_flag("--what-if", o.what_if,
              "The same sequence under other settings and the least capacity each needs");
  c->add_option("--gpu-mem", o.gpu_mem_gib,
                "Capacity: GiB, or with a unit (80GB, 80GiB); default: the snapshot's, else unbounded")
      ->transform(gib_from_text);
  c->add_option("--max-split-size-mb", o.max_split_size_mb, "Replay under PyTorch's max_split_size_mb");
  c->add_flag("--expandable-segments", o.expandable_segments,
              "Replay under PyTorch's expandable_segments:True");
  // Taken only to be refused with the flag that does it: the parser's own refusal lists the words backwards.
  c->add_option("--gpu-type", o.gpu_type, "Not taken: give --gpu-mem with the GPU's capacity")->group("");
  c->add_option("--json", o.json_out,
                "Write the record (" + records::schema_of(records::kind::snapshot_replay) + ") to FILE ('-' for stdout)");
  c->add_flag("--force", o.force, "Replace output files that exist");
  return c;
}

int run_snapshot(const snapshot_options& o) {
  output_set outs(o.force, &std::cout);
  outs.input(o.file);
  outs.input(sidecar_path(o.file));
  add_problem_inputs(outs, o.problem);
  outs.expect(o.json_out);
  outs.expect(o.trace_out);
  const torch_snapshot s = load_snapshot(o.file);
  const auto side = checked_sidecar(o.file, s);
  const snap_summary sum = summarise(s);
  nlohmann::json record = snapshot_record(s, sum);
  add_sidecar(record, side);
  record["environment"]["command_line"] = o.command_line;  // the report shows how the record was made
  // A figure that does not describe the recorded window is not one (summary.hpp, fragmentation_measured).
  for (std::size_t i = 0; i < sum.devices.size(); ++i) {
    const auto& d = sum.devices[i];
    if (!d.fragmentation_measured) record["devices"][i]["fragmentation_at_reserved_peak"] = nullptr;
    record["devices"][i]["fragmentation_why"] = d.fragmentation_why;
  }
  // The run's model and layout, when given: the planner's prediction beside what was measured.
  const bool with_model =
      given(o.problem, "--preset") || given(o.problem, "--model") || given(o.problem, "--hf-config");
  if (with_model) add_prediction(record, o.problem);
  std::ostringstream out;
  out << "headroom snapshot: " << o.file
      << "\nmeasured by PyTorch's caching allocator on the recording GPU\n";
  if (s.settings.recorded)
    out << "allocator settings: PYTORCH_CUDA_ALLOC_CONF='" << s.settings.conf << "', max_split_size "
        << (s.settings.max_split_size ? mib(*s.settings.max_split_size) : std::string("none"))
        << ", expandable_segments " << (s.settings.expandable_segments ? "on" : "off") << "\n";
  else
    out << "allocator settings: not recorded\n";
  if (side) write_sidecar(out, *side);
  for (const auto& d : sum.devices) write_device_summary(out, d);
  out << "\nfinal segments: " << sum.final_segments << ", reserved " << mib(sum.final_reserved)
      << ", allocated " << mib(sum.final_allocated) << ", requested " << mib(sum.final_requested) << "\n";
  if (with_model) {
    const auto& w = record["predicted"];
    out << "predicted for this run (analytic model, worst rank): step peak "
        << gib_str(w["step_peak_bytes"].get<std::int64_t>(), 2) << " GiB, reference total "
        << gib_str(w["total_bytes"].get<std::int64_t>(), 2) << " GiB\n";
  }
  if (!o.trace_out.empty()) {
    const auto t = std::make_shared<const snapshot_trace>(snapshot_to_trace(s, o.device));
    outs.add(o.trace_out, [t](std::ostream& f) {
      write_trace_json(f, t->trace);
      f << "\n";
    });
    out << "trace of device " << o.device << " written to " << o.trace_out << " (" << t->trace.events.size()
        << " events"
        << (t->approximate ? "; warm: the blocks alive before recording are allocated first, approximate"
            : t->cold      ? ""
                           : "; warm: the blocks alive before recording are allocated first; `probe "
                             "snapshot` starts from the reconstructed state instead")
        << ")\n";
  }
  if (!o.json_out.empty()) {
    outs.add(o.json_out, record.dump(2) + "\n");
    if (o.json_out != "-") out << "record written to " << o.json_out << "\n";
  }
  outs.commit();
  if (!outs.to_stdout()) std::cout << out.str();
  return exit_fits;
}

int run_probe_snapshot(const probe_snapshot_options& o) {
  if (auto refused = refused_under_launcher("snapshot")) return *refused;
  if (!o.gpu_type.empty()) {
    const gpu_type& g = find_gpu_type(o.gpu_type);  // an unknown name is refused with the closest known ones
    throw bad_input("gpu-type",
                    "'probe snapshot' replays under the capacity of the capture, not a GPU type's; to replay on a " +
                        std::string(g.name) + ", give '--gpu-mem " + gib_str(g.capacity, 2) + "GiB' (its capacity)");
  }
  output_set outs(o.force, &std::cout);
  outs.input(o.file);
  outs.input(sidecar_path(o.file));
  outs.expect(o.json_out);
  const torch_snapshot s = load_snapshot(o.file);
  const auto side = checked_sidecar(o.file, s);
  const snapshot_trace t = snapshot_to_trace(s, o.device);
  const replay_capacity cap = capacity_of(o, s, side);
  const caching_options copt = settings_of(o, s);
  const bool same_settings = copt == recorded_options(s);
  const snapshot_replay r = replay_snapshot(s, t, copt, cap.bytes, same_settings);
  std::ostringstream out;
  write_replay_head(out, o, t, r, cap);
  write_replay_comparison(out, r, same_settings);
  nlohmann::json record = replay_record(s, t, r, same_settings, copt);
  record["capacity"] = {{"bytes", cap.bytes}, {"from", cap.source}};
  add_sidecar(record, side);
  record["environment"]["command_line"] = o.command_line;
  if (o.what_if) std::tie(record["what_if"], record["answers"]) = write_what_if(out, s, t, cap.bytes, side);
  if (!o.json_out.empty()) {
    outs.add(o.json_out, record.dump(2) + "\n");
    if (o.json_out != "-") out << "record written to " << o.json_out << "\n";
  }
  outs.commit();
  if (!outs.to_stdout()) std::cout << out.str();
  if (r.oom_event) return exit_does_not_fit;
  return exit_fits;
}

}  // namespace headroom::cli
