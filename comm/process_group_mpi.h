// ProcessGroupMpi: the collectives of comm/process_group.h over MPI (Open MPI from Debian),
// as torch.distributed's ProcessGroupMPI. Its ranks are MPI_COMM_WORLD's, so the processes
// must be started by an MPI launcher (mpirun, or srun with PMI/PMIx); `ddpbench run --backend
// mpi` without one starts itself through mpirun (bench/cli).
//
// MPI is initialised once per process with MPI_THREAD_SERIALIZED, as PyTorch's ProcessGroupMPI
// does (every call is made by a group's communication thread, and the groups' calls take one
// process-wide lock unless the library grants MPI_THREAD_MULTIPLE anyway; Open MPI's
// thread-multiple locking made small collectives slower), and finalised at exit. Each group
// duplicates MPI_COMM_WORLD, with MPI_ERRORS_RETURN, so an MPI error becomes the collective's error
// rather than an abort.
//
// Execution, staging of CUDA tensors, Works and destruction: comm/host_process_group.h (one
// communication thread, "ddpb-mpi", runs the collectives in issue order). Where the MPI is
// CUDA-aware (MPIX_Query_cuda_support at run time) CUDA tensors are passed as device pointers;
// otherwise they are staged through pinned host memory, as Gloo's are.
//
// Reductions: f32, i32, i64 with MPI_SUM; bf16 and f16 with a user-defined MPI operation
// (comm/host_sum.h: f32 partial sums rounded to 16 bits, 16-bit payloads on the wire).
//
// Note [MPI watchdog]
// MPI has no timeout of its own: a collective whose peer never arrives blocks forever. A
// watchdog thread per group checks the running collective; once it has run longer than the
// group's timeout, the watchdog dumps the flight recorder (so that `ddpbench doctor` names
// the rank behind, as for Gloo), prints one line naming the collective, and ends the whole
// job with MPI_Abort.
//
// Thread-safety: as ProcessGroup.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/host_process_group.h"

namespace ddpb::comm {

class ProcessGroupMpi final : public HostProcessGroup {
 public:
  // `rank` and `size` must be this process's in MPI_COMM_WORLD (UsageError otherwise: the
  // ranks were not started by one MPI launcher). With `members` (world ranks, this process's
  // among them) the group is theirs: a communicator split from MPI_COMM_WORLD, `rank` this
  // process's position in `members`. MPI_Comm_split is collective over the world: the ranks
  // outside call split_without_me() at the same point.
  ProcessGroupMpi(int rank, int size, const ProcessGroupOptions& options,
                  const std::vector<int>& members = {});
  // A world rank's part in a sub-group it is not in (see the constructor).
  static void split_without_me();
  ~ProcessGroupMpi() override;

  std::string backend() const override { return "mpi"; }
  // Whether CUDA tensors go to MPI as device pointers (a CUDA-aware MPI).
  bool cuda_aware() const;

 private:
  struct Mpi;  // the communicator and the watchdog, behind <mpi.h>

  void run_host(const HostCollective& collective, const HostTensors& host,
                int64_t sequence) override;
  bool takes_device_pointers() const override;
  void watch();

  std::unique_ptr<Mpi> mpi_;
};

// Whether this build has the MPI backend, and the MPI library's version ("Open MPI v4.1.4").
bool mpi_compiled_in();
std::string mpi_version();
// Whether this process was started by an MPI launcher (Open MPI's mpirun, or a PMI/PMIx one
// such as srun), so that MPI_Init joins a world of more than this process.
bool started_by_mpi_launcher();
// Ends every rank of the MPI job with `code` (MPI_Abort), when MPI is initialised and this
// job has more than one rank: a rank that fails must not leave its peers blocked in a
// collective. Returns when MPI is not in use.
void abort_mpi_job(int code);

}  // namespace ddpb::comm
