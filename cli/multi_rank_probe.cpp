// multi_rank_probe.cpp: one rank of a multi-rank probe, and rank 0's table and files (see
// multi_rank_probe.hpp). The session (the exchanges, the NCCL groups, the gather and the summary) is
// probes/ranks/session.hpp; here are the options, this rank's device (probe_target.hpp) and the printing.
#include "multi_rank_probe.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "exit_codes.hpp"
#include "one_line.hpp"
#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/units.hpp"
#include "probe_target.hpp"
#include "probes/io/results_file.hpp"
#include "probes/ranks/session.hpp"
#include "probes/trace/step_trace.hpp"
#include "record_files.hpp"

namespace headroom::cli {

using namespace headroom::probes;

// A rank's outcome carries the CLI's exit statuses under the library's names.
static_assert(rank_exit::ok == exit_fits && rank_exit::internal == exit_internal &&
              rank_exit::bad_input == exit_bad_input && rank_exit::does_not_fit == exit_does_not_fit &&
              rank_exit::no_device == exit_no_device && rank_exit::device_failed == exit_device_failed);

namespace {

// Writes `line` to stderr as "headroom: LINE", one line of at most 280 characters (one_line.hpp): every
// line the multi-rank path writes to stderr goes through here.
void say(const std::string& line) {
  std::cerr << one_line("headroom: " + line) << "\n";
}

// A test hook (tests/multi_rank_test.sh): HEADROOM_TEST_RANK_FAULT=RANK:hang|exit makes that rank hang
// (ten minutes) before it answers, or exit without answering, so the timeout path can be tested without a
// broken node.
void test_fault(int rank) {
  const char* f = std::getenv("HEADROOM_TEST_RANK_FAULT");
  if (!f) return;
  const std::string s(f);
  const auto colon = s.find(':');
  if (colon == std::string::npos || s.substr(0, colon) != std::to_string(rank)) return;
  if (s.substr(colon + 1) == "exit") std::_Exit(exit_device_failed);
  if (s.substr(colon + 1) == "hang") {
    std::this_thread::sleep_for(std::chrono::minutes(10));  // long past any test's timeout, not for ever
    std::_Exit(exit_device_failed);
  }
}

// True when --rank-timeout is a deadline the exchanges can take: (0, 86400] seconds (NaN is not).
bool rank_timeout_ok(double seconds) {
  return seconds > 0 && seconds <= 86400;
}

// Everything a multi-rank probe refuses before any rank touches a device.
void check_multi_rank_options(const probe_replay_options& o) {
  auto refuse = [](const char* what) {
    throw bad_input("ranks", std::string(what) + " applies to a single-rank probe, not under a launcher");
  };
  if (o.stage) refuse("--stage (each rank probes its own stage)");
  if (!o.trace_file.empty()) refuse("--trace");
  if (!o.timeline_out.empty()) refuse("--timeline");
  if (!rank_timeout_ok(o.rank_timeout_s))
    throw bad_input("rank-timeout", "must be between 0 and 86400 seconds");
}

// This rank's case and device, from the command line: the session's rank_host.
class cli_rank_host final : public rank_host {
 public:
  cli_rank_host(const probe_replay_options& o, const launch_info& li) : m_o(o), m_li(li) {}

  std::pair<problem, layout> form_case() override {
    plan_options po = m_o.problem;
    if (!po.gpus) po.gpus = m_li.size;
    return {problem_from(po), layout_from(po)};
  }

  // Rank 0 writes every rank's file: each target is refused now, before any rank does the work.
  void check_outputs(const layout& l) override {
    output_set pre(m_o.force, &std::cout);
    add_problem_inputs(pre, m_o.problem);  // no rank's record overwrites a file the problem was read from
    pre.expect(m_o.json_out);
    if (m_o.json_out.empty() || m_o.json_out == "-") return;
    for (int r = 0; r < l.gpus; ++r) pre.expect(rank_record_path(m_o.json_out, r, l.gpus));
  }

  void open_device(problem& p, const layout&, int rank) override {
    test_fault(rank);
    if (m_o.backend == "cuda") {
      if (auto dev = visible_device_for(std::getenv("CUDA_VISIBLE_DEVICES"), m_li.local_rank))
        setenv("CUDA_VISIBLE_DEVICES", dev->c_str(), 1);
      if (auto reason = cuda_unavailable_reason())
        throw rank_failure(exit_no_device, "no CUDA device (" + *reason + ")");
    }
    const caching_options copt = check_options(m_o);
    m_target = open_target(m_o, copt, p);
    if (!m_target) throw rank_failure(exit_no_device, "no CUDA device");
  }

  std::optional<std::string> nccl_unique_id(std::string& why) override {
    if (!m_target || !m_target->gpu) return std::nullopt;
    return m_target->gpu->nccl_unique_id(why);
  }

  std::vector<nccl_group_memory> join_nccl_groups(const std::vector<nccl_group_spec>& groups) override {
    return m_target->gpu->join_nccl_groups(groups);
  }

  stage_replay replay_stage(const problem& p, const layout& l, const step_trace& t,
                            const stage_breakdown& predicted,
                            const std::vector<nccl_group_memory>& nccl) override {
    auto [c, m] = run_on_target(*m_target, t, predicted, false);
    m.nccl_bytes = nccl_total(nccl);
    stage_replay r;
    r.record = measurement_to_json(m, case_inputs(m_o, p, l), environment_of(m_o, &*m_target));
    r.out_of_memory = m.oom_at.has_value();
    r.pattern_failed = c.replayed.verified && !c.replayed.verified->ok();
    return r;
  }

  void close_device() override { m_target.reset(); }

 private:
  const probe_replay_options& m_o;
  const launch_info& m_li;
  std::optional<probe_target> m_target;
};

std::string gib2(std::int64_t b) {
  return gib_str(b, 2);
}

// The per-rank table's row of `r`.
void print_row(std::ostream& out, const rank_summary& s, const rank_row& r) {
  std::string note;
  if (!r.answered)
    note = "did not answer";
  else if (!r.error.empty())
    note = r.error;
  else if (r.out_of_memory)
    note = "OUT OF MEMORY at " + r.oom_where;
  if (s.worst_rank && *s.worst_rank == r.rank) note = note.empty() ? "worst" : "worst; " + note;
  const bool has = r.answered && r.error.empty();
  char buf[256];
  std::snprintf(buf, sizeof buf, "%5d  %-14.14s %4d %4d %4d %4d %10s %10s %10s %10s %12s %8s  ", r.rank,
                r.hostname.empty() ? "?" : r.hostname.c_str(), r.coords.tp, r.coords.cp, r.coords.dp,
                r.coords.pp, gib2(r.predicted_step_peak).c_str(), has ? gib2(r.requested).c_str() : "-",
                has ? gib2(r.allocated).c_str() : "-", has ? gib2(r.reserved).c_str() : "-",
                r.device_used ? gib2(*r.device_used).c_str() : "-",
                r.nccl_bytes ? gib2(*r.nccl_bytes).c_str() : "-");
  out << buf << note << "\n";
}

void print_table(std::ostream& out, const rank_summary& s, const problem& p, const layout& l,
                 const launch_info& li, const std::string& backend) {
  out << "headroom probe: " << printable(p.model.name) << ", " << trace_layout_text(l) << ", " << s.rows.size()
      << (s.rows.size() == 1 ? " rank" : " ranks") << " under " << li.launcher << ", " << backend
      << " backend\n";
  out << "predicted: the planner's step peak of the rank's stage; "
      << (backend == "sim" ? "replayed on the sim backend (emulated, not measured)" : "measured on the GPUs")
      << "; GiB per rank\n\n";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%5s  %-14s %4s %4s %4s %4s %10s %10s %10s %10s %12s %8s  %s\n", "rank",
                "host", "tp", "cp", "dp", "pp", "predicted", "requested", "allocated", "reserved",
                "device used", "NCCL", "");
  out << buf;
  for (const auto& r : s.rows) print_row(out, s, r);
  out << "\n";
  if (s.worst_rank) {
    const auto& w = s.rows[static_cast<std::size_t>(*s.worst_rank)];
    out << "worst rank: " << w.rank << " (stage " << w.stage << "), "
        << (w.device_used ? "device used " + gib2(*w.device_used) : "peak reserved " + gib2(w.reserved))
        << " GiB; the planner's worst stage: " << s.planner_worst_stage << " (step peak "
        << gib2(s.planner_worst_step_peak) << " GiB): "
        << (s.worst_agrees ? "agree" : "DISAGREE (the measured worst rank is not on a predicted worst stage)")
        << "\n";
  }
  auto list = [](const std::vector<int>& v) {
    std::string t;
    for (int r : v) t += (t.empty() ? "" : ", ") + std::to_string(r);
    return t;
  };
  if (!s.out_of_memory.empty()) out << "out of memory on rank(s) " << list(s.out_of_memory) << "\n";
  if (!s.failed.empty()) out << "failed on rank(s) " << list(s.failed) << "\n";
  if (!s.missing.empty()) out << "no answer from rank(s) " << list(s.missing) << " within --rank-timeout\n";
}

// The stdout line that names what rank 0 wrote: the summary, and the rank records that exist (a rank
// without a record has no file).
void print_written(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& files,
                   int world_size) {
  out << "summary written to " << files.front().first;
  const std::size_t records = files.size() - 1;
  if (records == 0)
    out << "; no rank has a record to write\n";
  else if (records == 1)
    out << ", the one rank record to " << files[1].first << "\n";
  else
    out << ", rank records to " << files[1].first << " ... " << files.back().first << " (" << records
        << " of " << world_size << " ranks)\n";
}

// Returns the stderr line for a run whose ranks failed (`status` not 0 or 3): the first failed rank's line,
// with how many failed.
std::string failed_ranks_line(const rank_summary& s, int status) {
  std::size_t failed = 0;
  const rank_row* first = nullptr;
  for (const auto& row : s.rows)
    if (row.answered && row.exit_status != rank_exit::ok && row.exit_status != rank_exit::does_not_fit) {
      ++failed;
      if (!first || (first->exit_status != status && row.exit_status == status)) first = &row;
    }
  if (!first) return "the ranks failed (exit status " + std::to_string(status) + ")";
  return "rank " + std::to_string(first->rank) +
         (failed > 1 ? " (one of " + std::to_string(failed) + " failed ranks)" : "") + ": " +
         (first->error.empty() ? "failed (exit status " + std::to_string(first->exit_status) + ")"
                               : first->error);
}

// Rank 0's report of a summarised session: every file committed together (or none), then the table and
// at most one stderr line. Returns the exit status.
int report(const probe_replay_options& o, const launch_info& li, const session_result& r) {
  const rank_summary& s = r.summary;
  int status = s.exit_status();
  std::optional<std::string> failure;  // an output that could not be written: the line and status
  try {
    const nlohmann::json inputs = case_inputs(o, r.p, r.l);
    const nlohmann::json env = environment_json(environment_of(o, nullptr));
    const auto files = session_files(r, li, o.json_out, inputs, env);
    output_set outs(o.force, &std::cout);
    add_problem_inputs(outs, o.problem);
    for (const auto& [path, text] : files) outs.add(path, text);
    outs.commit();
    if (!outs.to_stdout()) {
      print_table(std::cout, s, r.p, r.l, li, o.backend);
      if (!files.empty()) print_written(std::cout, files, li.size);
    }
  } catch (const bad_input& e) {
    failure = std::string("bad input: ") + e.what();
    status = exit_bad_input;
  } catch (const output_error& e) {
    failure = std::string("cannot write output: ") + e.what();
    status = exit_output_failed;
  }
  std::cout.flush();
  if (failure)
    say(*failure);
  else if (!s.missing.empty())
    say(std::to_string(s.missing.size()) + " rank(s) did not answer within " + fixed(o.rank_timeout_s, 1) +
        " s; ending the run");
  else if (status != exit_fits && status != exit_does_not_fit)
    say(failed_ranks_line(s, status));
  if (!s.missing.empty()) {
    // The ranks that never answered may be hung: end them all, with a status that says so. Leaving without
    // MPI_Finalize (no destructors) and with a non-zero status makes the launcher end every other rank
    // (mpirun and srun both do). MPI_Abort would too, but OpenMPI 4.1's mpirun was seen to hang or crash
    // tearing the job down while a rank sat in a sleep on a loaded 2-core machine; the exit never did.
    std::fflush(nullptr);
    std::_Exit(failure ? status : exit_device_failed);
  }
  return status;
}

}  // namespace

int run_multi_rank_probe(const probe_replay_options& o, const launch_info& li) {
  std::string why;
  std::unique_ptr<rank_transport> tr = open_rank_transport(li, why);
  if (!tr) {
    // No world to join, so no rank 0 that could speak for this process: every process says why itself.
    say("bad input: ranks: " + why);
    return exit_bad_input;
  }
  // The world reached must be the one the launcher's variables claim (a process given OMPI_COMM_WORLD_SIZE=2
  // by hand, without mpirun, is MPI's world of one), and the options must be a multi-rank probe's. The ranks
  // agree on it first, so that exactly one process says why and none starts the work.
  // (A --rank-timeout the check refuses cannot time this exchange: the default's 300 s do.)
  const double agree_s = rank_timeout_ok(o.rank_timeout_s) ? o.rank_timeout_s : 300;
  const world_verdict v = agree_on_world(
      *tr, li, [&] { check_multi_rank_options(o); },
      std::chrono::milliseconds(static_cast<std::int64_t>(agree_s * 1000)));
  if (!v.ok) {
    // As after the session, one rank answers for all: it exits 2, the others 0, since a non-zero exit could
    // make the launcher end it before it spoke.
    if (!v.speak) return exit_fits;
    say(v.line);
    return exit_bad_input;
  }
  session_options so;
  so.nccl = o.backend == "cuda";
  so.dp_bucket_bytes = static_cast<std::int64_t>(o.bucket_mb * mib);
  so.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.rank_timeout_s * 1000));
  cli_rank_host host(o, li);
  const session_result r = run_rank_session(*tr, li, so, host);
  switch (r.how) {
    case session_result::ending::done:
      // Rank 0 speaks for every rank. A rank whose outcome reached it exits 0 whatever that outcome was: a
      // non-zero exit makes mpirun and srun end the job at once, which could cut rank 0 off mid-report.
      return exit_fits;
    case session_result::ending::
        gather_timed_out:                  // "rank N: ..." (this rank's outcome never reached rank 0)
    case session_result::ending::no_case:  // rank 0 could not form the case: its line answers for all
      say(r.line);
      return r.exit_status;
    case session_result::ending::summarised:
      break;
  }
  return report(o, li, r);
}

}  // namespace headroom::cli
