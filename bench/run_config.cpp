#include "bench/run_config.h"

#include "core/check.h"
#include "workloads/model.h"

namespace ddpb::bench {

void RunConfig::validate() const {
  DDPB_USAGE_CHECK(mode == "single" || mode == "dp")
      << "--mode " << mode << " is not available yet (this build supports: single, dp)";
  DDPB_USAGE_CHECK(world_size >= 1) << "--world-size must be positive, got " << world_size;
  DDPB_USAGE_CHECK(mode != "single" || (world_size == 1 && devices.empty()))
      << "--mode single runs on one device: drop --world-size/--devices or use --mode dp";
  find_workload(workload);  // throws UsageError for an unknown preset
  DDPB_USAGE_CHECK(global_batch > 0) << "--global-batch must be positive, got " << global_batch;
  DDPB_USAGE_CHECK(steps > 0) << "--steps must be positive, got " << steps;
  DDPB_USAGE_CHECK(warmup >= 0) << "--warmup must be >= 0, got " << warmup;
  DDPB_USAGE_CHECK(math == "fp32" || math == "tf32")
      << "--math must be fp32 or tf32, got " << math;
}

nlohmann::json RunConfig::to_json() const {
  return {{"mode", mode},
          {"workload", workload},
          {"device", device},
          {"world_size", world_size},
          {"devices", devices},
          {"dp_broadcast_mb", dp_broadcast_mb},
          {"global_batch", global_batch},
          {"steps", steps},
          {"warmup", warmup},
          {"seed", seed},
          {"math", math},
          {"optimizer",
           {{"name", optimizer.name},
            {"lr", optimizer.lr},
            {"momentum", optimizer.momentum},
            {"weight_decay", optimizer.weight_decay},
            {"beta1", optimizer.beta1},
            {"beta2", optimizer.beta2},
            {"eps", optimizer.eps},
            {"nesterov", false},
            {"dampening", 0.0}}},
          {"out", out},
          {"dump", dump},
          {"init_from", init_from}};
}

int64_t default_global_batch(const std::string& workload) {
  switch (find_workload(workload).family) {
    case Family::Mlp: return 64;
    case Family::Gpt: return 8;
    case Family::Embed: return 64;
  }
  return 64;
}

}  // namespace ddpb::bench
