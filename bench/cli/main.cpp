#include <cstdio>

#include "bench/cli/cli.h"
#include "comm/process_group_mpi.h"

int main(int argc, char** argv) {
  const int code = ddpb::bench::ddpbench_main(argc, argv);
  // A rank of an MPI job that fails ends the job: its peers may be blocked in a collective
  // that MPI, having no timeout, would never end (returns at once when MPI is not in use).
  if (code != 0) {
    std::fflush(stdout);
    ddpb::comm::abort_mpi_job(code);
  }
  return code;
}
