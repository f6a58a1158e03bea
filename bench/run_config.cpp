#include "bench/run_config.h"

#include "bench/fault_injection.h"
#include "bench/trace.h"
#include "core/check.h"
#include "workloads/model.h"

namespace ddpb::bench {

void RunConfig::validate() const {
  DDPB_USAGE_CHECK(mode == "single" || mode == "dp" || mode == "ddp")
      << "--mode must be single, dp or ddp, got " << mode;
  if (mode == "ddp") {
    DDPB_USAGE_CHECK(global_batch % world_size == 0)
        << "--global-batch " << global_batch << " does not divide into --world-size " << world_size
        << " ranks (DDP gives every rank global-batch/world-size samples)";
    DDPB_USAGE_CHECK(bucket_cap_mb > 0 && first_bucket_mb > 0)
        << "--bucket-cap-mb and --first-bucket-mb must be positive";
    DDPB_USAGE_CHECK(accumulate >= 1) << "--accumulate must be >= 1, got " << accumulate;
    DDPB_USAGE_CHECK(backend.empty() || backend == "gloo" || backend == "nccl")
        << "--backend must be gloo or nccl, got " << backend;
    DDPB_USAGE_CHECK(comm_hook == "none" || comm_hook == "fp16" || comm_hook == "bf16")
        << "--comm-hook must be none, fp16 or bf16, got " << comm_hook;
    DDPB_USAGE_CHECK(timeout_s > 0) << "--timeout must be positive";
    parse_fault(inject_fault);  // validates
  } else {
    DDPB_USAGE_CHECK(accumulate == 1 && !grad_as_bucket_view && !find_unused_params &&
                     !no_overlap && comm_hook == "none" && backend.empty() && inject_fault.empty())
        << "DDP options (--backend, --accumulate, --grad-as-bucket-view, --find-unused-params, "
           "--comm-hook, --no-overlap, --inject-fault) need --mode ddp";
  }
  DDPB_USAGE_CHECK(world_size >= 1) << "--world-size must be positive, got " << world_size;
  DDPB_USAGE_CHECK(mode != "single" || (world_size == 1 && devices.empty()))
      << "--mode single runs on one device: drop --world-size/--devices or use --mode dp";
  find_workload(workload);  // throws UsageError for an unknown preset
  DDPB_USAGE_CHECK(global_batch > 0) << "--global-batch must be positive, got " << global_batch;
  DDPB_USAGE_CHECK(steps > 0) << "--steps must be positive, got " << steps;
  DDPB_USAGE_CHECK(warmup >= 0) << "--warmup must be >= 0, got " << warmup;
  parse_trace_steps(trace_steps);       // validates
  math_mode_from_name(precision);       // validates
  attention_kind_from_name(attention);  // validates
  if (cuda_graph) {
    // What a replay cannot redo: another process's or device's part (DP/DDP), a step count
    // baked into the kernel arguments (AdamW's bias correction), control flow that depends
    // on the data (mlp-skip's branch).
    DDPB_USAGE_CHECK(mode == "single")
        << "--cuda-graph captures a single-device step; use --mode single";
    DDPB_USAGE_CHECK(optimizer.name == "sgd")
        << "--cuda-graph needs --optimizer sgd (AdamW's step count would be frozen into the graph)";
    DDPB_USAGE_CHECK(!find_workload(workload).conditional_branch)
        << "--cuda-graph cannot capture " << workload
        << ": its forward takes a branch that depends on the data";
  }
}

ops::MathMode math_mode_from_name(const std::string& precision) {
  const auto mode = ops::math_mode_named(precision);
  DDPB_USAGE_CHECK(mode.has_value()) << "--precision must be fp32, tf32 or bf16, got " << precision;
  return *mode;
}

ops::AttentionKind attention_kind_from_name(const std::string& attention) {
  const auto kind = ops::attention_kind_named(attention);
  DDPB_USAGE_CHECK(kind.has_value()) << "--attention must be math or flash, got " << attention;
  return *kind;
}

nlohmann::json RunConfig::to_json() const {
  return {{"mode", mode},
          {"workload", workload},
          {"device", device},
          {"world_size", world_size},
          {"devices", devices},
          {"dp_broadcast_mb", dp_broadcast_mb},
          {"backend", backend},
          {"bucket_cap_mb", bucket_cap_mb},
          {"first_bucket_mb", first_bucket_mb},
          {"grad_as_bucket_view", grad_as_bucket_view},
          {"accumulate", accumulate},
          {"find_unused_params", find_unused_params},
          {"comm_hook", comm_hook},
          {"no_overlap", no_overlap},
          {"broadcast_buffers", broadcast_buffers},
          {"timeout_s", timeout_s},
          {"inject_fault", inject_fault},
          {"flight_dir", flight_dir},
          {"check_finite", check_finite},
          {"global_batch", global_batch},
          {"steps", steps},
          {"warmup", warmup},
          {"seed", seed},
          {"precision", precision},
          {"attention", attention},
          {"cuda_graph", cuda_graph},
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
          {"trace", trace},
          {"trace_steps", trace_steps},
          {"dump", dump},
          {"init_from", init_from},
          {"save_params", save_params}};
}

}  // namespace ddpb::bench
