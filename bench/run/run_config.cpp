#include "bench/run/run_config.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <span>
#include <string_view>
#include <thread>

#include "base/memory_limits.h"
#include "bench/measure/trace.h"
#include "bench/run/bucket_tuner.h"
#include "bench/run/designs.h"
#include "bench/run/fault_injection.h"
#include "bench/run/flag_values.h"
#include "bench/run/run_fields.h"
#include "bench/run/trainer.h"
#include "comm/rendezvous.h"
#include "core/check.h"
#include "data/token_shards.h"
#include "impl_ddp/powersgd_hook.h"
#include "reports/memory_model.h"
#include "workloads/family.h"
#include "workloads/model.h"

namespace ddpb::bench {

namespace {

// "--global-batch 100 does not divide into 3 ranks; 99 or 102 would".
std::string nearest_divisible(int64_t batch, int64_t ranks) {
  const int64_t below = batch / ranks * ranks;
  const int64_t above = below + ranks;
  return below >= ranks ? fmt::format("{} or {}", below, above) : fmt::format("{}", above);
}

// What one DDP rank (a process) or one DP replica (a thread) needs at least: the
// parameters, their gradients (twice: DDP's buckets and the gradient itself) and the
// optimizer state, divided among the ranks where the design shards them (Note [Model-state
// memory]), plus what the row says a process of it needs (a DDP rank's runtime, BLAS and
// Gloo: about 150 MiB on CPU).
int64_t estimated_bytes_per_device(const RunConfig& c) {
  const reports::DesignInfo& design = design_of(c).info;
  const int64_t params = estimated_parameter_count(find_workload(c.workload));
  // Momentum or not, SGD is priced with its buffer: the check errs towards refusing late.
  const double state_bytes = c.optimizer.name == "adamw" ? 8.0 : 4.0;
  const reports::NamedValues<int64_t> model_state =
      reports::expected_model_state(design, params, std::max(1, c.world_size), state_bytes);
  return design_of(c).process_overhead_bytes + reports::total_bytes(model_state) +
         reports::named_value(model_state, "gradients");
}

// Refuses a CPU run this machine cannot hold: more logical devices than kMaxCpuDevices, or
// more memory than it has (10000 ranks once forked until the machine ran out).
void check_cpu_capacity(const RunConfig& c) {
  if (c.device.rfind("cpu", 0) != 0 || !c.devices.empty()) return;
  // Issue 45: a node of a multi-node job holds its own share of the ranks, not the world.
  const int here =
      c.nnodes > 1 && c.world_size % c.nnodes == 0 ? c.world_size / c.nnodes : c.world_size;
  const std::string ranks = c.nnodes > 1 ? fmt::format(
                                               "{} ranks on this node (--world-size {} over "
                                               "--nnodes {})",
                                               here, c.world_size, c.nnodes)
                                         : fmt::format("--world-size {}", c.world_size);
  DDPB_USAGE_CHECK(here <= kMaxCpuDevices)
      << ranks << " asks for more logical CPU devices than the limit of " << kMaxCpuDevices
      << " (this machine has " << std::thread::hardware_concurrency() << " cores)";
  const int64_t need = estimated_bytes_per_device(c) * here;
  const MemoryLimits limits = read_memory_limits();
  const int64_t have = limits.available.value_or(0);
  DDPB_USAGE_CHECK(have == 0 || need <= have)
      << ranks << " of " << c.workload << " needs about " << (need >> 20)
      << " MiB, but this machine has " << (have >> 20) << " MiB available";
  // A process limit (ulimit -v, -d) too small for one process of the run: a rank that is a
  // process holds one device, single and DP all of theirs; each process maps what this one
  // maps now, at least.
  const reports::DesignInfo& design = design_of(c).info;
  const int64_t per_process = limits.mapped + estimated_bytes_per_device(c) *
                                                  (design.processes_per_rank ? 1 : c.world_size);
  const auto limit = limits.process_limit();
  DDPB_USAGE_CHECK(!limit || per_process <= *limit)
      << (design.processes_per_rank ? "each " + design.label + " " + design.noun : "this run")
      << " of " << c.workload << " needs at least " << (per_process >> 20)
      << " MiB of address space (" << (limits.mapped >> 20) << " MiB mapped at start, "
      << (estimated_bytes_per_device(c) >> 20) << " MiB per device), above the "
      << limits.describe();
}

// What a design whose ranks are processes needs (Note [Rank processes]): a batch every rank
// gets an equal share of, a collective timeout, and a fault that can fire.
void validate_ranks(const RunConfig& c) {
  DDPB_USAGE_CHECK(c.global_batch % c.world_size == 0)
      << "--global-batch " << c.global_batch << " does not divide into --world-size "
      << c.world_size << " ranks (every rank gets global-batch/world-size samples); "
      << nearest_divisible(c.global_batch, c.world_size) << " would";
  DDPB_USAGE_CHECK(c.timeout_s >= kMinTimeoutS && c.timeout_s <= kMaxTimeoutS)
      << "--timeout must be from " << kMinTimeoutS << " to " << kMaxTimeoutS << " seconds";
  const FaultSpec fault = parse_fault(c.inject_fault);
  DDPB_USAGE_CHECK(fault.kind == FaultSpec::Kind::None || fault.rank < c.world_size)
      << "--inject-fault '" << c.inject_fault << "': rank " << fault.rank
      << " is outside the world of " << c.world_size << " ranks, so it would never fire";
  DDPB_USAGE_CHECK(fault.kind == FaultSpec::Kind::None || fault.step <= c.total_steps())
      << "--inject-fault '" << c.inject_fault << "': step " << fault.step << " is past the run's "
      << c.total_steps() << " steps (warm-up included), so it would never fire";
  comm::check_init_method(c.rendezvous);
}

// DDP's reducer options, for a design with buckets.
void validate_buckets(const RunConfig& c) {
  DDPB_USAGE_CHECK(c.bucket_cap_mb > 0 && c.first_bucket_mb > 0)
      << "--bucket-cap-mb and --first-bucket-mb must be positive";
  DDPB_USAGE_CHECK(c.accumulate >= 1) << "--accumulate must be >= 1, got " << c.accumulate;
  DDPB_USAGE_CHECK(!c.bucket_cap_auto || c.warmup >= BucketCapTuner::kStepsNeeded)
      << "--bucket-cap-mb auto searches during the warm-up, which needs at least "
      << BucketCapTuner::kStepsNeeded << " steps (--warmup " << c.warmup << ")";
  DDPB_USAGE_CHECK(!c.bucket_cap_auto || !c.find_unused_params)
      << "--bucket-cap-mb auto needs the bucket order DDP fixes after its first iteration, which "
         "--find-unused-params does not fix";
  DDPB_USAGE_CHECK(c.comm_hook == ddp::CommHook::PowerSGD ||
                   c.powersgd_json() == RunConfig{}.powersgd_json())
      << "--powersgd-* options need --comm-hook powersgd";
  if (c.comm_hook == ddp::CommHook::PowerSGD) ddp::validate_powersgd_options(c.powersgd);
}

// SyncBatchNorm over the world's process group: DDP's rows (ZeRO's too) and FSDP's convert
// the model's BatchNorm layers (PyTorch's convert_sync_batchnorm), which it must have.
void validate_sync_bn(const RunConfig& c) {
  if (!c.sync_bn) return;
  DDPB_USAGE_CHECK(design_of(c).info.processes_per_rank)
      << "--sync-bn needs ranks that are processes (SyncBatchNorm over their process group): "
         "use --mode "
      << design_names(&reports::DesignInfo::processes_per_rank);
  DDPB_USAGE_CHECK(family_of(find_workload(c.workload)).traits.batch_norm)
      << "--sync-bn needs a model with BatchNorm layers (the resnet workloads), not " << c.workload;
}

// What a ZeRO stage replaces or cannot keep (Note [ZeRO in DDP]), named with both flags.
void validate_zero(const RunConfig& c) {
  const std::string stage = "--zero-stage " + std::to_string(c.zero_stage);
  DDPB_USAGE_CHECK(!c.bucket_cap_auto)
      << "--bucket-cap-mb auto rebuilds the buckets after the optimizer has stepped, which "
      << stage << " cannot do without moving optimizer state between ranks";
  if (design_of(c).zero_broadcast) return;  // PyTorch's variant keeps DDP's AllReduce
  DDPB_USAGE_CHECK(c.comm_hook == ddp::CommHook::None)
      << "--comm-hook " << enum_name(c.comm_hook) << " compresses DDP's AllReduce, which " << stage
      << " replaces with a reduce-scatter and an all-gather";
  DDPB_USAGE_CHECK(!c.grad_as_bucket_view)
      << "--grad-as-bucket-view keeps every averaged gradient in its bucket, but " << stage
      << " averages only this rank's shard";
}

// The first of `flags` that `c` gives a value other than its default, or nullptr.
const RunField* first_given(const RunConfig& c, std::span<const std::string_view> flags) {
  for (const RunField& f : run_fields()) {
    if (std::find(flags.begin(), flags.end(), f.name()) == flags.end()) continue;
    if (!f.argv(c, f, /*pinned=*/false).empty()) return &f;
  }
  return nullptr;
}

// FSDP's own flags, which no other design reads.
constexpr std::array<std::string_view, 6> kFsdpFlags = {
    "--sharding-strategy", "--fsdp-wrap",           "--shard-group-size",
    "--limit-all-gathers", "--no-forward-prefetch", "--no-backward-prefetch"};

// DDP's flags that an FSDP row has no use for.
constexpr std::array<std::string_view, 17> kDdpOnlyFlags = {"--bucket-cap-mb",
                                                            "--first-bucket-mb",
                                                            "--grad-as-bucket-view",
                                                            "--find-unused-params",
                                                            "--static-graph",
                                                            "--comm-hook",
                                                            "--powersgd-rank",
                                                            "--powersgd-start-iter",
                                                            "--powersgd-min-compression-rate",
                                                            "--powersgd-epsilon",
                                                            "--powersgd-no-error-feedback",
                                                            "--powersgd-no-warm-start",
                                                            "--no-overlap",
                                                            "--zero-stage",
                                                            "--zero-variant",
                                                            "--uneven-inputs",
                                                            "--check-finite"};

// What an FSDP row takes (Note [FSDP's step]): its own flags, --accumulate,
// --no-broadcast-buffers and --sync-bn; DDP's reducer, hooks, ZeRO and Join are refused, and
// the faults that act through DDP's Reducer.
void validate_fsdp(const RunConfig& c) {
  if (const RunField* f = first_given(c, kDdpOnlyFlags))
    throw UsageError(f->name() + " is DDP's, and --mode " + c.mode + " is FSDP (no buckets, " +
                     "hooks, ZeRO stages or Join)");
  DDPB_USAGE_CHECK(c.accumulate >= 1) << "--accumulate must be >= 1, got " << c.accumulate;
  const bool hybrid = c.sharding_strategy == fsdp::ShardingStrategy::HybridShard;
  DDPB_USAGE_CHECK(c.shard_group_size == 0 || hybrid)
      << "--shard-group-size is hybrid_shard's: use --mode fsdp-hybrid, not --mode " << c.mode;
  DDPB_USAGE_CHECK(c.shard_group_size == 0 || c.world_size % c.shard_group_size == 0)
      << "--shard-group-size " << c.shard_group_size << " does not divide --world-size "
      << c.world_size << " into shard groups";
  const FaultSpec::Kind fault = parse_fault(c.inject_fault).kind;
  DDPB_USAGE_CHECK(fault != FaultSpec::Kind::SlowBackward && fault != FaultSpec::Kind::CorruptGrad)
      << "--inject-fault '" << c.inject_fault << "' acts through DDP's Reducer; --mode " << c.mode
      << " takes crash, hang, slow, slow-data and store-drop";
}

// Inputs that would be silently ignored (issue 25, E7) are refused.
void validate_no_ignored_inputs(const RunConfig& c) {
  DDPB_USAGE_CHECK(c.trace_steps.empty() || !c.trace.empty())
      << "--trace-steps chooses the steps that --trace writes: give --trace FILE too";
  const auto [first, last] = parse_trace_steps(c.trace_steps);  // validates the syntax
  DDPB_USAGE_CHECK(c.trace_steps.empty() || first <= c.total_steps())
      << "--trace-steps '" << c.trace_steps << "' starts at step " << first << ", past the run's "
      << c.total_steps() << " steps (warm-up included): the trace would be empty";
  DDPB_USAGE_CHECK(c.optimizer.name != "adamw" ||
                   c.optimizer.momentum == optim::OptimizerConfig{}.momentum)
      << "--momentum is SGD's and --optimizer adamw would ignore it";
}

void validate_graph_capture(const RunConfig& c) {
  // What a replay cannot redo: another process's or device's part (DP/DDP), a step count
  // baked into the kernel arguments (AdamW's bias correction), control flow that depends
  // on the data (mlp-skip's branch).
  DDPB_USAGE_CHECK(!design_of(c).info.parallel)
      << "--cuda-graph captures a single-device step; use --mode single";
  DDPB_USAGE_CHECK(c.optimizer.name == "sgd")
      << "--cuda-graph needs --optimizer sgd (AdamW's step count would be frozen into the graph)";
  DDPB_USAGE_CHECK(!find_workload(c.workload).conditional_branch)
      << "--cuda-graph cannot capture " << c.workload
      << ": its forward takes a branch that depends on the data";
  DDPB_USAGE_CHECK(family_of(find_workload(c.workload)).traits.graph_capturable)
      << "--cuda-graph cannot capture " << c.workload
      << ": graph capture does not support its BatchNorm layers (their running statistics and "
         "num_batches_tracked would be updated by a replay nobody has checked)";
}

}  // namespace

// Ranges first, so that no check below divides by zero or overflows on a bad value.
// The input pipeline's options make sense together and for the workload (docs/cli.md, "Data").
static void validate_data(const RunConfig& c) {
  const WorkloadFamily& family = family_of(find_workload(c.workload));
  if (c.data.empty()) {
    DDPB_USAGE_CHECK(!c.data_format && !c.data_split && !c.normalize_on_device &&
                     c.on_bad_sample == OnBadSample::Fail)
        << "--data-format, --data-split, --normalize-on-device and --on-bad-sample are about "
           "files: give --data DIR";
    return;
  }
  DDPB_USAGE_CHECK(family.traits.files)
      << "--data: " << c.workload << " trains on synthetic data only (token shards feed the gpt "
      << "workloads, image folders the resnet ones)";
  const DataFormat format = c.data_format ? *c.data_format : detect_data_format(c.data);
  DDPB_USAGE_CHECK(format == *family.traits.files)
      << "--data " << c.data << " holds " << enum_name(format) << " data, but " << c.workload
      << " trains on " << enum_name(*family.traits.files);
  DDPB_USAGE_CHECK(!c.normalize_on_device || format == DataFormat::ImageFolder)
      << "--normalize-on-device ships image bytes: it needs an image folder";
  DDPB_USAGE_CHECK(!c.data_split || format == DataFormat::Tokens)
      << "--data-split chooses among token shards; for an image folder, give the split's own "
         "folder as --data";
  if (format == DataFormat::Tokens) {
    // Before any rank starts: the split exists, and meta.pkl fits the model (Note [Token
    // splits]).
    select_token_shards(c.data, c.data_split);
    check_token_meta(c.data, find_workload(c.workload).vocab, c.workload);
  }
}

// Uneven inputs (docs/cli.md, "Uneven inputs"): only DDP ranks can run out at different steps.
static void validate_uneven(const RunConfig& c) {
  DDPB_USAGE_CHECK(c.epochs >= 0) << "--epochs must not be negative";
  DDPB_USAGE_CHECK(c.sampler_padded || c.epochs > 0)
      << "--sampler unpadded gives ranks uneven shares, which only matters when the run ends "
         "with the data: give --epochs N";
  DDPB_USAGE_CHECK(!c.uneven_join || design_of(c).info.processes_per_rank)
      << "--uneven-inputs join is for ranks that are processes (PyTorch's Join): use --mode "
      << design_names(&reports::DesignInfo::processes_per_rank);
  DDPB_USAGE_CHECK(!c.uneven_join ||
                   (c.accumulate == 1 && !c.sync_bn &&
                    (c.comm_hook == ddp::CommHook::None || c.comm_hook == ddp::CommHook::FP16 ||
                     c.comm_hook == ddp::CommHook::BF16)))
      << "--uneven-inputs join does not combine with --accumulate, --sync-bn or "
         "--comm-hook powersgd";
  DDPB_USAGE_CHECK(c.join_divide_by_initial_world_size || c.uneven_join)
      << "--no-divide-by-initial-world-size is a Join option: give --uneven-inputs join";
}

void RunConfig::validate() const {
  DDPB_USAGE_CHECK(world_size >= 1 && world_size <= kMaxWorldSize)
      << "--world-size must be from 1 to " << kMaxWorldSize << ", got " << world_size;
  DDPB_USAGE_CHECK(global_batch > 0 && global_batch <= kMaxGlobalBatch)
      << "--global-batch must be positive and at most " << kMaxGlobalBatch << ", got "
      << global_batch;
  DDPB_USAGE_CHECK(steps > 0 && steps <= kMaxSteps)
      << "--steps must be positive and at most " << kMaxSteps << ", got " << steps;
  DDPB_USAGE_CHECK(warmup >= 0 && warmup <= kMaxSteps)
      << "--warmup must be from 0 to " << kMaxSteps << ", got " << warmup;
  find_workload(workload);  // throws UsageError for an unknown preset
  check_cpu_capacity(*this);
  validate_data(*this);
  validate_uneven(*this);
  const reports::DesignInfo& design = design_named(mode).info;
  if (design.processes_per_rank) {
    validate_ranks(*this);
  } else {
    DDPB_USAGE_CHECK(!backend && inject_fault.empty() && rendezvous == "env://")
        << "--backend, --inject-fault and --rendezvous are for ranks that are processes: use "
           "--mode "
        << design_names(&reports::DesignInfo::processes_per_rank);
  }
  validate_sync_bn(*this);
  if (design_named(mode).zero_stage > 0) validate_zero(*this);
  const bool fsdp = design_named(mode).sharding_strategy.has_value();
  if (!fsdp) {
    if (const RunField* f = first_given(*this, kFsdpFlags))
      throw UsageError(f->name() + " is FSDP's: use --mode " +
                       design_names_of_runner(make_fsdp_runner) + ", not --mode " + mode);
  }
  if (design.has_buckets) {
    validate_buckets(*this);
  } else if (fsdp) {
    validate_fsdp(*this);
  } else {
    DDPB_USAGE_CHECK(accumulate == 1 && !grad_as_bucket_view && !find_unused_params &&
                     !static_graph && !bucket_cap_auto && !no_overlap &&
                     comm_hook == ddp::CommHook::None && broadcast_buffers)
        << "DDP options (--accumulate, --grad-as-bucket-view, --find-unused-params, "
           "--static-graph, --comm-hook, --no-overlap, --no-broadcast-buffers) need "
           "--mode "
        << design_names(&reports::DesignInfo::has_buckets);
  }
  DDPB_USAGE_CHECK(design.parallel || (world_size == 1 && devices.empty()))
      << "--mode " << mode << " runs on one device: drop --world-size/--devices or use --mode "
      << design_names(&reports::DesignInfo::parallel);
  validate_no_ignored_inputs(*this);
  DDPB_USAGE_CHECK(!channels_last || family_of(find_workload(workload)).traits.images)
      << "--channels-last applies to image workloads (the resnet ones), not " << workload;
  if (cuda_graph) validate_graph_capture(*this);
}

nlohmann::json RunConfig::powersgd_json() const {
  return {{"rank", powersgd.rank},
          {"start_iter", powersgd.start_iter},
          {"min_compression_rate", powersgd.min_compression_rate},
          {"error_feedback", powersgd.error_feedback},
          {"warm_start", powersgd.warm_start},
          {"epsilon", powersgd.epsilon}};
}

}  // namespace ddpb::bench
