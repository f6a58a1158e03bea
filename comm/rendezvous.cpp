#include "comm/rendezvous.h"

#include "comm/tcp_store.h"
#include "core/clock.h"

namespace ddpb::comm {

int64_t sync_clock(Store& store, int rank, int world_size) {
  const auto now = steady_now_ns;
  if (rank == 0) {
    for (int r = 1; r < world_size; ++r) {
      store.get("ddpbench/clock/ping/" + std::to_string(r));
      store.set_string("ddpbench/clock/pong/" + std::to_string(r), std::to_string(now()));
    }
    return 0;
  }
  const int64_t sent = now();
  store.set_string("ddpbench/clock/ping/" + std::to_string(rank), std::to_string(sent));
  const int64_t remote =
      std::stoll(store.get_string("ddpbench/clock/pong/" + std::to_string(rank)));
  const int64_t received = now();
  return remote - (sent + received) / 2;
}

Rendezvous init_process_group(const RankEnv& env, const RendezvousOptions& options) {
  Rendezvous r;
  r.env = env;
  r.store = make_store_from_env(env.rank, options.timeout, options.job_identity);
  ProcessGroupOptions pg;
  pg.backend =
      options.backend.value_or(options.device.is_cuda() ? CommBackend::Nccl : CommBackend::Gloo);
  pg.device = options.device;
  pg.timeout = options.timeout;
  pg.hostname = env.master_addr;
  r.group = make_process_group(r.store, env.rank, env.world_size, pg);
  r.clock_offset_ns = sync_clock(*r.store, env.rank, env.world_size);
  return r;
}

}  // namespace ddpb::comm
