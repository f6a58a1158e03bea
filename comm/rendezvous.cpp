#include "comm/rendezvous.h"

#include <filesystem>
#include <string_view>

#include "comm/file_store.h"
#include "comm/tcp_store.h"
#include "core/check.h"
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

namespace {

constexpr std::string_view kEnvMethod = "env://", kFileMethod = "file://";

std::shared_ptr<Store> rendezvous_store(const RankEnv& env, const RendezvousOptions& o) {
  check_init_method(o.init_method);
  if (o.init_method == kEnvMethod) return make_store_from_env(env.rank, o.timeout, o.job_identity);
  auto file = std::make_shared<FileStore>(o.init_method.substr(kFileMethod.size()), env.world_size);
  file->set_timeout(o.timeout);
  return std::make_shared<PrefixStore>("job/" + o.job_identity + "/", std::move(file));
}

}  // namespace

void check_init_method(const std::string& m) {
  if (m == kEnvMethod) return;
  DDPB_USAGE_CHECK(m.starts_with(kFileMethod) && m.size() > kFileMethod.size())
      << "--rendezvous must be env:// or file://PATH, got '" << m << "'";
  const std::filesystem::path path(m.substr(kFileMethod.size()));
  const auto folder = std::filesystem::absolute(path).parent_path();
  DDPB_USAGE_CHECK(std::filesystem::is_directory(folder))
      << "--rendezvous " << m << ": the folder " << folder.string() << " does not exist";
}

Rendezvous init_process_group(const RankEnv& env, const RendezvousOptions& options) {
  Rendezvous r;
  r.env = env;
  r.store = rendezvous_store(env, options);
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
