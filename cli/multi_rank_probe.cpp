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
#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/units.hpp"
#include "probe_target.hpp"
#include "probes/io/results_file.hpp"
#include "probes/ranks/session.hpp"
#include "probes/trace/step_trace.hpp"

namespace headroom::cli {

using namespace headroom::probes;

// A rank's outcome carries the CLI's exit statuses under the library's names.
static_assert(rank_exit::ok == exit_fits && rank_exit::bad_input == exit_bad_input &&
              rank_exit::does_not_fit == exit_does_not_fit && rank_exit::no_device == exit_no_device &&
              rank_exit::device_failed == exit_device_failed);

namespace {

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

// Everything a multi-rank probe refuses before any rank touches a device.
void check_multi_rank_options(const probe_replay_options& o) {
  auto refuse = [](const char* what) {
    throw bad_input("ranks", std::string(what) + " applies to a single-rank probe, not under a launcher");
  };
  if (o.stage) refuse("--stage (each rank probes its own stage)");
  if (!o.trace_file.empty()) refuse("--trace");
  if (!o.timeline_out.empty()) refuse("--timeline");
  if (!(o.rank_timeout_s > 0) || o.rank_timeout_s > 86400)
    throw bad_input("rank-timeout", "must be between 0 and 86400 seconds");
}

// This rank's case and device, from the command line: the session's rank_host.
class cli_rank_host final : public rank_host {
 public:
  cli_rank_host(const probe_replay_options& o, const launch_info& li) : m_o(o), m_li(li) {}

  std::pair<problem, layout> form_case() override {
    check_multi_rank_options(m_o);
    plan_options po = m_o.problem;
    if (!po.gpus) po.gpus = m_li.size;
    return {problem_from(po), layout_from(po)};
  }

  void open_device(problem& p, const layout& l, int rank) override {
    if (rank == 0) {
      // Rank 0 writes every file: refuse a target now, before any rank does the work.
      output_set pre(m_o.force, &std::cout);
      pre.expect(m_o.json_out);
      if (m_o.json_out != "-")
        for (int r = 0; r < l.gpus && !m_o.json_out.empty(); ++r)
          pre.expect(rank_record_path(m_o.json_out, r, l.gpus));
    }
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

std::string gib(std::int64_t b) {
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
                r.coords.pp, gib(r.predicted_step_peak).c_str(), has ? gib(r.requested).c_str() : "-",
                has ? gib(r.allocated).c_str() : "-", has ? gib(r.reserved).c_str() : "-",
                r.device_used ? gib(*r.device_used).c_str() : "-",
                r.nccl_bytes ? gib(*r.nccl_bytes).c_str() : "-");
  out << buf << note << "\n";
}

void print_table(std::ostream& out, const rank_summary& s, const problem& p, const layout& l,
                 const launch_info& li, const std::string& backend) {
  out << "headroom probe: " << p.model.name << ", " << trace_layout_text(l) << ", " << s.rows.size()
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
        << (w.device_used ? "device used " + gib(*w.device_used) : "peak reserved " + gib(w.reserved))
        << " GiB; the planner's worst stage: " << s.planner_worst_stage << " (step peak "
        << gib(s.planner_worst_step_peak) << " GiB): "
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

// Rank 0's report of a summarised session: the files, then the table. Returns the exit status.
int report(const probe_replay_options& o, const launch_info& li, const session_result& r) {
  const rank_summary& s = r.summary;
  const nlohmann::json inputs = case_inputs(o, r.p, r.l);
  const nlohmann::json env = environment_json(environment_of(o, nullptr));
  int status = s.exit_status();
  try {
    output_set outs(o.force, &std::cout);
    for (const auto& [path, text] : session_files(r, li, o.json_out, inputs, env)) outs.add(path, text);
    outs.commit();
    if (!outs.to_stdout()) {
      print_table(std::cout, s, r.p, r.l, li, o.backend);
      if (!o.json_out.empty())
        std::cout << "summary written to " << o.json_out << ", rank records to "
                  << rank_record_path(o.json_out, 0, li.size) << " ...\n";
    }
  } catch (const bad_input& e) {
    std::cerr << "headroom: bad input: " << e.what() << "\n";
    status = exit_bad_input;
  } catch (const output_error& e) {
    std::cerr << "headroom: cannot write output: " << e.what() << "\n";
    status = exit_output_failed;
  }
  std::cout.flush();
  if (!s.missing.empty()) {
    // The ranks that never answered may be hung: end them all, with the status that says so.
    std::cerr << "headroom: " << s.missing.size() << " rank(s) did not answer within " << o.rank_timeout_s
              << " s; ending the run\n";
    // Leaving without MPI_Finalize (no destructors) and with a non-zero status makes the launcher end every
    // other rank (mpirun and srun both do). MPI_Abort would too, but OpenMPI 4.1's mpirun was seen to hang or
    // crash tearing the job down while a rank sat in a sleep on a loaded 2-core machine; the exit never did.
    std::fflush(nullptr);
    std::_Exit(exit_device_failed);
  }
  return status;
}

}  // namespace

int run_multi_rank_probe(const probe_replay_options& o, const launch_info& li) {
  std::string why;
  std::unique_ptr<rank_transport> tr = open_rank_transport(li, why);
  if (!tr) {
    if (li.rank == 0) std::cerr << "headroom: bad input: ranks: " << why << "\n";
    return exit_bad_input;
  }
  session_options so;
  so.nccl = o.backend == "cuda";
  so.dp_bucket_bytes = static_cast<std::int64_t>(o.bucket_mb * mib);
  so.timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(std::min(o.rank_timeout_s, 86400.0) * 1000));
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
      std::cerr << "headroom: " << r.line << "\n";
      return r.exit_status;
    case session_result::ending::summarised:
      break;
  }
  return report(o, li, r);
}

}  // namespace headroom::cli
