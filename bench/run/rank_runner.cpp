#include "bench/run/rank_runner.h"

#include "core/memory_category.h"

namespace ddpb::bench {

ProcessRankRunner::ProcessRankRunner(const RunConfig& config, const WorkloadSpec& spec)
    : config_(config),
      fault_(parse_fault(config.inject_fault)),
      process_(config),
      env_(process_.env()),
      device_(process_.device()) {
  DeviceGuard guard(device_);
  MemoryCategoryScope parameters(MemoryCategory::Parameters);
  model_ = make_model(spec, device_, config.seed);
}

}  // namespace ddpb::bench
