#include "bench/run/rank_process.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "bench/measure/context.h"
#include "bench/measure/metrics.h"
#include "bench/run/designs.h"
#include "bench/run/fsdp_config.h"
#include "comm/flight_recorder.h"
#include "comm/tcp_store.h"
#include "core/check.h"
#include "core/rng.h"
#include "reports/json_io.h"
#include "reports/report_util.h"

namespace ddpb::bench {

RankProcess::RankProcess(const RunConfig& config) {
  auto env = comm::detect_rank_env();
  DDPB_CHECK(env) << "--mode " << config.mode
                  << " runs as a rank of a launcher (RANK/WORLD_SIZE not set)";
  env_ = *env;
  DDPB_USAGE_CHECK(env_.world_size == config.world_size || config.world_size == 1)
      << "--world-size " << config.world_size << " but the launcher started " << env_.world_size
      << " ranks";
  // The flight recorder dumps here on a timeout, a failure or a signal (comm/flight_recorder.h).
  comm::set_flight_identity(env_.rank, env_.world_size, default_flight_dir(config, env_),
                            flight_job(config, env_));
  comm::install_flight_recorder_signal_handlers();
  comm::follow_launcher(env_);  // Note [Ranks die with their launcher]: after the handlers
  device_ = rank_device(config, env_);
  require_device(device_);
  DeviceGuard guard(device_);
  comm::Rendezvous joined =
      comm::init_process_group(env_, rendezvous_options(config, env_, device_));
  store_ = std::move(joined.store);
  group_ = std::move(joined.group);
  group_options_.backend = *enum_from_name<comm::CommBackend>(group_->backend());
  group_options_.device = device_;
  group_options_.timeout = std::chrono::milliseconds(static_cast<int64_t>(config.timeout_s * 1000));
  if (!joined.bind_address.empty()) group_options_.hostname = joined.bind_address;
  clock_offset_ns_ = joined.clock_offset_ns;
  host_ = joined.host;
}

std::shared_ptr<comm::ProcessGroup> RankProcess::take_group() {
  DDPB_CHECK(group_) << "the rank's process group was taken already";
  return std::move(group_);
}

std::shared_ptr<comm::ProcessGroup> RankProcess::new_group(const std::vector<int>& ranks) const {
  DeviceGuard guard(device_);
  return comm::new_group(store_, env_.rank, env_.world_size, ranks, group_options_);
}

RunnerPlace RankProcess::place(int64_t global_batch) const {
  return {env_.rank, env_.world_size, device_,
          DataPlan{env_.world_size, env_.rank, global_batch / env_.world_size},
          "batches.rank" + std::to_string(env_.rank) + ".safetensors"};
}

std::vector<nlohmann::json> RankProcess::gather(std::string_view what,
                                                const nlohmann::json& mine) const {
  const std::string prefix = "ddpbench/" + std::string(what) + "/";
  store_->set_string(prefix + std::to_string(rank()), reports::json_text(mine));
  std::vector<nlohmann::json> all;
  if (rank() != 0) return all;
  for (int r = 0; r < world_size(); ++r)
    all.push_back(nlohmann::json::parse(store_->get_string(prefix + std::to_string(r))));
  return all;
}

namespace {

// The hosts of `ranks` in the order their first rank appears; sets each rank's node (Note
// [Hosts in records]).
std::vector<reports::HostRecord> hosts_of(std::vector<reports::RankRecord>& ranks) {
  std::vector<reports::HostRecord> hosts;
  for (reports::RankRecord& r : ranks) {
    const std::string name = r.host.value_or("");
    auto it =
        std::find_if(hosts.begin(), hosts.end(), [&](const auto& h) { return h.name == name; });
    if (it == hosts.end()) {
      hosts.push_back({name, static_cast<int64_t>(hosts.size()), {}});
      it = hosts.end() - 1;
    }
    it->ranks.push_back(r.rank);
    r.node = it->node;
  }
  return hosts;
}

}  // namespace

reports::RunRecord RankProcess::merge_records(reports::RunRecord record) const {
  reports::RankRecord mine{rank(),
                           device_.str(),
                           compute_time_ms(record.summary.phases_median_ms),
                           record.summary.step_time_ms,
                           record.summary.phases_median_ms,
                           record.memory};
  mine.host = host_;
  const std::vector<nlohmann::json> all = gather("record", reports::record_to_json(mine));
  if (rank() != 0) return record;
  std::vector<reports::RankRecord> ranks;
  std::vector<double> compute_ms;
  for (const nlohmann::json& r : all) {
    ranks.push_back(reports::record_from_json<reports::RankRecord>(r));
    compute_ms.push_back(ranks.back().compute_ms);
  }
  record.hosts = hosts_of(ranks);
  const StragglerSummary skew = straggler_summary(compute_ms);
  std::vector<reports::StragglerRecord> stragglers;
  for (const Straggler& s : skew.stragglers) {
    stragglers.push_back({s.rank, s.compute_ms, s.skew, ranks[static_cast<size_t>(s.rank)].host});
    fmt::print("straggler: {} computes {:.2f} ms a step, {:.2f}x the fastest rank\n",
               reports::rank_name(record.hosts, s.rank), s.compute_ms, s.skew);
  }
  record.ranks = std::move(ranks);
  record.summary.straggler_skew = skew.skew;
  record.summary.stragglers = std::move(stragglers);
  return record;
}

std::pair<std::vector<nlohmann::json>, std::vector<int64_t>> RankProcess::gather_trace(
    nlohmann::json mine) const {
  const nlohmann::json payload = {{"offset_ns", clock_offset_ns_}, {"events", std::move(mine)}};
  std::vector<nlohmann::json> events;
  std::vector<int64_t> offsets;
  for (nlohmann::json& p : gather("trace", payload)) {
    offsets.push_back(p["offset_ns"].get<int64_t>());
    events.push_back(std::move(p["events"]));
  }
  return {std::move(events), std::move(offsets)};
}

Device rank_device(const RunConfig& c, const comm::RankEnv& env) {
  if (!c.devices.empty()) {
    const std::vector<Device> items = parse_device_list(c.devices);
    DDPB_USAGE_CHECK(static_cast<int>(items.size()) == env.world_size)
        << "--devices lists " << items.size() << " devices for " << env.world_size << " ranks";
    return items[static_cast<size_t>(env.rank)];
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
  // Where each rank writes may differ (an external launcher's node may save and another not),
  // but for a design that shards its parameters not whether: gathering its full state dict is
  // a collective every rank must join (Note [The runner seam]).
  if (design_of(config).info.shards_parameters) {
    f.emplace_back("saves parameters", config.save_params.empty() ? "no" : "yes");
    f.emplace_back("dumps", config.dump.empty() ? "no" : "yes");
  }
  // hybrid_shard's groups come from each node's LOCAL_WORLD_SIZE where --shard-group-size is
  // not given: nodes of different sizes would build different groups and wait in each other's
  // collectives for ever.
  if (config.sharding_strategy == fsdp::ShardingStrategy::HybridShard)
    f.emplace_back("hybrid_shard's shard group size (--shard-group-size, else LOCAL_WORLD_SIZE)",
                   std::to_string(shard_group_size(config, env)));
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
  o.verbose = config.verbose;
  return o;
}

}  // namespace ddpb::bench
