// no_mpi_transport.cpp: the rank transport of a build without MPI: there is none, and it says why.
#include "probes/ranks/rank_transport.hpp"

namespace headroom::probes {

std::unique_ptr<rank_transport> open_mpi_transport(const launch_info&, std::string& why) {
  why = "this build has no MPI (install libopenmpi-dev and rebuild): multi-rank probes need it to bootstrap";
  return nullptr;
}

}  // namespace headroom::probes
