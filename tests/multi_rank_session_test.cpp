// multi_rank_session_test.cpp: a multi-rank probe's session (probes/ranks/session.hpp) with its ranks as
// threads of this process over an in-process transport, and a fake device per rank: the NCCL-id exchange
// and the groups each rank joins (ids from each group's first rank, first collectives sized by the planner
// in the recipe's activation precision), a rank that fails (every rank still finishes, NCCL joined by none),
// a rank that never answers (named after the deadline), a case rank 0 cannot form, and rank 0's files.
#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "planner/cost_model.hpp"
#include "planner/errors.hpp"
#include "planner/rank_grid.hpp"
#include "probes/ranks/nccl_groups.hpp"
#include "probes/ranks/session.hpp"
#include "probes/records/schema.hpp"
#include "test_support.hpp"

namespace headroom::probes {
namespace {

using namespace std::chrono_literals;

// The ranks of one world as threads: an all-gather waits for every rank's message of its round, a gather
// gives rank 0 what has arrived by the deadline.
class thread_world {
 public:
  explicit thread_world(int size)
      : m_size(size), m_rounds(static_cast<std::size_t>(size), 0), m_gathered(m_size) {}

  class transport final : public rank_transport {
   public:
    transport(thread_world& w, int rank) : m_w(w), m_rank(rank) {}
    int rank() const override { return m_rank; }
    int size() const override { return m_w.m_size; }
    std::vector<std::string> all_gather(const std::string& mine, std::chrono::milliseconds timeout) override {
      return m_w.all_gather(m_rank, mine, timeout);
    }
    std::vector<std::optional<std::string>> gather(const std::string& mine,
                                                   std::chrono::milliseconds timeout) override {
      return m_w.gather(m_rank, mine, timeout);
    }

   private:
    thread_world& m_w;
    int m_rank;
  };

 private:
  std::vector<std::string> all_gather(int rank, const std::string& mine, std::chrono::milliseconds timeout) {
    std::unique_lock lock(m_mutex);
    const std::size_t round = static_cast<std::size_t>(m_rounds[static_cast<std::size_t>(rank)]++);
    if (m_all.size() <= round)
      m_all.resize(round + 1, std::vector<std::optional<std::string>>(m_gathered.size()));
    m_all[round][static_cast<std::size_t>(rank)] = mine;
    m_cv.notify_all();
    auto full = [&] {
      for (const auto& m : m_all[round])
        if (!m) return false;
      return true;
    };
    if (!m_cv.wait_for(lock, timeout, full)) throw rank_timeout("not every rank reached the all-gather", {});
    std::vector<std::string> out;
    for (const auto& m : m_all[round]) out.push_back(*m);
    return out;
  }

  std::vector<std::optional<std::string>> gather(int rank, const std::string& mine,
                                                 std::chrono::milliseconds timeout) {
    std::unique_lock lock(m_mutex);
    m_gathered[static_cast<std::size_t>(rank)] = mine;
    m_cv.notify_all();
    if (rank != 0) return {};
    m_cv.wait_for(lock, timeout, [&] {
      for (const auto& m : m_gathered)
        if (!m) return false;
      return true;
    });
    return m_gathered;
  }

  int m_size;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::vector<int> m_rounds;  // all-gathers each rank has entered
  std::vector<std::vector<std::optional<std::string>>> m_all;
  std::vector<std::optional<std::string>> m_gathered;
};

// One rank's device: ids that name the rank that made them, groups recorded as joined, and a replay whose
// peaks are the planner's step peak of the stage.
class fake_host final : public rank_host {
 public:
  fake_host(problem p, layout l, int rank) : m_p(std::move(p)), m_l(l), m_rank(rank) {}
  std::pair<problem, layout> form_case() override { return {m_p, m_l}; }
  void check_outputs(const layout& l) override {
    outputs_checked_for = l.gpus;
    if (refuse_outputs) throw bad_input("output", *refuse_outputs);
  }
  void open_device(problem&, const layout&, int) override {
    opened = true;
    if (fail_open) throw bad_input("device", *fail_open);
  }
  std::optional<std::string> nccl_unique_id(std::string&) override {
    return std::string(nccl_id_bytes, static_cast<char>('A' + m_rank));
  }
  std::vector<nccl_group_memory> join_nccl_groups(const std::vector<nccl_group_spec>& groups) override {
    joined = groups;
    std::vector<nccl_group_memory> out;
    for (const auto& g : groups) {
      nccl_group_memory m;
      m.name = g.name;
      m.size = g.size;
      m.rank_in_group = g.rank_in_group;
      m.first_bytes = g.first_bytes;
      m.init_bytes = 64 << 20;
      m.collective_bytes = 2 << 20;
      out.push_back(m);
    }
    return out;
  }
  stage_replay replay_stage(const problem&, const layout&, const step_trace& t,
                            const stage_breakdown& predicted,
                            const std::vector<nccl_group_memory>&) override {
    replayed_stage = t.stage;
    if (fail_replay) throw std::runtime_error(*fail_replay);
    stage_replay r;
    r.record = {{"replayed",
                 {{"peak_requested_bytes", predicted.step_peak},
                  {"peak_allocated_bytes", predicted.step_peak},
                  {"peak_reserved_bytes", predicted.step_peak + m_rank},
                  {"out_of_memory", nullptr}}},
                {"environment", {{"host", "rank" + std::to_string(m_rank)}}}};
    return r;
  }
  void close_device() override { closed = true; }

  std::optional<std::string> fail_open, refuse_outputs, fail_replay;
  int outputs_checked_for = 0;  // the layout's ranks rank 0 checked its outputs for (0: not asked)
  bool opened = false;
  std::vector<nccl_group_spec> joined;
  int replayed_stage = -1;
  bool closed = false;

 private:
  problem m_p;
  layout m_l;
  int m_rank;
};

struct world_run {
  std::vector<std::unique_ptr<fake_host>> hosts;
  std::vector<session_result> results;
};

// Runs ranks [0, running) of a world of `size` ranks, each in its own thread; `setup` adjusts a rank's host.
world_run run_world(const problem& p, const layout& l, int size, int running, const session_options& o,
                    const std::function<void(int, fake_host&)>& setup = {}) {
  thread_world world(size);
  world_run w;
  w.results.resize(static_cast<std::size_t>(running));
  for (int r = 0; r < running; ++r) {
    w.hosts.push_back(std::make_unique<fake_host>(p, l, r));
    if (setup) setup(r, *w.hosts.back());
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < running; ++r)
    threads.emplace_back([&, r] {
      thread_world::transport tr(world, r);
      const launch_info li{r, size, r % 4, "test", "node" + std::to_string(r / 4)};
      w.results[static_cast<std::size_t>(r)] =
          run_rank_session(tr, li, o, *w.hosts[static_cast<std::size_t>(r)]);
    });
  for (auto& t : threads) t.join();
  return w;
}

struct tp2_pp2 {
  problem p = test::preset_problem("gpt3-1.3b");
  layout l;
  tp2_pp2() {
    l.gpus = 4;
    l.tp = 2;
    l.pp = 2;
    l.zero = 1;
  }
};

TEST(MultiRankSession, RanksExchangeIdsJoinTheirGroupsAndRankZeroSummarises) {
  tp2_pp2 c;
  c.p.precision.activation_bytes = 4;  // fp32 activations: the first collectives follow the recipe
  session_options o;
  o.nccl = true;
  o.dp_bucket_bytes = 25 << 20;
  o.timeout = 10s;
  const world_run w = run_world(c.p, c.l, 4, 4, o);
  const double act = static_cast<double>(c.p.training.seq) * static_cast<double>(c.p.training.micro_batch) *
                     static_cast<double>(c.p.model.hidden) * 4;
  for (int r = 0; r < 4; ++r) {
    const auto& h = *w.hosts[static_cast<std::size_t>(r)];
    EXPECT_TRUE(h.closed);
    EXPECT_EQ(h.replayed_stage, coords_of(c.l, r).pp);
    ASSERT_EQ(h.joined.size(), 2u) << r;  // tp and pp; dp is 1
    const nccl_group_spec& tp = h.joined[0];
    const nccl_group_spec& pp = h.joined[1];
    EXPECT_EQ(tp.name, "tp");
    EXPECT_EQ(pp.name, "pp");
    EXPECT_TRUE(pp.point_to_point);
    EXPECT_EQ(tp.rank_in_group, coords_of(c.l, r).tp);
    // Each group's id is the one its first rank made.
    EXPECT_EQ(tp.unique_id,
              std::string(nccl_id_bytes, static_cast<char>('A' + group_of(c.l, r, grid_axis::tp)[0])));
    EXPECT_EQ(pp.unique_id,
              std::string(nccl_id_bytes, static_cast<char>('A' + group_of(c.l, r, grid_axis::pp)[0])));
    EXPECT_EQ(tp.first_bytes, static_cast<std::int64_t>(act));
    EXPECT_EQ(pp.first_bytes, static_cast<std::int64_t>(act / 2));
    EXPECT_EQ(tp.first_bytes, static_cast<std::int64_t>(activation_message_bytes(c.p, c.l)));
  }
  for (int r = 1; r < 4; ++r) {
    EXPECT_EQ(w.results[static_cast<std::size_t>(r)].how, session_result::ending::done);
    EXPECT_EQ(w.results[static_cast<std::size_t>(r)].exit_status, 0);
  }
  const session_result& r0 = w.results[0];
  ASSERT_EQ(r0.how, session_result::ending::summarised);
  EXPECT_EQ(r0.exit_status, 0);
  ASSERT_EQ(r0.summary.rows.size(), 4u);
  EXPECT_TRUE(r0.summary.missing.empty());
  EXPECT_TRUE(r0.summary.failed.empty());
  ASSERT_TRUE(r0.summary.worst_rank);
  EXPECT_TRUE(r0.summary.worst_agrees);
  for (const auto& row : r0.summary.rows) {
    EXPECT_TRUE(row.answered);
    EXPECT_EQ(row.nccl_bytes, 2 * ((64 << 20) + (2 << 20)));
  }
  // The files: the summary with rank 0's environment, then one record per rank with its rank block.
  const launch_info li0{0, 4, 0, "test", "node0"};
  const auto files = session_files(r0, li0, "dir/out.json", {{"case", 1}}, {{"host", "fallback"}});
  ASSERT_EQ(files.size(), 5u);
  EXPECT_EQ(files[0].first, "dir/out.json");
  const auto summary = nlohmann::json::parse(files[0].second);
  EXPECT_EQ(summary["schema"], records::schema_of(records::kind::multi_rank));
  EXPECT_EQ(summary["environment"]["host"], "rank0");
  EXPECT_EQ(files[3].first, "dir/out.rank2.json");
  const auto rec = nlohmann::json::parse(files[3].second);
  EXPECT_EQ(rec["rank"]["rank"], 2);
  EXPECT_EQ(rec["rank"]["nccl"]["note"],
            "device-used deltas of ncclCommInitRank and of the first collective");
  EXPECT_EQ(rec["rank"]["nccl"]["groups"][0]["first_collective_payload_bytes"],
            static_cast<std::int64_t>(act));
  EXPECT_EQ(session_files(r0, li0, "-", {}, {}).size(), 1u);
  EXPECT_TRUE(session_files(r0, li0, "", {}, {}).empty());
}

TEST(MultiRankSession, AFailedRankIsReportedAndNoRankJoinsNccl) {
  tp2_pp2 c;
  session_options o;
  o.nccl = true;
  o.timeout = 10s;
  const world_run w = run_world(c.p, c.l, 4, 4, o, [](int r, fake_host& h) {
    if (r == 2) h.fail_open = "no such card";
  });
  for (const auto& h : w.hosts) EXPECT_TRUE(h->joined.empty());
  EXPECT_EQ(w.hosts[2]->replayed_stage, -1);
  EXPECT_EQ(w.hosts[3]->replayed_stage, 1);  // the others still replay, without NCCL
  const session_result& r0 = w.results[0];
  ASSERT_EQ(r0.how, session_result::ending::summarised);
  EXPECT_EQ(r0.summary.failed, std::vector<int>{2});
  EXPECT_EQ(r0.summary.rows[2].error, "bad input: device: no such card");
  EXPECT_EQ(r0.exit_status, rank_exit::bad_input);
  const auto files = session_files(r0, {0, 4, 0, "test", "node0"}, "out.json", {}, {});
  ASSERT_EQ(files.size(), 4u);  // the summary and the three ranks with a record
  const auto rec = nlohmann::json::parse(files[1].second);
  EXPECT_EQ(rec["rank"]["nccl"]["note"], "not joined: rank(s) 2 could not (see their rows)");
}

TEST(MultiRankSession, ARankThatNeverAnswersIsNamedAfterTheDeadline) {
  tp2_pp2 c;
  session_options o;  // the sim backend: no NCCL exchange, only the gather
  o.timeout = 300ms;
  const world_run w = run_world(c.p, c.l, 4, 3, o);
  const session_result& r0 = w.results[0];
  ASSERT_EQ(r0.how, session_result::ending::summarised);
  EXPECT_EQ(r0.summary.missing, std::vector<int>{3});
  EXPECT_EQ(r0.exit_status, rank_exit::device_failed);
  EXPECT_FALSE(r0.summary.rows[3].answered);
  const auto rec =
      nlohmann::json::parse(session_files(r0, {0, 4, 0, "test", "n"}, "o.json", {}, {})[1].second);
  EXPECT_EQ(rec["rank"]["nccl"]["note"], "the sim backend has no NCCL (not modelled)");
}

TEST(MultiRankSession, RankZeroWithoutACaseAnswersForEveryRank) {
  tp2_pp2 c;
  c.l.gpus = 8;
  c.l.zero = 1;
  session_options o;
  o.timeout = 10s;
  const world_run w = run_world(c.p, c.l, 4, 4, o);
  const session_result& r0 = w.results[0];
  ASSERT_EQ(r0.how, session_result::ending::no_case);
  EXPECT_EQ(r0.exit_status, rank_exit::bad_input);
  EXPECT_EQ(r0.line, "bad input: ranks: the layout has 8 GPUs, the launcher started 4 ranks");
  EXPECT_EQ(w.results[1].how, session_result::ending::done);
}

TEST(MultiRankSession, RefusedOutputsStopEveryRankBeforeItsDevice) {
  // Rank 0 cannot write its outputs (a directory in the way of a rank's record): no rank opens its device,
  // joins NCCL or replays, and rank 0's line answers for all.
  tp2_pp2 c;
  session_options o;
  o.nccl = true;
  o.timeout = 10s;
  const world_run w = run_world(c.p, c.l, 4, 4, o, [](int r, fake_host& h) {
    if (r == 0)
      h.refuse_outputs = "'out.rank0.json' exists and is not a regular file; refusing to replace it";
  });
  EXPECT_EQ(w.hosts[0]->outputs_checked_for, 4);
  for (int r = 0; r < 4; ++r) {
    const auto& h = *w.hosts[static_cast<std::size_t>(r)];
    EXPECT_FALSE(h.opened) << r;
    EXPECT_TRUE(h.joined.empty()) << r;
    EXPECT_EQ(h.replayed_stage, -1) << r;
    if (r > 0) {
      EXPECT_EQ(h.outputs_checked_for, 0) << r;  // rank 0's files, rank 0's check
    }
  }
  const session_result& r0 = w.results[0];
  ASSERT_EQ(r0.how, session_result::ending::no_case);
  EXPECT_EQ(r0.exit_status, rank_exit::bad_input);
  EXPECT_EQ(r0.line,
            "bad input: output: 'out.rank0.json' exists and is not a regular file; refusing to replace it");
  for (int r = 1; r < 4; ++r)
    EXPECT_EQ(w.results[static_cast<std::size_t>(r)].how, session_result::ending::done);
}

TEST(MultiRankSession, RankZeroWithoutACaseStopsEveryRankBeforeItsDevice) {
  tp2_pp2 c;
  c.l.gpus = 8;  // every rank forms the same wrong case; rank 0's line answers
  session_options o;
  o.timeout = 10s;
  const world_run w = run_world(c.p, c.l, 4, 4, o);
  for (const auto& h : w.hosts) EXPECT_FALSE(h->opened);
  EXPECT_EQ(w.hosts[0]->outputs_checked_for, 0);  // no case, no outputs to check
}

TEST(MultiRankSession, AWorldThatIsNotTheLaunchersIsRefused) {
  tp2_pp2 c;
  session_options o;
  o.timeout = 1s;
  fake_host h(c.p, c.l, 0);
  // The variables claim 4 ranks; the transport reached a world of one (MPI without mpirun).
  auto solo = open_solo_transport();
  try {
    run_rank_session(*solo, {0, 4, 0, "test", "solo"}, o, h);
    ADD_FAILURE() << "a world of one ran as rank 0 of 4";
  } catch (const bad_input& e) {
    EXPECT_EQ(std::string(e.what()),
              "ranks: the launcher's variables claim a world of 4 ranks (world size=4) but MPI's world has 1 "
              "(was this process started by the launcher?)");
  }
  // The right size, another rank.
  thread_world world(4);
  thread_world::transport tr(world, 2);
  EXPECT_THROW(run_rank_session(tr, {1, 4, 1, "test", "n"}, o, h), bad_input);
  EXPECT_FALSE(h.opened);
}

// Runs agree_on_world on ranks [0, running) of a world of `size`, rank r claiming `claimed(r)` with `check`.
std::vector<world_verdict> agree(int size, int running, const std::function<launch_info(int)>& claimed,
                                 const std::function<void(int)>& check, std::chrono::milliseconds timeout) {
  thread_world world(size);
  std::vector<world_verdict> out(static_cast<std::size_t>(running));
  std::vector<std::thread> threads;
  for (int r = 0; r < running; ++r)
    threads.emplace_back([&, r] {
      thread_world::transport tr(world, r);
      out[static_cast<std::size_t>(r)] = agree_on_world(
          tr, claimed(r), [&] { check(r); }, timeout);
    });
  for (auto& t : threads) t.join();
  return out;
}

TEST(MultiRankSession, RanksAgreeOnTheWorldAndExactlyOneSaysWhyNot) {
  auto honest = [](int r) { return launch_info{r, 3, r, "test", "n"}; };
  auto nothing = [](int) {};
  for (const auto& v : agree(3, 3, honest, nothing, 10s)) {
    EXPECT_TRUE(v.ok);
    EXPECT_FALSE(v.speak);
  }
  // Rank 1's variables were set by hand to say rank 0: rank 1 alone finds it, and rank 1 says it.
  auto liar = [](int r) {
    launch_info li{r == 1 ? 0 : r, 3, 0, "test", "n"};
    li.rank_variable = "OMPI_COMM_WORLD_RANK";
    return li;
  };
  const auto v = agree(3, 3, liar, nothing, 10s);
  for (int r = 0; r < 3; ++r) {
    EXPECT_FALSE(v[static_cast<std::size_t>(r)].ok) << r;
    EXPECT_EQ(v[static_cast<std::size_t>(r)].speak, r == 1) << r;
  }
  EXPECT_EQ(
      v[1].line,
      "bad input: ranks: the launcher's variables say rank 0 (OMPI_COMM_WORLD_RANK) but MPI says rank 1");
  EXPECT_EQ(v[0].line, "");
  // Every rank refuses the options: rank 0, the lowest, speaks for all.
  const auto o = agree(
      3, 3, honest, [](int) { throw bad_input("rank-timeout", "must be between 0 and 86400 seconds"); }, 10s);
  for (int r = 0; r < 3; ++r) {
    EXPECT_FALSE(o[static_cast<std::size_t>(r)].ok);
    EXPECT_EQ(o[static_cast<std::size_t>(r)].speak, r == 0) << r;
  }
  EXPECT_EQ(o[0].line, "bad input: rank-timeout: must be between 0 and 86400 seconds");
  // Rank 2 never comes: each decides alone, the failed rank speaks for itself.
  const auto t = agree(
      3, 2, honest,
      [](int r) {
        if (r == 1) throw bad_input("x", "no");
      },
      200ms);
  EXPECT_TRUE(t[0].ok);
  EXPECT_FALSE(t[0].speak);
  EXPECT_FALSE(t[1].ok);
  EXPECT_TRUE(t[1].speak);
}

TEST(MultiRankSession, AnUnexpectedFailureIsTheRanksOutcomeNotAHang) {
  // A rank whose replay throws something unforeseen still reaches the gather: rank 0 summarises at once
  // (a 10 s deadline it never needs) and names it.
  tp2_pp2 c;
  session_options o;
  o.timeout = 10s;
  const auto started = std::chrono::steady_clock::now();
  const world_run w = run_world(c.p, c.l, 4, 4, o, [](int r, fake_host& h) {
    if (r == 1) h.fail_replay = "vector::_M_range_check";
  });
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  const session_result& r0 = w.results[0];
  ASSERT_EQ(r0.how, session_result::ending::summarised);
  EXPECT_TRUE(r0.summary.missing.empty());
  EXPECT_EQ(r0.summary.failed, std::vector<int>{1});
  EXPECT_EQ(r0.summary.rows[1].error, "internal error: vector::_M_range_check");
  EXPECT_EQ(r0.exit_status, rank_exit::internal);
}

TEST(MultiRankSession, RankFilesSkipAGarbledMessageAndTakeAnyBytes) {
  tp2_pp2 c;
  session_options o;
  o.timeout = 10s;
  world_run w = run_world(c.p, c.l, 4, 4, o);
  session_result& r0 = w.results[0];
  ASSERT_EQ(r0.how, session_result::ending::summarised);
  r0.messages[2] = std::string("{not json");
  const launch_info li0{0, 4, 0, "test", "node0"};
  std::vector<std::pair<std::string, std::string>> files;
  // A path's bytes that are not UTF-8 in the inputs: written, not a failed dump after every rank's work.
  ASSERT_NO_THROW(files = session_files(r0, li0, "o.json", {{"json", "\xff.json"}}, {}));
  ASSERT_EQ(files.size(), 4u);  // the summary and ranks 0, 1, 3
  EXPECT_EQ(files[3].first, "o.rank3.json");
  EXPECT_EQ(nlohmann::json::parse(files[0].second)["inputs"]["json"], "\xEF\xBF\xBD.json");
}

TEST(MultiRankSession, AWorldOfOneJoinsItsDataParallelGroup) {
  tp2_pp2 c;
  c.l = layout{};
  c.l.gpus = 1;
  session_options o;
  o.nccl = true;
  o.dp_bucket_bytes = 25 << 20;
  o.timeout = 1s;
  std::string why;
  auto tr = open_rank_transport({0, 1, 0, "test", "solo"}, why);
  ASSERT_TRUE(tr) << why;
  fake_host h(c.p, c.l, 0);
  const session_result r = run_rank_session(*tr, {0, 1, 0, "test", "solo"}, o, h);
  ASSERT_EQ(r.how, session_result::ending::summarised);
  ASSERT_EQ(h.joined.size(), 1u);
  EXPECT_EQ(h.joined[0].name, "dp");
  EXPECT_EQ(h.joined[0].size, 1);
  EXPECT_EQ(h.joined[0].first_bytes, 25 << 20);
  EXPECT_EQ(h.joined[0].unique_id, std::string(nccl_id_bytes, 'A'));
}

TEST(NcclGroups, IdMessageWireFormat) {
  tp2_pp2 c;
  std::string why;
  int made = 0;
  auto maker = [&](std::string&) -> std::optional<std::string> {
    ++made;
    return std::string(nccl_id_bytes, 'x');
  };
  // Rank 0 leads its tp and pp groups: slots 0 (tp) and 3 (pp) hold ids, cp and dp stay zero.
  const std::string m0 = nccl_id_message(c.l, 0, true, maker, why);
  ASSERT_EQ(m0.size(), nccl_id_message_bytes);
  EXPECT_EQ(m0[0], 1);
  EXPECT_EQ(made, 2);
  EXPECT_EQ(m0.substr(1, nccl_id_bytes), std::string(nccl_id_bytes, 'x'));
  EXPECT_EQ(m0.substr(1 + nccl_id_bytes, nccl_id_bytes), std::string(nccl_id_bytes, '\0'));
  EXPECT_EQ(m0.substr(1 + 3 * nccl_id_bytes, nccl_id_bytes), std::string(nccl_id_bytes, 'x'));
  // Rank 3 leads nothing: ready, no id made.
  const std::string m3 = nccl_id_message(c.l, 3, true, maker, why);
  EXPECT_EQ(m3, std::string(1, '\1') + std::string(nccl_id_message_bytes - 1, '\0'));
  EXPECT_EQ(made, 2);
  // No NCCL: not ready, and why.
  const std::string bad = nccl_id_message(
      c.l, 0, true,
      [](std::string& w) -> std::optional<std::string> {
        w = "no libnccl";
        return std::nullopt;
      },
      why);
  EXPECT_EQ(bad[0], 0);
  EXPECT_EQ(why, "no libnccl");
  EXPECT_EQ(unready_ranks({m0, bad, m3, nccl_id_message(c.l, 2, false, maker, why)}),
            (std::vector<int>{1, 3}));
  EXPECT_THROW(nccl_group_specs(c.p, c.l, 1, {m0, "short", m3, m3}, 0), bad_input);
}

TEST(NcclGroups, FirstCollectivesFollowTheRecipesActivations) {
  tp2_pp2 c;
  c.l.cp = 1;
  const std::int64_t bf16 = first_collective_bytes(c.p, c.l, grid_axis::tp, 0);
  EXPECT_EQ(bf16, c.p.training.seq * c.p.training.micro_batch * c.p.model.hidden * 2);
  EXPECT_EQ(first_collective_bytes(c.p, c.l, grid_axis::pp, 0), bf16 / 2);
  EXPECT_EQ(first_collective_bytes(c.p, c.l, grid_axis::cp, 0), bf16 / 2);
  EXPECT_EQ(first_collective_bytes(c.p, c.l, grid_axis::dp, 12345), 12345);
  c.p.precision.activation_bytes = 4;
  EXPECT_EQ(first_collective_bytes(c.p, c.l, grid_axis::tp, 0), 2 * bf16);
  EXPECT_TRUE(joins_group(grid_axis::dp, 1, 1));
  EXPECT_FALSE(joins_group(grid_axis::tp, 1, 1));
  EXPECT_FALSE(joins_group(grid_axis::dp, 1, 4));
  EXPECT_TRUE(joins_group(grid_axis::pp, 2, 4));
}

}  // namespace
}  // namespace headroom::probes
