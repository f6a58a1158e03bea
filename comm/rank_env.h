// How a process learns that it is one rank of a job, from the launcher's environment:
//  - torchrun style (and ddpbench's own launcher): RANK, WORLD_SIZE, LOCAL_RANK,
//    MASTER_ADDR, MASTER_PORT;
//  - mpirun (Open MPI): OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
//    OMPI_COMM_WORLD_LOCAL_RANK;
//  - Slurm's srun: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID.
// MPI and Slurm do not set MASTER_ADDR/MASTER_PORT; the job script must (see
// scripts/cluster/). DDPBENCH_STORE_TOKEN carries the store's shared secret.
#pragma once

#include <optional>
#include <string>

namespace ddpb::comm {

// The largest world a launcher's environment may give: the same limit as --world-size
// (issue 25, H5: WORLD_SIZE=100000 built one Gloo pair per rank before any timeout).
inline constexpr int kMaxEnvWorldSize = 1024;

struct RankEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  // Ranks a node holds where nodes hold consecutive blocks of ranks (torchrun's and ddpbench's
  // LOCAL_WORLD_SIZE), else 0: unknown.
  int local_world_size = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::string token;
  std::string source;  // "ddpbench" (our launcher), "torchrun", "mpirun" or "slurm"
};

// The rank environment, or nullopt when the process was not started as a rank. Throws
// UsageError for an inconsistent environment (rank outside the world, a world over
// kMaxEnvWorldSize, a local rank outside [0, world size), missing port).
std::optional<RankEnv> detect_rank_env();

// Note [Ranks die with their launcher]
// ddpbench's own launcher starts its ranks with a parent-death signal (base/subprocess.h).
// Ranks that mpirun, srun or torchrun started outlived a killed launcher until their
// rendezvous deadline, 300 s by default (issue 48, P6). A rank whose launcher is one of those,
// for real (the variables only they set: PMIX_RANK or OMPI_MCA_ess_base_jobid, SLURM_JOB_ID
// with SLURM_STEP_ID, TORCHELASTIC_RUN_ID), asks for SIGTERM when its parent dies, and its
// flight recorder then dumps that its launcher died. (A launcher that died before this call is
// not seen: a parent of PID 1 may be the launcher itself, as in a container whose command is
// torchrun.) A process given the variables by hand (a test, a script's background job) is left
// alone: its parent may be a shell that has already left. Returns whether this rank follows
// its launcher so.
bool follow_launcher(const RankEnv& env);

}  // namespace ddpb::comm
