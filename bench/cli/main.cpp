#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "base/address_limit.h"
#include "base/memory_limits.h"
#include "base/process_guards.h"
#include "bench/cli/cli.h"
#include "comm/process_group_mpi.h"

namespace {

// Issue 48, P20: output that never reached its file (a full disk, /dev/full) is a failure of
// the command, said in one line, not an exit 0 over an empty file.
// A reader that left (`| head`) is not an error (Note [Output that outlives its reader]).
int check_stdout(int code) {
  // std::cout's flush is stdio's (synced): its error is said too, as `--help` into /dev/full
  // once said only "failed", the second flush finding nothing left to write.
  errno = 0;
  std::cout.flush();
  int err = std::cout.good() ? 0 : errno;
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  if (!flushed && errno != 0) err = errno;
  if (ddpb::stdout_write_error() != 0) err = ddpb::stdout_write_error();
  if (flushed && err == 0 && !std::ferror(stdout) && std::cout.good()) return code;
  std::fprintf(stderr, "ddpbench: error: writing the standard output failed%s%s\n",
               err != 0 ? ": " : "", err != 0 ? std::strerror(err) : "");
  return code != 0 ? code : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Note [OpenBLAS under an address-space limit]: before anything else, threads included.
  ddpb::restart_without_blas_workers(argv);
  const ddpb::MemoryLimits limits = ddpb::read_memory_limits();
  if (const auto problem = ddpb::address_limit_problem(limits.address_space, limits.mapped)) {
    std::fprintf(stderr, "ddpbench: error: %s\n", problem->c_str());
    return 1;
  }
  const int code = check_stdout(ddpb::bench::ddpbench_main(argc, argv));
  // A rank of an MPI job that fails ends the job: its peers may be blocked in a collective
  // that MPI, having no timeout, would never end (returns at once when MPI is not in use).
  if (code != 0) {
    std::fflush(stdout);
    ddpb::comm::abort_mpi_job(code);
  }
  return code;
}
