// multi_rank_unit_test.cpp: the pieces of a multi-rank probe that need no launcher: Megatron's rank order
// and groups, reading the launcher's environment, the GPU a local rank takes, rank record names, and rank
// 0's summary from hand-made rank messages (missing, out-of-memory and failed ranks; the worst rank against
// the planner's worst stage).
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "planner/rank_grid.hpp"
#include "probes/ranks/launch.hpp"
#include "probes/ranks/multi_rank.hpp"
#include "probes/records/schema.hpp"
#include "test_support.hpp"

namespace headroom::probes {
namespace {

layout grid(int gpus, int tp, int cp, int pp) {
  layout l;
  l.gpus = gpus;
  l.tp = tp;
  l.cp = cp;
  l.pp = pp;
  return l;
}

TEST(RankGrid, MegatronOrderTensorParallelFastest) {
  // 16 ranks, tp 2, cp 2, pp 2 -> dp 2. Megatron's "tp-cp-ep-dp-pp": rank = tp + 2 (cp + 2 (dp + 2 pp)).
  const layout l = grid(16, 2, 2, 2);
  const rank_coords c = coords_of(l, 13);  // 13 = 1 + 2 * (0 + 2 * (1 + 2 * 1))
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.cp, 0);
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.pp, 1);
  std::set<std::vector<int>> seen;
  for (int r = 0; r < 16; ++r) {
    const rank_coords x = coords_of(l, r);
    EXPECT_EQ(rank_at(l, x), r);
    seen.insert({x.tp, x.cp, x.dp, x.pp});
  }
  EXPECT_EQ(seen.size(), 16u);  // a bijection
  // Groups: tp neighbours are consecutive (inside a node), pp peers are world/pp apart.
  EXPECT_EQ(group_of(l, 13, grid_axis::tp), (std::vector<int>{12, 13}));
  EXPECT_EQ(group_of(l, 13, grid_axis::cp), (std::vector<int>{13, 15}));
  EXPECT_EQ(group_of(l, 13, grid_axis::dp), (std::vector<int>{9, 13}));
  EXPECT_EQ(group_of(l, 13, grid_axis::pp), (std::vector<int>{5, 13}));
  EXPECT_EQ(describe(l, c), "tp 1/2, cp 0/2, dp 1/2, pp 1/2");
  EXPECT_THROW(coords_of(l, 16), bad_input);
  EXPECT_THROW(coords_of(l, -1), bad_input);
  EXPECT_THROW(coords_of(grid(12, 8, 1, 1), 0), bad_input);  // 8 does not divide 12
}

const char* lookup(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? nullptr : it->second.c_str();
}

TEST(Launch, ReadsEachLaunchersEnvironment) {
  auto detect = [](std::map<std::string, std::string> env) {
    return detect_launch([&](const char* n) { return lookup(env, n); });
  };
  EXPECT_FALSE(detect({}));
  auto o = detect(
      {{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->rank, 5);
  EXPECT_EQ(o->size, 8);
  EXPECT_EQ(o->local_rank, 1);
  EXPECT_EQ(o->launcher, "mpirun (OpenMPI)");
  // srun's tasks: the step's task count is the world; a batch script (no step) is not a launch.
  auto s = detect({{"SLURM_PROCID", "3"},
                   {"SLURM_NTASKS", "64"},
                   {"SLURM_STEP_NUM_TASKS", "16"},
                   {"SLURM_LOCALID", "3"},
                   {"SLURM_STEP_ID", "0"}});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->size, 16);
  EXPECT_EQ(s->launcher, "srun (Slurm)");
  EXPECT_FALSE(detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "64"}}));
  auto m = detect({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->local_rank, 0);
  EXPECT_THROW(detect({{"OMPI_COMM_WORLD_RANK", "8"}, {"OMPI_COMM_WORLD_SIZE", "8"}}), bad_input);
  EXPECT_THROW(detect({{"OMPI_COMM_WORLD_RANK", "-1"}, {"OMPI_COMM_WORLD_SIZE", "8"}}), bad_input);
  EXPECT_THROW(detect({{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "8"}}), bad_input);
  EXPECT_THROW(detect({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "0"}}), bad_input);
}

// Returns the bad_input message `f` throws ("" when it throws none).
template <class F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const bad_input& e) {
    return e.what();
  }
  return "";
}

TEST(Launch, NamesTheVariablesItReadTheWorldFrom) {
  const std::map<std::string, std::string> env = {{"OMPI_COMM_WORLD_RANK", "1"},
                                                  {"OMPI_COMM_WORLD_SIZE", "2"}};
  const auto o = detect_launch([&](const char* n) { return lookup(env, n); });
  ASSERT_TRUE(o);
  EXPECT_EQ(o->rank_variable, "OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(o->size_variable, "OMPI_COMM_WORLD_SIZE");
}

TEST(Launch, RefusesInconsistentVariablesNamingThem) {
  auto refused = [](std::map<std::string, std::string> env) {
    return refusal([&] { detect_launch([&](const char* n) { return lookup(env, n); }); });
  };
  // Half a launch: a rank without its world, a world without its rank (each scheme).
  EXPECT_EQ(
      refused({{"OMPI_COMM_WORLD_RANK", "1"}}),
      "launch: OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not (mpirun (OpenMPI) sets both)");
  EXPECT_NE(
      refused({{"OMPI_COMM_WORLD_SIZE", "2"}}).find("OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK"),
      std::string::npos);
  EXPECT_NE(refused({{"PMI_SIZE", "4"}}).find("PMI_RANK is not"), std::string::npos);
  EXPECT_NE(refused({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "3"}}).find("SLURM_STEP_NUM_TASKS is not"),
            std::string::npos);
  // A rank outside the world, each scheme, named with its value.
  EXPECT_EQ(refused({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}}),
            "launch: OMPI_COMM_WORLD_RANK=2 is outside OMPI_COMM_WORLD_SIZE=2 (ranks are 0 to 1)");
  EXPECT_NE(refused({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "4"}, {"SLURM_STEP_NUM_TASKS", "4"}})
                .find("SLURM_PROCID=4 is outside SLURM_STEP_NUM_TASKS=4"),
            std::string::npos);
  EXPECT_NE(refused({{"PMI_RANK", "9"}, {"PMI_SIZE", "4"}}).find("PMI_RANK=9 is outside PMI_SIZE=4"),
            std::string::npos);
  // Values that are no count: negative, not a number, trailing junk, past an int, empty.
  for (const char* v : {"-1", "two", "1x", "99999999999", "", " 1"})
    EXPECT_NE(refused({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", v}})
                  .find("OMPI_COMM_WORLD_SIZE is not a non-negative integer"),
              std::string::npos)
        << v;
  EXPECT_EQ(refused({{"PMI_RANK", "0"}, {"PMI_SIZE", "0"}}),
            "launch: PMI_SIZE=0: a world has at least one rank");
  // A local rank that disagrees: outside the world, outside the node's count, a node larger than the world.
  EXPECT_EQ(refused({{"OMPI_COMM_WORLD_RANK", "0"},
                     {"OMPI_COMM_WORLD_SIZE", "2"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}}),
            "launch: OMPI_COMM_WORLD_LOCAL_RANK=2 is outside OMPI_COMM_WORLD_SIZE=2 (a node holds at most "
            "the world)");
  EXPECT_EQ(refused({{"OMPI_COMM_WORLD_RANK", "3"},
                     {"OMPI_COMM_WORLD_SIZE", "4"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}}),
            "launch: OMPI_COMM_WORLD_LOCAL_RANK=1 is outside OMPI_COMM_WORLD_LOCAL_SIZE=1");
  EXPECT_NE(refused({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALNRANKS", "3"}})
                .find("MPI_LOCALNRANKS=3 is not between 1 and PMI_SIZE=2"),
            std::string::npos);
  EXPECT_NE(refused({{"SLURM_STEP_ID", "0"},
                     {"SLURM_PROCID", "0"},
                     {"SLURM_STEP_NUM_TASKS", "2"},
                     {"SLURM_LOCALID", "x"}})
                .find("SLURM_LOCALID is not a non-negative integer"),
            std::string::npos);
  // Consistent variables still read (the local size agrees).
  EXPECT_EQ(refused({{"OMPI_COMM_WORLD_RANK", "3"},
                     {"OMPI_COMM_WORLD_SIZE", "4"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
            "");
}

TEST(Launch, TheWorldReachedMustBeTheOneClaimed) {
  launch_info li;
  li.rank = 1;
  li.size = 2;
  li.size_variable = "OMPI_COMM_WORLD_SIZE";
  li.rank_variable = "OMPI_COMM_WORLD_RANK";
  EXPECT_EQ(refusal([&] { check_world(li, 1, 2); }), "");
  // Not started by mpirun: MPI_Init makes a world of one.
  EXPECT_EQ(
      refusal([&] { check_world(li, 0, 1); }),
      "ranks: the launcher's variables claim a world of 2 ranks (OMPI_COMM_WORLD_SIZE=2) but MPI's world "
      "has 1 (was this process started by the launcher?)");
  EXPECT_NE(refusal([&] { check_world(li, 1, 4); }).find("but MPI's world has 4"), std::string::npos);
  EXPECT_EQ(refusal([&] { check_world(li, 0, 2); }),
            "ranks: the launcher's variables say rank 1 (OMPI_COMM_WORLD_RANK) but MPI says rank 0");
}

TEST(Launch, LocalRankPicksItsGpu) {
  EXPECT_EQ(visible_device_for(nullptr, 3), "3");
  EXPECT_EQ(visible_device_for("5", 3), "5");  // the launcher bound one GPU to this rank
  EXPECT_EQ(visible_device_for("4,5,6,7", 2), "6");
  EXPECT_EQ(visible_device_for("GPU-a, GPU-b", 3), "GPU-b");
  EXPECT_FALSE(visible_device_for("", 0));
  EXPECT_FALSE(visible_device_for(",", 0));
}

TEST(MultiRank, RecordPathsPerRank) {
  EXPECT_EQ(rank_record_path("out.json", 3, 8), "out.rank3.json");
  EXPECT_EQ(rank_record_path("out.json", 3, 16), "out.rank03.json");
  EXPECT_EQ(rank_record_path("dir.v2/out", 0, 2), "dir.v2/out.rank0");
  EXPECT_EQ(rank_record_path(".hidden", 1, 2), ".hidden.rank1");
  EXPECT_EQ(rank_record_path("-", 1, 2), "");
}

std::string message(int rank, int stage, std::int64_t requested, std::int64_t reserved, bool oom = false,
                    const std::string& error = "") {
  rank_outcome o;
  o.rank = rank;
  o.hostname = "node" + std::to_string(rank / 4);
  o.stage = stage;
  o.error = error;
  o.exit_status = error.empty() ? (oom ? 3 : 0) : 5;
  if (error.empty()) {
    nlohmann::json oom_at = nullptr;
    if (oom) oom_at = {{"phase", "backward"}, {"tensor", "mb0.layer3.grad"}};
    o.record = nlohmann::json{{"replayed",
                               {{"peak_requested_bytes", requested},
                                {"peak_allocated_bytes", requested},
                                {"peak_reserved_bytes", reserved},
                                {"out_of_memory", oom_at}}},
                              {"device_memory", nullptr}};
  }
  return to_message(o);
}

TEST(MultiRank, SummaryNamesWorstMissingAndFailedRanks) {
  const problem p = test::preset_problem("gpt3-1.3b");
  layout l = grid(8, 2, 1, 4);
  l.zero = 1;
  const breakdown b = estimate(p, l);
  ASSERT_EQ(b.stages.size(), 4u);
  // Stage of rank r is r / 2. Rank 5 (stage 2) has the largest footprint; rank 7 never answered; rank 6
  // failed; rank 3 ran out of memory.
  std::vector<std::optional<std::string>> msgs(8);
  for (int r = 0; r < 8; ++r) msgs[static_cast<std::size_t>(r)] = message(r, r / 2, 100 + r, 200 + r);
  msgs[5] = message(5, 2, 500, 900);
  msgs[3] = message(3, 1, 300, 400, true);
  msgs[6] = message(6, 3, 0, 0, false, "device error: cudaMalloc failed");
  msgs[7].reset();
  const rank_summary s = summarise_ranks(msgs, b);
  ASSERT_EQ(s.rows.size(), 8u);
  EXPECT_EQ(s.missing, std::vector<int>{7});
  EXPECT_EQ(s.out_of_memory, std::vector<int>{3});
  EXPECT_EQ(s.failed, std::vector<int>{6});
  ASSERT_TRUE(s.worst_rank);
  EXPECT_EQ(*s.worst_rank, 5);
  EXPECT_EQ(s.rows[5].stage, 2);
  EXPECT_EQ(s.rows[5].predicted_step_peak, b.stages[2].step_peak);
  EXPECT_EQ(s.rows[3].oom_where, "backward, mb0.layer3.grad");
  // Agreement: rank 5's stage (2) against the planner's worst stage.
  EXPECT_EQ(s.worst_agrees, b.stages[2].step_peak == b.worst_stage().step_peak);
  EXPECT_EQ(s.exit_status(), 5);  // a failed device and a missing rank outrank the out-of-memory
  const nlohmann::json j = summary_to_json(s, launch_info{0, 8, 0, "mpirun (OpenMPI)", "node0"}, {}, {});
  EXPECT_EQ(j["schema"], records::schema_of(records::kind::multi_rank));
  EXPECT_EQ(j["worst_rank"], 5);
  EXPECT_EQ(j["ranks"][7]["answered"], false);
  EXPECT_EQ(j["ranks"][5]["coordinates"]["pp"], 2);
  // All answered, one out of memory: exit 3.
  msgs[6] = message(6, 3, 10, 20);
  msgs[7] = message(7, 3, 10, 20);
  EXPECT_EQ(summarise_ranks(msgs, b).exit_status(), 3);
  // A garbled message is that rank's failure, not a crash of rank 0.
  msgs[3] = std::string("{not json");
  const rank_summary g = summarise_ranks(msgs, b);
  EXPECT_EQ(g.failed, std::vector<int>{3});
}

TEST(MultiRank, SummaryRefusesMessagesOfAnotherWorld) {
  // One message per rank of the layout, or rank 0 would read rows past the messages (or stages past the
  // layout's): a bad_input, not a crash.
  const problem p = test::preset_problem("gpt3-1.3b");
  layout l = grid(8, 2, 1, 4);
  l.zero = 1;
  const breakdown b = estimate(p, l);
  for (std::size_t n : {1u, 7u, 9u, 16u}) {
    const std::vector<std::optional<std::string>> msgs(n, message(0, 0, 1, 1));
    EXPECT_EQ(refusal([&] { summarise_ranks(msgs, b); }),
              "ranks: " + std::to_string(n) + " rank messages for a layout of 8 ranks");
  }
}

TEST(MultiRank, AnOutcomeThatIsNotUtf8StillTravels) {
  // A rank's error line carries a path's bytes; the message must still reach rank 0 (JSON wants UTF-8).
  rank_outcome o;
  o.rank = 1;
  o.error = "bad input: output: '\xff\xfe.json' exists";
  o.exit_status = 2;
  std::string text;
  ASSERT_NO_THROW(text = to_message(o));
  const rank_outcome back = outcome_from_message(text, "rank 1");
  EXPECT_EQ(back.exit_status, 2);
  EXPECT_EQ(back.error, "bad input: output: '\xEF\xBF\xBD\xEF\xBF\xBD.json' exists");  // U+FFFD twice
}

}  // namespace
}  // namespace headroom::probes
