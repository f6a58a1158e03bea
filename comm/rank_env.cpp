#include "comm/rank_env.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <string_view>

#include "core/check.h"

namespace ddpb::comm {
namespace {

std::optional<int> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  int out = 0;
  std::string_view s(v);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  DDPB_USAGE_CHECK(ec == std::errc() && end == s.data() + s.size())
      << "environment variable " << name << "='" << v << "' is not an integer";
  return out;
}

std::string env_str(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

}  // namespace

std::optional<RankEnv> detect_rank_env() {
  struct Scheme {
    const char *rank, *size, *local, *local_size, *source;
  };
  const Scheme schemes[] = {
      {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "torchrun"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE", "mpirun"},
      {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "", "slurm"},
  };
  // Issue 48, P7: torchrun's variables left in the environment of ranks that mpirun starts
  // (or the other way round) once made every rank "rank 3 of 5" by the first scheme, and the
  // world waited out its timeout. Two launchers' variables that disagree are a usage error
  // naming both. (Slurm's stay out of it: an mpirun inside an allocation inherits the batch
  // step's, which describe the allocation, not this rank.)
  const auto torchrun_rank = env_int("RANK"), torchrun_size = env_int("WORLD_SIZE");
  const auto mpi_rank = env_int("OMPI_COMM_WORLD_RANK"), mpi_size = env_int("OMPI_COMM_WORLD_SIZE");
  DDPB_USAGE_CHECK(!(torchrun_rank && torchrun_size && mpi_rank && mpi_size) ||
                   (*torchrun_rank == *mpi_rank && *torchrun_size == *mpi_size))
      << "RANK=" << *torchrun_rank << " WORLD_SIZE=" << *torchrun_size
      << " (torchrun's variables) and OMPI_COMM_WORLD_RANK=" << *mpi_rank
      << " OMPI_COMM_WORLD_SIZE=" << *mpi_size
      << " (mpirun's) disagree: start ddpbench's ranks with one launcher, or unset the other's";
  for (const auto& s : schemes) {
    auto rank = env_int(s.rank);
    auto size = env_int(s.size);
    if (!rank || !size) continue;
    RankEnv e;
    e.rank = *rank;
    e.world_size = *size;
    e.local_rank = env_int(s.local).value_or(0);
    // Node blocks of ranks only where the launcher places them so (torchrun and ddpbench's own:
    // node r holds ranks r*k .. r*k+k-1); mpirun's mapping may interleave them.
    if (s.source == std::string("torchrun")) {
      const int local = env_int(s.local_size).value_or(0);
      if (local > 0 && local <= *size && *size % local == 0) e.local_world_size = local;
    }
    e.source = s.source;
    if (e.source == std::string("torchrun") && env_str("DDPBENCH_LAUNCHER", "") == "ddpbench")
      e.source = "ddpbench";
    e.master_addr = env_str("MASTER_ADDR", "127.0.0.1");
    auto port = env_int("MASTER_PORT");
    DDPB_USAGE_CHECK(port && *port > 0 && *port < 65536)
        << "started as rank " << e.rank << " by " << e.source
        << " but MASTER_PORT is not set to a port number";
    e.master_port = *port;
    e.token = env_str("DDPBENCH_STORE_TOKEN", "");
    DDPB_USAGE_CHECK(e.world_size >= 1 && e.world_size <= kMaxEnvWorldSize)
        << s.size << "=" << e.world_size << " (" << e.source
        << "): the world size must be from 1 to " << kMaxEnvWorldSize;
    DDPB_USAGE_CHECK(e.rank >= 0 && e.rank < e.world_size)
        << "rank " << e.rank << " outside a world of " << e.world_size << " (" << e.source << ")";
    DDPB_USAGE_CHECK(e.local_rank >= 0 && e.local_rank < e.world_size)
        << s.local << "=" << e.local_rank << " (" << e.source
        << "): a local rank must be from 0 to " << e.world_size - 1 << ", the world size less one";
    return e;
  }
  return std::nullopt;
}

namespace {

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

}  // namespace

bool follow_launcher(const RankEnv& env) {
  const bool real =
      (env.source == "mpirun" && (env_set("PMIX_RANK") || env_set("OMPI_MCA_ess_base_jobid"))) ||
      (env.source == "slurm" && env_set("SLURM_JOB_ID") && env_set("SLURM_STEP_ID")) ||
      (env.source == "torchrun" && env_set("TORCHELASTIC_RUN_ID"));
  if (!real) return false;
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  return true;
}

}  // namespace ddpb::comm
