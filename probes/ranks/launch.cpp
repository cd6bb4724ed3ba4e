// launch.cpp: the launcher's environment read once (see launch.hpp).
#include "probes/ranks/launch.hpp"

#include <unistd.h>

#include <charconv>
#include <vector>

#include "planner/errors.hpp"

namespace headroom::probes {

namespace {

std::optional<int> read_int(const std::function<const char*(const char*)>& getenv, const char* name) {
  const char* v = getenv(name);
  if (!v) return std::nullopt;
  const std::string s(v);
  int x = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || x < 0)
    throw bad_input("launch",
                    std::string(name) + " is not a non-negative integer ('" + s.substr(0, 40) + "')");
  return x;
}

}  // namespace

std::optional<launch_info> detect_launch(const std::function<const char*(const char*)>& getenv) {
  struct scheme {
    const char *rank, *size, *local, *launcher;
    const char* requires_var;  // set only in processes the launcher started (nullptr: none needed)
  };
  // OpenMPI first: under `srun --mpi=pmix` of an OpenMPI job both are set, and they agree.
  const std::vector<scheme> schemes = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "mpirun (OpenMPI)",
       nullptr},
      // A batch script has SLURM_PROCID and SLURM_NTASKS too, but no step: only srun's tasks count, and the
      // world is the step's tasks.
      {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "srun (Slurm)", "SLURM_STEP_ID"},
      {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "PMI (MPICH / Intel MPI)", nullptr},
  };
  for (const auto& s : schemes) {
    if (s.requires_var && !getenv(s.requires_var)) continue;
    const auto rank = read_int(getenv, s.rank);
    const auto size = read_int(getenv, s.size);
    if (!rank || !size) continue;
    launch_info li;
    li.rank = *rank;
    li.size = *size;
    li.local_rank = read_int(getenv, s.local).value_or(0);
    li.launcher = s.launcher;
    if (li.size < 1 || li.rank >= li.size)
      throw bad_input("launch", std::string(s.rank) + "=" + std::to_string(li.rank) + " is outside " +
                                    s.size + "=" + std::to_string(li.size));
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    li.hostname = host;
    return li;
  }
  return std::nullopt;
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
