// multi_rank_probe.hpp: `headroom probe replay` started by mpirun or srun: every rank replays the trace of
// its own stage on its own device (sim, or the GPU its local rank picks), joins the layout's NCCL groups on a
// GPU, and rank 0 gathers every rank's record into the per-rank table, one record file per rank and a
// summary. The session is the library's (probes/ranks/session.hpp); this file parses, opens the device and
// prints.
#pragma once

#include "probe_command.hpp"
#include "probes/ranks/launch.hpp"

namespace headroom::cli {

// Runs this rank's part; rank 0 prints and writes. Returns the exit status (exit_codes.hpp): on rank 0 the
// run's; on the others 0 once rank 0 has their outcome (rank 0 reports it with the rank's number), else 5.
// Refused before the session (launcher variables that disagree with MPI's world, options a multi-rank probe
// refuses): 2 on the one rank that says why, 0 on the others, which learnt that it does (a process with no
// world to join says why itself and returns 2).
int run_multi_rank_probe(const probe_replay_options& o, const probes::launch_info& li);

}  // namespace headroom::cli
