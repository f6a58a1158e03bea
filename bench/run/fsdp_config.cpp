#include "bench/run/fsdp_config.h"

#include <fmt/core.h>

#include <map>
#include <string>

#include "bench/run/ddp_config.h"
#include "bench/run/step_outcome.h"
#include "core/check.h"
#include "workloads/family.h"

namespace ddpb::bench {

using fsdp::ShardingStrategy;

fsdp::FsdpOptions fsdp_options(const RunConfig& config) {
  fsdp::FsdpOptions o;
  DDPB_CHECK(config.sharding_strategy) << "--mode " << config.mode << " has no sharding strategy";
  o.strategy = *config.sharding_strategy;
  o.forward_prefetch = config.forward_prefetch;
  o.backward_prefetch = config.backward_prefetch;
  o.limit_all_gathers = config.limit_all_gathers;
  o.broadcast_buffers = config.broadcast_buffers;
  o.sync_batch_norm = config.sync_bn;
  return o;
}

int shard_group_size(const RunConfig& config, const comm::RankEnv& env) {
  switch (*config.sharding_strategy) {
    case ShardingStrategy::FullShard:
    case ShardingStrategy::ShardGradOp:
      return env.world_size;
    case ShardingStrategy::NoShard:
      return 1;
    case ShardingStrategy::HybridShard:
      break;
  }
  const int size = config.shard_group_size > 0 ? config.shard_group_size
                   : env.local_world_size > 0  ? env.local_world_size
                                               : env.world_size;
  DDPB_USAGE_CHECK(env.world_size % size == 0)
      << "hybrid_shard: shard groups of " << size << " ranks do not divide the world of "
      << env.world_size << " (--shard-group-size)";
  return size;
}

fsdp::FsdpGroups fsdp_groups(const RunConfig& config, const RankProcess& process,
                             std::shared_ptr<comm::ProcessGroup> world) {
  const int n = process.world_size(), size = shard_group_size(config, process.env());
  fsdp::FsdpGroups groups;
  groups.world = std::move(world);
  if (size == n) {  // full_shard, shard_grad_op, or hybrid_shard over one group
    groups.shard = groups.world;
    return groups;
  }
  // Every rank makes every group in this order, and keeps the ones it is in (new_group gives
  // the others nullptr).
  for (int first = 0; first < n; first += size) {
    std::vector<int> ranks;
    for (int r = first; r < first + size; ++r) ranks.push_back(r);
    if (auto g = process.new_group(ranks)) groups.shard = std::move(g);
  }
  if (size == 1) {  // no_shard: the gradients are all-reduced over the world, as DDP's
    groups.replicate = groups.world;
    return groups;
  }
  for (int index = 0; index < size; ++index) {
    std::vector<int> ranks;
    for (int r = index; r < n; r += size) ranks.push_back(r);
    if (auto g = process.new_group(ranks)) groups.replicate = std::move(g);
  }
  return groups;
}

namespace {

// "layer2" for {"layer2.0", "layer2.1"}: the name the modules share before their last dot;
// a single module's own name; else the names joined with '+'.
std::string unit_name(const std::vector<std::string>& modules) {
  if (modules.size() == 1) return modules.front();
  const std::string stage = modules.front().substr(0, modules.front().rfind('.'));
  for (const std::string& m : modules)
    if (m.rfind('.') == std::string::npos || m.substr(0, m.rfind('.')) != stage) {
      std::string joined;
      for (const std::string& each : modules) joined += (joined.empty() ? "" : "+") + each;
      return joined;
    }
  return stage;
}

}  // namespace

std::vector<fsdp::FsdpUnitSpec> fsdp_units(const RunConfig& config, const WorkloadSpec& spec,
                                           Model& model) {
  if (config.fsdp_wrap == FsdpWrap::Model) return {};
  std::map<std::string, nn::Module*> by_name;
  for (auto& [name, module] : model.named_modules()) by_name.emplace(name, module);
  std::vector<fsdp::FsdpUnitSpec> units;
  for (const std::vector<std::string>& block : family_of(spec).blocks(spec)) {
    fsdp::FsdpUnitSpec unit{unit_name(block), {}};
    for (const std::string& name : block) {
      const auto it = by_name.find(name);
      DDPB_CHECK(it != by_name.end()) << spec.family << "'s blocks name '" << name << "', which "
                                      << spec.name << " has no module of";
      unit.modules.push_back(it->second);
    }
    units.push_back(std::move(unit));
  }
  return units;
}

StepOutcome fsdp_step_outcome(const fsdp::FsdpStepStats& s, int world_size, int rank) {
  StepOutcome out = step_outcome(s, world_size);
  reports::StepModeData& m = *out.mode;
  m.rank = rank;
  if (s.buffer_broadcast_bytes >= 0)
    m.extra.value["buffer_broadcast_bytes"] = s.buffer_broadcast_bytes;
  m.extra.value["limiter_waits"] = s.limiter_waits;
  m.extra.value["exposed_gather_forward_ms"] = s.exposed_gather_forward_ms;
  m.extra.value["exposed_gather_backward_ms"] = s.exposed_gather_backward_ms;
  m.extra.value["exposed_reduce_scatter_ms"] = s.exposed_reduce_scatter_ms;
  if (s.sync_batch_norm) add_sync_bn_totals(s.sync_bn, out);
  return out;
}

nlohmann::json fsdp_mode_details(const RunConfig& config, const comm::RankEnv& env,
                                 const fsdp::FullyShardedDataParallel& fsdp, bool has_buffers) {
  nlohmann::json units = nlohmann::json::array();
  for (size_t i = 0; i < fsdp.units().size(); ++i) {
    const fsdp::FlatParamUnit& u = *fsdp.units()[i];
    units.push_back({{"name", fsdp.unit_names()[i]},
                     {"parameters", u.params().size()},
                     {"numel", u.numel()},
                     {"padded_numel", u.padded_numel()},
                     {"shard_numel", u.shard_numel()}});
  }
  const fsdp::FsdpGroups& groups = fsdp.groups();
  const fsdp::FsdpOptions& o = fsdp.options();
  return {{"sharding_strategy", enum_name(o.strategy)},
          {"fsdp_wrap", enum_name(config.fsdp_wrap)},
          {"units", std::move(units)},
          {"shard_group_size", groups.shard->size()},
          {"replicate_group_size", groups.replicate ? groups.replicate->size() : 1},
          {"limit_all_gathers", o.limit_all_gathers},
          {"forward_prefetch", o.forward_prefetch},
          {"backward_prefetch", o.backward_prefetch},
          {"backend", groups.world->backend()},
          {"buffers", buffer_semantics(config, has_buffers)},
          {"world_size", env.world_size},
          {"launcher", env.source}};
}

}  // namespace ddpb::bench
