// launch.cpp: the launcher's environment read once (see launch.hpp).
#include "probes/ranks/launch.hpp"

#include <unistd.h>

#include <charconv>
#include <vector>

#include "planner/errors.hpp"

namespace headroom::probes {

namespace {

using getenv_fn = std::function<const char*(const char*)>;

// Returns `name`'s value as an int, nullopt when unset. Throws bad_input naming it when it is not a
// non-negative integer that fits an int.
std::optional<int> read_int(const getenv_fn& getenv, const char* name) {
  const char* v = getenv(name);
  if (!v) return std::nullopt;
  const std::string s(v);
  int x = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || x < 0)
    throw bad_input("launch", std::string(name) + " is not a non-negative integer ('" + s.substr(0, 40) +
                                  (s.size() > 40 ? "...'" : "'") + ")");
  return x;
}

std::string assignment(const char* name, int value) {
  return std::string(name) + "=" + std::to_string(value);
}

struct scheme {
  const char *rank, *size, *local, *local_size, *launcher;
  const char* requires_var;  // set only in processes the launcher started (nullptr: none needed)
};

// Returns the launch `s`'s variables describe, nullopt when neither its rank nor its size is set. Throws
// bad_input when they are inconsistent (see detect_launch).
std::optional<launch_info> read_scheme(const getenv_fn& getenv, const scheme& s) {
  const auto rank = read_int(getenv, s.rank);
  const auto size = read_int(getenv, s.size);
  if (!rank && !size) return std::nullopt;
  // Half a launch is no launch to run: neither a single-rank probe (a rank of a world was asked for) nor a
  // rank of a world whose size is unknown.
  if (!rank || !size)
    throw bad_input("launch", std::string(rank ? s.rank : s.size) + " is set but " +
                                  (rank ? s.size : s.rank) + " is not (" + s.launcher + " sets both)");
  launch_info li;
  li.rank = *rank;
  li.size = *size;
  li.rank_variable = s.rank;
  li.size_variable = s.size;
  li.local_rank = read_int(getenv, s.local).value_or(0);
  li.launcher = s.launcher;
  if (li.size < 1) throw bad_input("launch", assignment(s.size, li.size) + ": a world has at least one rank");
  if (li.rank >= li.size)
    throw bad_input("launch", assignment(s.rank, li.rank) + " is outside " + assignment(s.size, li.size) +
                                  " (ranks are 0 to " + std::to_string(li.size - 1) + ")");
  if (li.local_rank >= li.size)
    throw bad_input("launch", assignment(s.local, li.local_rank) + " is outside " +
                                  assignment(s.size, li.size) + " (a node holds at most the world)");
  if (const auto local_size = s.local_size ? read_int(getenv, s.local_size) : std::nullopt) {
    if (*local_size < 1 || *local_size > li.size)
      throw bad_input("launch", assignment(s.local_size, *local_size) + " is not between 1 and " +
                                    assignment(s.size, li.size));
    if (li.local_rank >= *local_size)
      throw bad_input("launch", assignment(s.local, li.local_rank) + " is outside " +
                                    assignment(s.local_size, *local_size));
  }
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  li.hostname = host;
  return li;
}

}  // namespace

std::optional<launch_info> detect_launch(const getenv_fn& getenv) {
  // OpenMPI first: under `srun --mpi=pmix` of an OpenMPI job both are set, and they agree. The schemes are
  // not compared with each other: under mpirun inside a Slurm allocation the processes inherit the SLURM_*
  // variables of the step that started OpenMPI's daemons (one task per node), which legitimately differ.
  const std::vector<scheme> schemes = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE", "mpirun (OpenMPI)", nullptr},
      // A batch script has SLURM_PROCID and SLURM_NTASKS too, but no step: only srun's tasks count, and the
      // world is the step's tasks. (SLURM_STEP_TASKS_PER_NODE is a list like "2(x3),1": not read.)
      {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", nullptr, "srun (Slurm)", "SLURM_STEP_ID"},
      {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI (MPICH / Intel MPI)", nullptr},
  };
  for (const auto& s : schemes) {
    if (s.requires_var && !getenv(s.requires_var)) continue;
    if (auto li = read_scheme(getenv, s)) return li;
  }
  return std::nullopt;
}

void check_world(const launch_info& li, int world_rank, int world_size) {
  if (world_size != li.size)
    throw bad_input("ranks", "the launcher's variables claim a world of " + std::to_string(li.size) +
                                 " ranks (" + li.size_variable + "=" + std::to_string(li.size) +
                                 ") but MPI's world has " + std::to_string(world_size) +
                                 (world_size == 1 ? " (was this process started by the launcher?)" : ""));
  if (world_rank != li.rank)
    throw bad_input("ranks", "the launcher's variables say rank " + std::to_string(li.rank) + " (" +
                                 li.rank_variable + ") but MPI says rank " + std::to_string(world_rank));
}

std::optional<std::string> visible_device_for(const char* visible, int local_rank) {
  if (!visible) return std::to_string(local_rank);
  std::vector<std::string> devices;
  std::string cur;
  for (const char* c = visible;; ++c) {
    if (*c == ',' || *c == '\0') {
      if (!cur.empty()) devices.push_back(cur);
      cur.clear();
      if (*c == '\0') break;
    } else if (*c != ' ') {
      cur.push_back(*c);
    }
  }
  if (devices.empty()) return std::nullopt;
  if (devices.size() == 1) return devices[0];
  return devices[static_cast<std::size_t>(local_rank) % devices.size()];
}

}  // namespace headroom::probes
