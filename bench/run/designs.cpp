#include "bench/run/designs.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include "base/text.h"

#include "bench/run/trainer.h"
#include "core/check.h"
#include "core/step_phase.h"

namespace ddpb::bench {
namespace {

std::vector<reports::DesignPhase> phases(std::initializer_list<StepPhase> list) {
  std::vector<reports::DesignPhase> out;
  for (const StepPhase p : list)
    out.push_back({step_phase_name(p), phase_kind_name(phase_kind(p))});
  return out;
}

Design single_row() {
  Design d;
  d.info = {.name = "single", .label = "single", .noun = "device"};
  d.info.phases = phases({StepPhase::Data, StepPhase::Forward, StepPhase::Backward,
                          StepPhase::Optimizer, StepPhase::Graph});
  d.make_runner = make_single_runner;
  d.pytorch_peer = "one torch.nn.Module";
  return d;
}

Design dp_row() {
  Design d;
  d.info = {.name = "dp", .label = "DP", .noun = "device", .parallel = true};
  d.info.gradient_op = "reduce";
  // reduce_add: every other device's gradients to device 0, over its link.
  d.expected_gradient_bus_bytes = [](double gradient_bytes, int world, int) {
    return gradient_bytes * (world - 1);
  };
  d.info.phases = phases({StepPhase::Data, StepPhase::Scatter, StepPhase::Replicate,
                          StepPhase::Forward, StepPhase::Gather, StepPhase::Loss,
                          StepPhase::Backward, StepPhase::Reduce, StepPhase::Optimizer});
  d.make_runner = make_dp_runner;
  d.pytorch_peer = "torch.nn.DataParallel";
  d.pytorch_peer_needs_cuda = true;
  return d;
}

Design ddp_row() {
  Design d;
  d.info = {.name = "ddp",
            .label = "DDP",
            .noun = "rank",
            .parallel = true,
            .processes_per_rank = true,
            .has_buckets = true,
            .overlaps_backward = true};
  d.info.gradient_op = "allreduce";
  // Every bucket AllReduced once: 2(n-1)/n of the gradients (the ZeRO paper's 2Ψ).
  d.expected_gradient_bus_bytes = [](double gradient_bytes, int world, int) {
    return gradient_bytes * 2.0 * (world - 1) / world;
  };
  d.info.phases =
      phases({StepPhase::Data, StepPhase::BufferBroadcast, StepPhase::Forward, StepPhase::SyncBn,
              StepPhase::BackwardCompute, StepPhase::CommExposed, StepPhase::Optimizer});
  d.make_runner = make_ddp_runner;
  d.pytorch_peer = "torch.nn.parallel.DistributedDataParallel";
  // A rank is a whole process: its communicator, store and threads (measured on CPU ranks).
  d.process_overhead_bytes = int64_t{150} << 20;
  return d;
}

// ZeRO's stages are DDP with its buckets reduce-scattered and the optimizer over this rank's
// shard (Note [ZeRO in DDP] in impl_ddp/zero_optimizer.h): DDP's runner, its own row.
Design zero_row(int stage) {
  Design d = ddp_row();
  d.info.name = "zero" + std::to_string(stage);
  d.info.label = "ZeRO-" + std::to_string(stage);
  d.info.shards_optimizer_state = true;
  d.info.shards_gradients = stage >= 2;  // Note [ZeRO gradient release]
  d.info.gradient_op = "reduce_scatter";
  d.info.phases.push_back({step_phase_name(StepPhase::ParamAllGather),
                           phase_kind_name(phase_kind(StepPhase::ParamAllGather))});
  d.zero_stage = stage;
  d.in_default_suite = false;
  d.in_sharding_group = true;
  // A reduce-scatter and an all-gather of the (padded) gradients' size: the paper's 2Ψ.
  d.expected_gradient_bus_bytes = [](double gradient_bytes, int world, int) {
    return gradient_bytes * 2.0 * (world - 1) / world;
  };
  d.pytorch_peer = "";  // ZeroRedundancyOptimizer is another scheme (issue 46, --zero-variant)
  return d;
}

// PyTorch's ZeRO-1: DDP's AllReduce, this rank's shard stepped, then broadcast from each owner
// (ZeroRedundancyOptimizer), for the paper's scheme to be measured against on one runtime.
Design zero_pytorch_row() {
  Design d = zero_row(1);
  d.info.name = "zero1-pytorch";
  d.info.label = "ZeRO-1 (PyTorch's)";
  d.info.overlaps_backward = true;  // DDP's overlapped AllReduce
  d.info.gradient_op = "allreduce";
  d.info.phases.back() = {step_phase_name(StepPhase::ParamBroadcast),
                          phase_kind_name(phase_kind(StepPhase::ParamBroadcast))};
  d.zero_broadcast = true;
  // The AllReduce's 2(n-1)/n, and every parameter broadcast once from its owner.
  d.expected_gradient_bus_bytes = [](double gradient_bytes, int world, int) {
    return gradient_bytes * (2.0 * (world - 1) / world + (world > 1 ? 1.0 : 0.0));
  };
  return d;
}

// FSDP's strategies are rows of one runner, as ZeRO's stages are (Note [FSDP's step] in
// impl_fsdp/fully_sharded_data_parallel.h): every rank holds its shard of each unit's
// parameters, gradients and optimizer state, but for no_shard, which is DDP's arithmetic.
Design fsdp_row(fsdp::ShardingStrategy strategy, const char* name, const char* label) {
  using fsdp::ShardingStrategy;
  const bool sharded = strategy != ShardingStrategy::NoShard;
  Design d;
  d.info = {.name = name,
            .label = label,
            .noun = "rank",
            .parallel = true,
            .processes_per_rank = true,
            .overlaps_backward = true,
            .shards_parameters = sharded,
            .shards_gradients = sharded,
            .shards_optimizer_state = sharded};
  d.info.gradient_op = sharded ? "reduce_scatter" : "allreduce";
  // param_allgather: the host's waits for gathers inside forward and backward, taken out of
  // those phases (what prefetch did not hide); sync_bn, SyncBatchNorm's collectives, as DDP's.
  d.info.phases = phases({StepPhase::Data, StepPhase::BufferBroadcast, StepPhase::Forward,
                          StepPhase::ParamAllGather, StepPhase::SyncBn, StepPhase::BackwardCompute,
                          StepPhase::CommExposed, StepPhase::Optimizer});
  d.make_runner = make_fsdp_runner;
  d.sharding_strategy = strategy;
  d.in_default_suite = false;
  d.in_sharding_group = strategy != fsdp::ShardingStrategy::HybridShard;
  d.process_overhead_bytes = int64_t{150} << 20;  // a rank is a whole process, as DDP's
  switch (strategy) {
    case ShardingStrategy::FullShard:
      // Two all-gathers (forward, backward) and a reduce-scatter: the ZeRO paper's 3Ψ.
      d.expected_gradient_bus_bytes = [](double gradient_bytes, int world, int) {
        return gradient_bytes * 3.0 * (world - 1) / world;
      };
      break;
    case ShardingStrategy::HybridShard:
      // full_shard's 3Ψ within a shard group of g, then each shard's Ψ/g all-reduced over the
      // r = world/g ranks holding it: 3Ψ(g-1)/g + 2(Ψ/g)(r-1)/r.
      d.expected_gradient_bus_bytes = [](double gradient_bytes, int world, int shard_ranks) {
        const double g = std::max(1, shard_ranks), r = world / g;
        return gradient_bytes * 3.0 * (g - 1) / g + 2.0 * gradient_bytes / g * (r - 1) / r;
      };
      break;
    case ShardingStrategy::ShardGradOp:
    case ShardingStrategy::NoShard:
      // One all-gather and a reduce-scatter (shard_grad_op keeps the units gathered from
      // forward to backward), or no_shard's AllReduce: 2Ψ.
      d.expected_gradient_bus_bytes = [](double gradient_bytes, int world, int) {
        return gradient_bytes * 2.0 * (world - 1) / world;
      };
      break;
  }
  // scripts/peer/torch_reference.py --mode fsdp* runs FSDP2 (fully_shard, PyTorch >= 2.4); on
  // Debian's 1.13 it skips in one line (exit 3), which the suite records as skipped.
  d.pytorch_peer = "torch.distributed.fsdp.fully_shard (FSDP2)";
  return d;
}

std::deque<Design>& table() {
  using fsdp::ShardingStrategy;
  static std::deque<Design> rows = {
      single_row(),
      dp_row(),
      ddp_row(),
      zero_row(1),
      zero_row(2),
      zero_pytorch_row(),
      fsdp_row(ShardingStrategy::FullShard, "fsdp", "FSDP"),
      fsdp_row(ShardingStrategy::ShardGradOp, "fsdp-grad-op", "FSDP (shard_grad_op)"),
      fsdp_row(ShardingStrategy::NoShard, "fsdp-no-shard", "FSDP (no_shard)"),
      fsdp_row(ShardingStrategy::HybridShard, "fsdp-hybrid", "FSDP (hybrid_shard)")};
  return rows;
}

}  // namespace

const std::deque<Design>& designs() {
  return table();
}

const Design& design_named(std::string_view name) {
  for (const Design& d : table())
    if (d.info.name == name) return d;
  throw UsageError("--mode must be " + design_names() + ", got '" + std::string(name) + "'");
}

std::string design_names(bool reports::DesignInfo::*trait) {
  std::vector<std::string> names;
  for (const Design& d : table())
    if (!trait || d.info.*trait) names.push_back(d.info.name);
  return join_list(names, "or");
}

std::string design_names_of_runner(MakeRunner make_runner) {
  std::vector<std::string> names;
  for (const Design& d : table())
    if (d.make_runner == make_runner) names.push_back(d.info.name);
  return join_list(names, "or");
}

std::vector<std::string> design_names_in_order(bool default_suite) {
  std::vector<std::string> out;
  for (const Design& d : table())
    if (!default_suite || d.in_default_suite) out.push_back(d.info.name);
  return out;
}

void resolve_zero_stage(RunConfig& config) {
  const Design& design = design_named(config.mode);
  if (config.zero_stage == 0 && !config.zero_pytorch) {  // the row says it, or plain DDP
    config.zero_stage = design.zero_stage;
    config.zero_pytorch = design.zero_broadcast;
    return;
  }
  if (config.zero_stage == design.zero_stage && config.zero_pytorch == design.zero_broadcast)
    return;
  const std::string asked = "--zero-stage " + std::to_string(config.zero_stage) +
                            (config.zero_pytorch ? " --zero-variant pytorch" : "");
  DDPB_USAGE_CHECK(design.zero_stage == 0)
      << "--mode " << config.mode << " is ZeRO stage " << design.zero_stage
      << (design.zero_broadcast ? " in PyTorch's variant" : "") << ", not " << asked;
  for (const Design& d : table()) {
    if (d.make_runner == design.make_runner && d.zero_stage == config.zero_stage &&
        d.zero_broadcast == config.zero_pytorch && d.zero_stage > 0) {
      config.mode = d.info.name;
      return;
    }
  }
  throw UsageError(asked + " is not a stage of --mode " + config.mode +
                   " (DDP has stages 1 and 2, and PyTorch's variant of stage 1)");
}

void resolve_sharding_strategy(RunConfig& config) {
  const Design& design = design_named(config.mode);
  const auto& asked = config.sharding_strategy;
  if (!design.sharding_strategy) {
    DDPB_USAGE_CHECK(!asked) << "--sharding-strategy is FSDP's: use --mode "
                             << design_names_of_runner(make_fsdp_runner) << ", not --mode "
                             << config.mode;
    return;
  }
  if (!asked || *asked == *design.sharding_strategy) {  // the row says it
    config.sharding_strategy = design.sharding_strategy;
    return;
  }
  // --mode fsdp names the default strategy: the flag picks its row; any other row names its own.
  DDPB_USAGE_CHECK(design.sharding_strategy == fsdp::ShardingStrategy::FullShard)
      << "--mode " << config.mode << " is FSDP's " << enum_name(*design.sharding_strategy)
      << ", not --sharding-strategy " << enum_name(*asked);
  for (const Design& d : table()) {
    if (d.make_runner == design.make_runner && d.sharding_strategy == asked) {
      config.mode = d.info.name;
      return;
    }
  }
  throw UsageError("--sharding-strategy " + std::string(enum_name(*asked)) +
                   " has no row of --mode " + config.mode);
}

void register_design(Design design) {
  // The name goes into run ids and file stems ("<workload>/<mode>/w<N>").
  const std::string& name = design.info.name;
  DDPB_USAGE_CHECK(!name.empty() && name.size() <= 32 &&
                   std::all_of(name.begin(), name.end(),
                               [](char c) {
                                 return std::isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                                        c == '_' || c == '-';
                               }))
      << "a design's name is 1 to 32 letters, digits, '.', '_' or '-', not '" << name << "'";
  for (const Design& d : table())
    DDPB_USAGE_CHECK(d.info.name != design.info.name)
        << "a design named '" << design.info.name << "' exists already";
  table().push_back(std::move(design));
}

}  // namespace ddpb::bench
