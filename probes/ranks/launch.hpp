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
};

// Returns the launch this process belongs to, or nullopt for a plain process (no launcher variable set).
// `getenv` reads one variable (nullptr when unset). Throws bad_input when the variables are inconsistent
// (a rank outside the world, a negative or non-numeric value).
std::optional<launch_info> detect_launch(const std::function<const char*(const char*)>& getenv);

// Returns the CUDA_VISIBLE_DEVICES the local rank should run with, given the launcher's value (nullptr when
// unset): one device listed means the launcher already bound one GPU to this rank (kept); several means
// this rank takes entry local_rank (modulo their number); unset means device local_rank. nullopt when the
// value lists no device.
std::optional<std::string> visible_device_for(const char* visible, int local_rank);

}  // namespace headroom::probes
