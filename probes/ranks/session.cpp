// session.cpp: one rank's part of a multi-rank probe and rank 0's summary (see session.hpp).
#include "probes/ranks/session.hpp"

#include "planner/errors.hpp"
#include "planner/rank_grid.hpp"
#include "probes/devices/device.hpp"
#include "probes/ranks/nccl_groups.hpp"

namespace headroom::probes {

namespace {

// Returns `j` as a file's text: indented, one final newline, bytes that are not UTF-8 (a path's, a host
// name's) replaced by U+FFFD instead of failing the dump after every rank has done its work.
std::string dump_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// One rank's session, phase by phase. A failure in a phase is recorded as this rank's outcome (fail) and
// the later phases that need what failed are skipped; the exchanges between the ranks never are.
class session {
 public:
  session(rank_transport& tr, const launch_info& li, const session_options& o, rank_host& host)
      : m_tr(tr), m_li(li), m_o(o), m_host(host) {
    m_mine.rank = li.rank;
    m_mine.hostname = li.hostname;
  }

  session_result run() {
    form_case();
    if (agree_to_start()) {
      open_device();
      if (m_o.nccl) join_groups();
      replay();
    }
    m_host.close_device();  // NCCL communicators and the context go before the gather's wait
    return gather();
  }

 private:
  void fail(int status, const std::string& line) {
    m_mine.exit_status = status;
    m_mine.error = line.substr(0, 240);
    m_mine.record.reset();
  }

  // Runs `step`, recording its failure as this rank's outcome; returns whether it succeeded.
  template <class F>
  bool attempt(F&& step) {
    try {
      step();
      return true;
    } catch (const bad_input& e) {
      fail(rank_exit::bad_input, std::string("bad input: ") + e.what());
    } catch (const device_error& e) {
      fail(rank_exit::device_failed, std::string("device error: ") + e.what());
    } catch (const rank_failure& e) {
      fail(e.exit_status, e.what());
    } catch (const nlohmann::json::exception& e) {
      fail(rank_exit::bad_input, std::string("bad input: unreadable JSON value (") + e.what() + ")");
    } catch (const std::bad_alloc&) {
      fail(rank_exit::bad_input,
           "bad input: out of host memory (the input asks for more than this machine has)");
    } catch (const std::exception& e) {
      // Anything else is a bug, but still this rank's outcome: leaving the session here would leave the
      // other ranks waiting for it until the deadline.
      fail(rank_exit::internal, std::string("internal error: ") + e.what());
    }
    return false;
  }

  // Phase 1: the case (the same on every rank) and this rank's place in it; rank 0 also checks its outputs.
  void form_case() {
    m_case_formed = attempt([&] {
      auto [p, l] = m_host.form_case();
      m_p = std::move(p);
      m_l = l;
      if (m_l.gpus != m_li.size)
        throw bad_input("ranks", "the layout has " + std::to_string(m_l.gpus) +
                                     " GPUs, the launcher started " + std::to_string(m_li.size) +
                                     (m_li.size == 1 ? " rank" : " ranks"));
      validate(m_p, m_l);
      m_b = estimate(m_p, m_l);
      m_l = m_b->where;
      m_coords = coords_of(m_l, m_li.rank);
      m_mine.stage = m_coords.pp;
      if (m_li.rank == 0) m_host.check_outputs(m_l);
    });
  }

  // Phase 2: the start exchange. Returns whether the ranks go on to the work: not when rank 0 refused the
  // case or its outputs (every rank learns it from the same exchange, so all skip the NCCL exchange alike,
  // and rank 0's line answers for them). When the exchange times out (a rank died or hangs before it),
  // each rank goes on with what it knows, as before any exchange: the gather names the missing rank.
  bool agree_to_start() {
    try {
      const auto all = m_tr.all_gather(std::string(1, m_case_formed ? '\1' : '\0'), m_o.timeout);
      if (!all.empty() && all[0] == std::string(1, '\1')) return true;
      if (m_li.rank != 0 && m_mine.error.empty())
        fail(rank_exit::bad_input, "not run: rank 0 refused the case (its line says why)");
      return false;
    } catch (const rank_timeout&) {
      return true;
    }
  }

  // Phase 3: this rank's device.
  void open_device() {
    if (!m_mine.error.empty()) return;
    m_device_open = attempt([&] { m_host.open_device(m_p, m_l, m_li.rank); });
  }

  // Phase 4 (NCCL): communicators of the layout's groups. Every rank takes part in the id exchange, ready or
  // not, so a rank that failed above cannot leave the others waiting in ncclCommInitRank.
  void join_groups() {
    std::string why;
    const bool ready = m_mine.error.empty() && m_device_open;
    const std::string msg = nccl_id_message(
        m_l, m_li.rank, ready, [&](std::string& w) { return m_host.nccl_unique_id(w); }, why);
    try {
      const auto all = m_tr.all_gather(msg, m_o.timeout);
      const auto not_ready = unready_ranks(all);
      if (!not_ready.empty()) {
        std::string list;
        for (int r : not_ready) list += (list.empty() ? "" : ", ") + std::to_string(r);
        m_nccl_note =
            "not joined: rank(s) " + list + " could not (" + (why.empty() ? "see their rows" : why) + ")";
        return;
      }
      attempt([&] {
        const auto specs = nccl_group_specs(m_p, m_l, m_li.rank, all, m_o.dp_bucket_bytes);
        m_nccl = m_host.join_nccl_groups(specs);
        m_nccl_note = specs.empty() ? "no group larger than one rank"
                                    : "device-used deltas of ncclCommInitRank and of the first collective";
      });
    } catch (const rank_timeout& e) {
      fail(rank_exit::device_failed, std::string("NCCL id exchange: ") + e.what());
    }
  }

  // Phase 5: this rank's stage, replayed on its device.
  void replay() {
    if (!m_mine.error.empty()) return;
    attempt([&] {
      const step_trace t = build_trace(m_p, m_l, m_coords.pp);
      const stage_breakdown& predicted = m_b->stages[static_cast<std::size_t>(m_coords.pp)];
      stage_replay r = m_host.replay_stage(m_p, m_l, t, predicted, m_nccl);
      r.record["rank"] = rank_block(m_li, m_l, m_coords, m_nccl, m_nccl_note);
      m_mine.record = std::move(r.record);
      if (r.out_of_memory) m_mine.exit_status = rank_exit::does_not_fit;
      if (r.pattern_failed) fail(rank_exit::device_failed, "device error: blocks did not hold their pattern");
    });
  }

  // Phase 6: rank 0 gathers every rank's outcome; the others are done once it has theirs.
  session_result gather() {
    session_result res;
    try {
      res.messages = m_tr.gather(to_message(m_mine), m_o.timeout);
    } catch (const rank_timeout& e) {
      res.how = session_result::ending::gather_timed_out;
      res.exit_status = rank_exit::device_failed;
      res.line = "rank " + std::to_string(m_li.rank) + ": " + e.what();
      return res;
    }
    if (m_li.rank != 0) return res;  // done, exit 0 (rank 0 reports this rank's outcome)
    if (!m_case_formed) {
      // Rank 0 could not even form the case (or refused its outputs): every rank saw the same input, so its
      // line is the answer.
      res.how = session_result::ending::no_case;
      res.exit_status = m_mine.exit_status ? m_mine.exit_status : rank_exit::bad_input;
      res.line = m_mine.error;
      return res;
    }
    res.how = session_result::ending::summarised;
    res.summary = summarise_ranks(res.messages, *m_b);
    res.exit_status = res.summary.exit_status();
    res.p = m_p;
    res.l = m_l;
    res.own_record = m_mine.record;
    return res;
  }

  rank_transport& m_tr;
  const launch_info& m_li;
  const session_options& m_o;
  rank_host& m_host;
  rank_outcome m_mine;
  problem m_p;
  layout m_l;
  std::optional<breakdown> m_b;
  rank_coords m_coords;
  bool m_case_formed = false;
  bool m_device_open = false;
  std::vector<nccl_group_memory> m_nccl;
  std::string m_nccl_note = "the sim backend has no NCCL (not modelled)";
};

}  // namespace

std::unique_ptr<rank_transport> open_rank_transport(const launch_info& li, std::string& why) {
  return li.size == 1 ? open_solo_transport() : open_mpi_transport(li, why);
}

world_verdict agree_on_world(rank_transport& tr, const launch_info& li, const std::function<void()>& check,
                             std::chrono::milliseconds timeout) {
  world_verdict v;
  try {
    check_world(li, tr.rank(), tr.size());
    check();
  } catch (const bad_input& e) {
    v.line = std::string("bad input: ") + e.what();
  }
  try {
    const auto all = tr.all_gather(std::string(1, v.line.empty() ? '\1' : '\0'), timeout);
    for (std::size_t r = 0; r < all.size(); ++r)
      if (all[r] != std::string(1, '\1')) {
        v.ok = false;
        v.speak = static_cast<int>(r) == tr.rank();
        break;
      }
  } catch (const rank_timeout&) {
    v.ok = v.line.empty();
    v.speak = !v.ok;
  }
  return v;
}

session_result run_rank_session(rank_transport& tr, const launch_info& li, const session_options& o,
                                rank_host& host) {
  check_world(li, tr.rank(), tr.size());
  return session(tr, li, o, host).run();
}

std::vector<std::pair<std::string, std::string>> session_files(const session_result& r, const launch_info& li,
                                                               const std::string& json_out,
                                                               const nlohmann::json& inputs,
                                                               const nlohmann::json& fallback_environment) {
  std::vector<std::pair<std::string, std::string>> files;
  if (json_out.empty()) return files;
  nlohmann::json env = fallback_environment;
  if (r.own_record && r.own_record->contains("environment")) env = (*r.own_record)["environment"];
  files.emplace_back(json_out, dump_text(summary_to_json(r.summary, li, inputs, env)));
  if (json_out == "-") return files;
  for (int rank = 0; rank < static_cast<int>(r.messages.size()); ++rank) {
    const auto& msg = r.messages[static_cast<std::size_t>(rank)];
    if (!msg) continue;
    rank_outcome ro;
    try {
      ro = outcome_from_message(*msg, "rank " + std::to_string(rank));
    } catch (const bad_input&) {
      continue;  // a garbled message: the summary lists the rank as failed (summarise_ranks), no record
    }
    if (ro.record) files.emplace_back(rank_record_path(json_out, rank, li.size), dump_text(*ro.record));
  }
  return files;
}

}  // namespace headroom::probes
