// launch.hpp: where this process sits in a multi-rank run, read from the launcher's environment (mpirun's
// OMPI_COMM_WORLD_*, srun's SLURM_PROCID / SLURM_STEP_NUM_TASKS / SLURM_LOCALID (in a job step only), MPICH's
// and Intel MPI's PMI_*), and which GPU the local rank takes. No launcher of our own: the launcher people
// already use starts the ranks.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace headroom::probes {

struct launch_info {
  int rank = 0, size = 1, local_rank = 0;
  std::string launcher;  // "mpirun (OpenMPI)", "srun (Slurm)", "PMI (MPICH / Intel MPI)"
  std::string hostname;
  // The variables rank and size were read from ("OMPI_COMM_WORLD_RANK"), for the errors that name them.
  std::string rank_variable = "rank", size_variable = "world size";
};

// Returns the launch this process belongs to, or nullopt for a plain process (no launcher variable set).
// `getenv` reads one variable (nullptr when unset). The first scheme whose variables are set decides (see
// launch.cpp for the order). Throws bad_input naming the variable when they are inconsistent: a negative,
// non-numeric or out-of-range value, a world size of 0, a rank or local rank outside the world (or the
// local rank outside the node's count, where the launcher sets one), a rank without its size or a size
// without its rank.
std::optional<launch_info> detect_launch(const std::function<const char*(const char*)>& getenv);

// Throws bad_input naming both sides when the world a transport reached (`world_rank` of `world_size`, e.g.
// MPI's) is not the one the launcher's variables claim (`li`): a process started with OMPI_COMM_WORLD_SIZE=2
// by hand, without mpirun, gets an MPI world of one.
void check_world(const launch_info& li, int world_rank, int world_size);

// Returns the CUDA_VISIBLE_DEVICES the local rank should run with, given the launcher's value (nullptr when
// unset): one device listed means the launcher already bound one GPU to this rank (kept); several means
// this rank takes entry local_rank (modulo their number); unset means device local_rank. nullopt when the
// value lists no device.
std::optional<std::string> visible_device_for(const char* visible, int local_rank);

}  // namespace headroom::probes
