#include "bench/run/ddp_config.h"

#include <fmt/core.h>

#include <vector>

#include "bench/measure/context.h"
#include "comm/flight_recorder.h"
#include "comm/tcp_store.h"
#include "core/check.h"
#include "core/rng.h"
#include "reports/json_io.h"

namespace ddpb::bench {

Device ddp_rank_device(const RunConfig& c, const comm::RankEnv& env) {
  if (!c.devices.empty()) {
    std::vector<std::string> items;
    size_t start = 0;
    while (start <= c.devices.size()) {
      size_t comma = c.devices.find(',', start);
      items.push_back(c.devices.substr(start, comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    DDPB_USAGE_CHECK(static_cast<int>(items.size()) == env.world_size)
        << "--devices lists " << items.size() << " devices for " << env.world_size << " ranks";
    return parse_device(items[static_cast<size_t>(env.rank)]);
  }
  Device base = parse_device(c.device);
  return {base.type, env.local_rank};
}

std::string job_identity(const RunConfig& c, const comm::RankEnv& env) {
  const std::string text = reports::json_text(c.to_json()) + "|" + std::to_string(env.master_port);
  return fmt::format("{:016x}", hash_name(text.c_str()));
}

std::string default_flight_dir(const RunConfig& c, const comm::RankEnv& env) {
  if (!c.flight_dir.empty()) return c.flight_dir;
  std::string note;
  const std::string dir = comm::resolve_flight_dir(env.master_port, &note);
  if (!note.empty()) fmt::print(stderr, "ddpbench: rank {}: {}\n", env.rank, note);
  return dir;
}

std::string flight_job(const RunConfig& c, const comm::RankEnv& env) {
  return comm::flight_job_id(comm::store_token_from_env(job_identity(c, env)));
}

namespace {

// The configuration keys that may differ between ranks: where each writes (only rank 0 does),
// and the flag world size, which a launcher's WORLD_SIZE replaces (compared as such).
bool per_rank_key(const std::string& key) {
  for (const char* k : {"out", "trace", "trace_steps", "dump", "init_from", "save_params",
                        "flight_dir", "world_size"}) {
    if (key == k) return true;
  }
  return false;
}

void flatten(const nlohmann::json& j, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>& out) {
  for (const auto& [key, value] : j.items()) {
    if (prefix.empty() && per_rank_key(key)) continue;
    if (value.is_object()) {
      flatten(value, prefix + key + ".", out);
    } else {
      out.emplace_back(prefix + key, value.is_string() ? value.get<std::string>() : value.dump());
    }
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> training_fingerprint(const RunConfig& config,
                                                                      const comm::RankEnv& env) {
  std::vector<std::pair<std::string, std::string>> f = {
      {"WORLD_SIZE", std::to_string(env.world_size)},
      {"ddpbench version", ddpbench_version()},
      {"git commit", git_commit()}};
  flatten(config.to_json(), "", f);
  return f;
}

comm::RendezvousOptions rendezvous_options(const RunConfig& config, const comm::RankEnv& env,
                                           const Device& device) {
  comm::RendezvousOptions o;
  o.backend = config.backend;
  o.device = device;
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(config.timeout_s * 1000));
  o.job_identity = job_identity(config, env);
  o.init_method = config.rendezvous;
  o.fingerprint = training_fingerprint(config, env);
  return o;
}

ddp::DdpOptions ddp_options(const RunConfig& config) {
  ddp::DdpOptions o;
  o.reducer.first_bucket_bytes = static_cast<size_t>(config.first_bucket_mb * 1048576.0);
  o.reducer.bucket_bytes = static_cast<size_t>(config.bucket_cap_mb * 1048576.0);
  o.reducer.grad_as_bucket_view = config.grad_as_bucket_view;
  o.reducer.find_unused_parameters = config.find_unused_params;
  o.reducer.static_graph = config.static_graph;
  o.reducer.overlap = !config.no_overlap;
  o.reducer.comm_hook = config.comm_hook;
  o.reducer.powersgd = config.powersgd;
  o.reducer.powersgd.seed = config.seed;
  o.reducer.powersgd.keep_random_q = !config.dump.empty();
  o.reducer.check_finite = config.check_finite;
  o.broadcast_buffers = config.broadcast_buffers;
  o.sync_batch_norm = config.sync_bn;
  o.join = {config.uneven_join, config.join_divide_by_initial_world_size};
  return o;
}

std::unique_ptr<WarmupBucketSearch> make_ddp_bucket_search(ddp::DistributedDataParallel& ddp,
                                                           const nn::Module& model) {
  double gradient_bytes = 0;
  for (auto& p : model.parameters()) gradient_bytes += static_cast<double>(p.data().nbytes());
  const Device device = model.parameters().front().data().device();
  return std::make_unique<WarmupBucketSearch>(
      gradient_bytes / 1048576.0,
      [&ddp](double mb) {
        ddp.reducer().set_bucket_cap(static_cast<size_t>(mb * 1048576.0));
        return ddp.reducer().layout().dump();
      },
      [&ddp, device](double value) {  // rank 0's value on every rank
        Tensor t = Tensor::from_floats({static_cast<float>(value)}, {1}, device);
        ddp.process_group().broadcast(t, /*root=*/0)->wait();
        return static_cast<double>(t.item());
      });
}

std::string buffer_semantics(const RunConfig& config, bool has_buffers) {
  if (!has_buffers) return "none";
  if (config.sync_bn) return "SyncBatchNorm: statistics of the global batch on every rank";
  return config.broadcast_buffers
             ? "broadcast from rank 0 before every step (PyTorch's broadcast_buffers=True)"
             : "each rank keeps its own (broadcast_buffers=False); the end-of-run check "
               "compares parameters only";
}

nlohmann::json ddp_mode_details(const RunConfig& config, const comm::RankEnv& env,
                                const ddp::DistributedDataParallel& ddp, bool has_buffers,
                                const WarmupBucketSearch* search) {
  const ddp::Reducer& reducer = ddp.reducer();
  nlohmann::json details = {{"backend", ddp.process_group().backend()},
                            {"buffers", buffer_semantics(config, has_buffers)},
                            {"world_size", env.world_size},
                            {"launcher", env.source},
                            {"buckets_initial", reducer.initial_layout()},
                            {"buckets_rebuilt", reducer.layout()},
                            {"rebuilt", reducer.rebuilt()}};
  if (search) details["bucket_autotune"] = search->tuner().to_json();
  return details;
}

}  // namespace ddpb::bench
