// The launcher through Open MPI's mpirun, for `--backend mpi` started without an MPI
// launcher: MPI ranks must be mpirun's children, so ddpbench starts one mpirun that starts the
// ranks (with the store's MASTER_ADDR, MASTER_PORT, token and flight-recorder folder passed on
// by -x), and supervises it as comm/launcher.h supervises its own ranks: every rank's line is
// printed with a "[rank k] " prefix (mpirun's --tag-output says whose it is), the rank whose
// failure caused the others' is named (Note [The first failure wins]), SIGINT or SIGTERM is
// passed to mpirun (which stops the ranks), SIGKILL after the grace period.
// Internal to comm/ (launch_local calls it for LaunchSpec::via_mpirun).
#pragma once

#include <string>

#include "comm/launcher.h"

namespace ddpb::comm {

// `port` and `token`: the store's, chosen by launch_local. Throws UsageError when mpirun is
// not installed or the job spans several nodes (those start their ranks with mpirun or srun
// themselves: scripts/cluster/).
LaunchResult launch_mpirun(const LaunchSpec& spec, int port, const std::string& token);

// The absolute path of `program` on $PATH, in the real path of its folder ("/bin/mpirun" is
// "/usr/bin/mpirun" where /bin links to usr/bin), or "" when it is not there.
std::string find_on_path(const std::string& program);

}  // namespace ddpb::comm
