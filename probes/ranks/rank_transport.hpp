// rank_transport.hpp: what a multi-rank probe needs from the ranks' communication, and no more: an
// all-gather of small equal-sized messages (NCCL unique ids) and a gather of records to rank 0, each with a
// deadline, so that a rank that died or hangs never hangs the others for ever. MPI implements it
// (mpi_transport.cpp, built when MPI is found); tests use threads.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "probes/ranks/launch.hpp"

namespace headroom::probes {

// Some ranks did not answer before the deadline.
class rank_timeout : public std::runtime_error {
 public:
  rank_timeout(const std::string& what, std::vector<int> missing)
      : std::runtime_error(what), missing_ranks(std::move(missing)) {}
  std::vector<int> missing_ranks;  // empty when the transport cannot tell which
};

class rank_transport {
 public:
  virtual ~rank_transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank: returns every rank's `mine` in rank order (all the same length). Throws rank_timeout.
  virtual std::vector<std::string> all_gather(const std::string& mine, std::chrono::milliseconds timeout) = 0;
  // Rank 0 returns every rank's message in rank order, nullopt for a rank that had not answered by the
  // deadline; the other ranks send theirs and return an empty vector (rank_timeout if rank 0 never took it).
  virtual std::vector<std::optional<std::string>> gather(const std::string& mine,
                                                         std::chrono::milliseconds timeout) = 0;
};

// Returns the transport of a world of one rank: every exchange returns this rank's own message. Needs no MPI,
// so a single process (a launcher's one rank, or one started with its variables set by hand) takes the
// multi-rank path on any build, NCCL included.
std::unique_ptr<rank_transport> open_solo_transport();

// Returns the MPI transport of this launch (MPI_Init now, MPI_Finalize when destroyed), or nullptr with
// `why` when this build has no MPI.
std::unique_ptr<rank_transport> open_mpi_transport(const launch_info& li, std::string& why);

}  // namespace headroom::probes
