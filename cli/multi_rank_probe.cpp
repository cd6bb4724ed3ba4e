// multi_rank_probe.cpp: one rank of a multi-rank probe, and rank 0's table and files (see
// multi_rank_probe.hpp). MPI bootstraps only (rank_transport.hpp); the replay, the record and the summary are
// the library's (probes/probe_case, probes/measurement, probes/multi_rank).
#include "multi_rank_probe.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <thread>

#include "exit_codes.hpp"
#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/rank_grid.hpp"
#include "probe_target.hpp"
#include "probes/multi_rank.hpp"
#include "probes/rank_transport.hpp"
#include "probes/results_file.hpp"
#include "probes/step_trace.hpp"

namespace headroom::cli {

using namespace headroom::probes;

namespace {

constexpr grid_axis nccl_axes[] = {grid_axis::tp, grid_axis::cp, grid_axis::dp, grid_axis::pp};
constexpr std::size_t id_bytes = 128;  // NCCL_UNIQUE_ID_BYTES

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
void check_multi_rank_options(const probe_options& o) {
  auto refuse = [](const char* what) {
    throw bad_input("ranks", std::string(what) + " applies to a single-rank probe, not under a launcher");
  };
  if (o.stage) refuse("--stage (each rank probes its own stage)");
  if (!o.trace_file.empty()) refuse("--trace");
  if (!o.max_fit.empty()) refuse("--max-fit");
  if (o.overheads) refuse("--overheads");
  if (!o.snapshot_file.empty()) refuse("--snapshot");
  if (!o.timeline_out.empty()) refuse("--timeline");
  if (!(o.rank_timeout_s > 0) || o.rank_timeout_s > 86400)
    throw bad_input("rank-timeout", "must be between 0 and 86400 seconds");
}

// The payload of each group's first collective, bytes: the tensor-parallel all-reduce of one layer's output
// (s/cp x b x h in bf16), the context-parallel exchange and pipeline send of the same activation per tp rank,
// the data-parallel gradient bucket.
std::int64_t first_collective_bytes(const probe_options& o, const problem& p, const layout& l, grid_axis a) {
  const std::int64_t act = p.training.seq / l.cp * p.training.micro_batch * p.model.hidden * 2;
  switch (a) {
    case grid_axis::tp:
      return act;
    case grid_axis::cp:
    case grid_axis::pp:
      return act / l.tp;
    case grid_axis::dp:
      return static_cast<std::int64_t>(o.bucket_mb * (1 << 20));
  }
  return act;
}

// True when this rank joins its group along `a`: every group of two ranks or more; in a world of one rank its
// data-parallel group of one, so that a single-GPU run still exercises NCCL and reports a communicator's
// cost.
bool joins(grid_axis a, std::size_t group_size, int world) {
  return group_size >= 2 || (world == 1 && a == grid_axis::dp);
}

std::string gib(std::int64_t b) {
  return gib_str(b, 2);
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
  for (const auto& r : s.rows) {
    std::string note;
    if (!r.answered)
      note = "did not answer";
    else if (!r.error.empty())
      note = r.error;
    else if (r.out_of_memory)
      note = "OUT OF MEMORY at " + r.oom_where;
    if (s.worst_rank && *s.worst_rank == r.rank) note = note.empty() ? "worst" : "worst; " + note;
    const bool has = r.answered && r.error.empty();
    std::snprintf(buf, sizeof buf, "%5d  %-14.14s %4d %4d %4d %4d %10s %10s %10s %10s %12s %8s  ", r.rank,
                  r.hostname.empty() ? "?" : r.hostname.c_str(), r.coords.tp, r.coords.cp, r.coords.dp,
                  r.coords.pp, gib(r.predicted_step_peak).c_str(), has ? gib(r.requested).c_str() : "-",
                  has ? gib(r.allocated).c_str() : "-", has ? gib(r.reserved).c_str() : "-",
                  r.device_used ? gib(*r.device_used).c_str() : "-",
                  r.nccl_bytes ? gib(*r.nccl_bytes).c_str() : "-");
    out << buf << note << "\n";
  }
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

}  // namespace

int run_multi_rank_probe(const probe_options& o, const launch_info& li) {
  std::string why;
  std::unique_ptr<rank_transport> tr = li.size == 1 ? open_solo_transport() : open_mpi_transport(li, why);
  if (!tr) {
    if (li.rank == 0) std::cerr << "headroom: bad input: ranks: " << why << "\n";
    return exit_bad_input;
  }
  const auto timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(std::min(o.rank_timeout_s, 86400.0) * 1000));
  rank_outcome mine;
  mine.rank = li.rank;
  mine.hostname = li.hostname;
  auto fail = [&](int status, const std::string& line) {
    mine.exit_status = status;
    mine.error = line.substr(0, 240);
    mine.record.reset();
  };

  // Phase 1: the case and this rank's device. A failure is recorded and reported by rank 0.
  problem p;
  layout l;
  std::optional<breakdown> b;
  std::optional<probe_target> target;
  rank_coords coords;
  try {
    check_multi_rank_options(o);
    plan_options po = o.problem;
    if (!po.gpus) po.gpus = li.size;
    p = problem_from(po);
    l = layout_from(po);
    if (l.gpus != li.size)
      throw bad_input("ranks", "the layout has " + std::to_string(l.gpus) + " GPUs, the launcher started " +
                                   std::to_string(li.size) + " ranks");
    validate(p, l);
    b = estimate(p, l);
    l = b->where;
    coords = coords_of(l, li.rank);
    mine.stage = coords.pp;
    if (li.rank == 0) {
      // Rank 0 writes every file: refuse a target now, before any rank does the work.
      output_set pre(o.force, &std::cout);
      pre.expect(o.json_out);
      if (o.json_out != "-")
        for (int r = 0; r < li.size && !o.json_out.empty(); ++r)
          pre.expect(rank_record_path(o.json_out, r, li.size));
    }
    test_fault(li.rank);
    if (o.backend == "cuda") {
      if (auto dev = visible_device_for(std::getenv("CUDA_VISIBLE_DEVICES"), li.local_rank))
        setenv("CUDA_VISIBLE_DEVICES", dev->c_str(), 1);
      if (auto reason = cuda_unavailable_reason()) {
        fail(exit_no_device, "no CUDA device (" + *reason + ")");
      }
    }
    if (mine.error.empty()) {
      const caching_options copt = check_options(o);
      target = open_target(o, copt, p);
      if (!target) fail(exit_no_device, "no CUDA device");
    }
  } catch (const bad_input& e) {
    fail(exit_bad_input, std::string("bad input: ") + e.what());
  } catch (const device_error& e) {
    fail(exit_device_failed, std::string("device error: ") + e.what());
  }

  // Phase 2 (GPU): NCCL communicators of the layout's groups. Every rank takes part in the id exchange,
  // ready or not, so a rank that failed above cannot leave the others waiting in ncclCommInitRank.
  std::vector<nccl_group_memory> nccl;
  std::string nccl_note = "the sim backend has no NCCL (not modelled)";
  if (o.backend == "cuda") {
    std::string msg(1 + id_bytes * std::size(nccl_axes), '\0');
    bool ready = mine.error.empty() && target && target->gpu;
    std::string nccl_why;
    if (ready) {
      for (std::size_t i = 0; i < std::size(nccl_axes); ++i) {
        const auto group = group_of(l, li.rank, nccl_axes[i]);
        if (!joins(nccl_axes[i], group.size(), li.size) || group[0] != li.rank) continue;
        const auto id = target->gpu->nccl_unique_id(nccl_why);
        if (!id) {
          ready = false;
          break;
        }
        msg.replace(1 + i * id_bytes, id_bytes, *id);
      }
    }
    msg[0] = ready ? 1 : 0;
    try {
      const auto all = tr->all_gather(msg, timeout);
      std::string not_ready;
      for (int r = 0; r < li.size; ++r)
        if (all[static_cast<std::size_t>(r)][0] == 0)
          not_ready += (not_ready.empty() ? "" : ", ") + std::to_string(r);
      if (!not_ready.empty()) {
        nccl_note = "not joined: rank(s) " + not_ready + " could not (" +
                    (nccl_why.empty() ? "see their rows" : nccl_why) + ")";
      } else {
        std::vector<nccl_group_spec> specs;
        for (std::size_t i = 0; i < std::size(nccl_axes); ++i) {
          const auto group = group_of(l, li.rank, nccl_axes[i]);
          if (!joins(nccl_axes[i], group.size(), li.size)) continue;
          nccl_group_spec g;
          g.name = to_string(nccl_axes[i]);
          g.size = static_cast<int>(group.size());
          g.rank_in_group = coords.along(nccl_axes[i]);
          g.unique_id = all[static_cast<std::size_t>(group[0])].substr(1 + i * id_bytes, id_bytes);
          g.first_bytes = first_collective_bytes(o, p, l, nccl_axes[i]);
          g.point_to_point = nccl_axes[i] == grid_axis::pp;
          specs.push_back(g);
        }
        nccl = target->gpu->join_nccl_groups(specs);
        nccl_note = specs.empty() ? "no group larger than one rank"
                                  : "device-used deltas of ncclCommInitRank and of the first collective";
      }
    } catch (const rank_timeout& e) {
      fail(exit_device_failed, std::string("NCCL id exchange: ") + e.what());
    } catch (const device_error& e) {
      fail(exit_device_failed, std::string("device error: ") + e.what());
    }
  }

  // Phase 3: this rank's stage, replayed on its device.
  if (mine.error.empty()) {
    try {
      const step_trace t = build_trace(p, l, coords.pp);
      const stage_breakdown& predicted = b->stages[static_cast<std::size_t>(coords.pp)];
      auto [c, m] = run_on_target(*target, t, predicted, false);
      m.nccl_bytes = nccl_total(nccl);
      nlohmann::json rec = measurement_to_json(m, case_inputs(o, p, l), environment_of(o, &*target));
      rec["rank"] = rank_block(li, l, coords, nccl, nccl_note);
      mine.record = rec;
      if (m.oom_at) mine.exit_status = exit_does_not_fit;
      if (c.replayed.verified && !c.replayed.verified->ok())
        fail(exit_device_failed, "device error: blocks did not hold their pattern");
    } catch (const bad_input& e) {
      fail(exit_bad_input, std::string("bad input: ") + e.what());
    } catch (const device_error& e) {
      fail(exit_device_failed, std::string("device error: ") + e.what());
    }
  }
  target.reset();  // NCCL communicators and the context go before the gather's wait

  // Phase 4: rank 0 gathers; the others are done.
  std::vector<std::optional<std::string>> messages;
  try {
    messages = tr->gather(to_message(mine), timeout);
  } catch (const rank_timeout& e) {
    std::cerr << "headroom: rank " << li.rank << ": " << e.what() << "\n";
    return exit_device_failed;
  }
  // Rank 0 speaks for every rank. A rank whose outcome reached it exits 0 whatever that outcome was: a
  // non-zero exit makes mpirun and srun end the job at once, which could cut rank 0 off mid-report.
  if (li.rank != 0) return exit_fits;

  if (!b) {
    // Rank 0 could not even form the case: every rank saw the same input, so its line is the answer.
    std::cerr << "headroom: " << mine.error << "\n";
    return mine.exit_status ? mine.exit_status : exit_bad_input;
  }
  const rank_summary s = summarise_ranks(messages, *b);
  const probe_target* t0 = nullptr;
  const nlohmann::json inputs = case_inputs(o, p, l);
  nlohmann::json env = environment_json(environment_of(o, t0));
  if (mine.record && mine.record->contains("environment")) env = (*mine.record)["environment"];
  int status = s.exit_status();
  try {
    output_set outs(o.force, &std::cout);
    if (!o.json_out.empty()) {
      outs.add(o.json_out, summary_to_json(s, li, inputs, env).dump(2) + "\n");
      if (o.json_out != "-")
        for (int r = 0; r < li.size; ++r) {
          const auto& msg = messages[static_cast<std::size_t>(r)];
          if (!msg) continue;
          const rank_outcome ro = outcome_from_message(*msg, "rank " + std::to_string(r));
          if (ro.record) outs.add(rank_record_path(o.json_out, r, li.size), ro.record->dump(2) + "\n");
        }
    }
    outs.commit();
    if (!outs.to_stdout()) {
      print_table(std::cout, s, p, l, li, o.backend);
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

}  // namespace headroom::cli
