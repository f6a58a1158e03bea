// The single-node launcher behind `ddpbench run --mode ddp --world-size N`, in the way
// torchrun works: it spawns N copies of this executable with RANK, LOCAL_RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT (a free port) and DDPBENCH_STORE_TOKEN (a random secret) set,
// forwards every line of their output with a "[rank k] " prefix, and waits for all of them.
// When one rank fails, the others are sent SIGTERM, then SIGKILL after a grace period, and
// the result names the failed rank, how it ended and its last lines. Children get
// PR_SET_PDEATHSIG, so they never outlive a killed launcher. SIGINT or SIGTERM to the
// launcher is passed on to every rank as SIGTERM (SIGKILL after the grace period), and the
// launcher exits with 128 + the signal number.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace ddpb::comm {

// Note [Launcher nodes]
// With nnodes > 1 this launcher is one node of a job, as torchrun's --nnodes/--node-rank: it
// starts world_size / nnodes ranks, global ranks node_rank * that + LOCAL_RANK, which meet at
// master_addr:master_port (fixed, since every node must know it; rank 0's node serves the
// store there). The store token must come from DDPBENCH_STORE_TOKEN, the same on every node:
// a random one per launcher would lock the other nodes out, and none would let anyone in.
struct LaunchSpec {
  int world_size = 1;
  std::vector<std::string> args;  // argv of every rank; args[0] is ignored (this executable)
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port on master_addr (one node only)
  int nnodes = 1;
  int node_rank = 0;
  int local_ranks() const { return world_size / nnodes; }
  int first_rank() const { return node_rank * local_ranks(); }
  std::chrono::milliseconds grace{std::chrono::seconds(5)};
  // --flight-dir; empty: comm::resolve_flight_dir's choice, given to the ranks as
  // DDPBENCH_FLIGHT_DIR so that they and the launcher agree on it.
  std::string flight_dir;
  // Start the ranks through mpirun (comm/mpirun_launch.h): `--backend mpi`, whose ranks must be
  // an MPI launcher's children.
  bool via_mpirun = false;
  // The run's --timeout: how long mpirun may take to start a rank before the launcher stops
  // it and says so (issue 48, P15), and how long a rank may stay stopped (SIGSTOP, a
  // debugger) before the launcher ends it, its collectives having timed out on the others by
  // then (P9).
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
};

// The launcher's first line for a job on this node: "ddpbench launcher: starting 2 ranks", and
// through mpirun why, or on one node of several which ranks and where the store is.
// Throws UsageError for a node layout launch_local would refuse, so no banner precedes it.
std::string launch_banner(const LaunchSpec& spec);

struct LaunchResult {
  int exit_code = 0;     // 0 when every rank succeeded; else the failed rank's code (1 or 2),
                         // or 128 + signal when the launcher was interrupted
  int failed_rank = -1;  // the first rank to fail
  std::string failure;   // "rank 1 exited with code 1" and its last lines
  int master_port = 0;   // the port the ranks met on (names their flight-recorder directory)
  // Whether the failed rank reported a failure of its own, not the loss of a peer (Note [The
  // first failure wins]): then its message is the diagnosis, not the flight recorder's.
  bool own_failure = false;
  // Ctrl-C or SIGTERM stopped the launcher: the ranks' dumps then say who was where when it
  // came, and nobody is to blame (issue 48, P16).
  bool interrupted = false;
  std::string flight_dir;  // where this job's ranks dump
  std::string job;         // comm::flight_job_id of the job's store token
  // When the launcher began, less the file clock's grain: dumps older than this are an
  // earlier job's (Note [Dumps of an earlier job] in comm/flight_doctor.cpp).
  std::filesystem::file_time_type started = std::filesystem::file_time_type::min();
};

LaunchResult launch_local(const LaunchSpec& spec);

// A TCP port on `addr` that was free a moment ago (bound to port 0, then released).
int find_free_port(const std::string& addr);
// 32 hex characters from /dev/urandom.
std::string random_token();

}  // namespace ddpb::comm
