// FullyShardedDataParallel: one process per device, every rank holding only its shard of each
// unit's parameters, gradients and optimizer state; a unit's parameters are all-gathered just
// before it runs and freed after, its gradients reduce-scattered as soon as they are ready
// (PyTorch's torch.distributed.fsdp.FullyShardedDataParallel; FSDP2's fully_shard per block).
//
// Shape, as impl_ddp/distributed_data_parallel.h: construct it from a model, its units (the
// wrapping policy's choice, bench/run's job), the process groups and options; per step call
// step() (zero_grad, the buffer broadcast, forward, backward with the hooks' all-gathers and
// reduce-scatters, finish_gradient_sync, the optimizer over the shards), which times each
// phase and returns the step's stats.
//
// Note [FSDP's step]
// ~~~~~~~~~~~~~~~~~~
// Units. Each FsdpUnitSpec is one or more modules that run one after another in forward (a
// transformer block; a ResNet stage's blocks), and owns a FlatParamUnit of their parameters
// (Note [Flat parameters]). Every parameter in no unit belongs to the root unit (embeddings,
// the final norm, the head), which is gathered when forward() begins and stays gathered until
// its gradients are reduce-scattered at the end of backward, as PyTorch keeps the root.
//
// Hooks (Note [Module forward hooks], Note [Pre-backward hooks], Note [Gradient-ready
// hooks]). A unit's first module's pre-hook gathers the unit (waits for it) and prefetches the
// next unit in forward order; its last module's forward hook releases it (reshard after
// forward) and hooks its outputs, whose gradient, once complete, gathers the unit again and
// prefetches the unit before it (PyTorch's BACKWARD_PRE); when every one of its parameters'
// gradients is ready, the unit reduce-scatters them and is released. The forward order is
// the order of the first forward's pre-hooks; prefetch follows it from the second step on.
//
// Strategies, with PyTorch's meanings: full_shard reshards after forward (3Ψ a step: two
// all-gathers and a reduce-scatter); shard_grad_op keeps the units gathered from forward to
// backward (2Ψ); no_shard shards over a group of one rank and all-reduces the gradients over
// the world, which is DDP's arithmetic through this code path; hybrid_shard shards within a
// group (a node) and all-reduces each shard's gradient over the ranks that hold the same shard
// in the other groups. The caller builds the groups (FsdpGroups); the strategy here decides
// only when units are resharded. Gradients are averaged over the whole world at copy-in.
//
// The rate limiter (PyTorch's limit_all_gathers). On a device the host issues a unit's
// all-gather long before the device runs it, so units could pile up unsharded. Each reshard
// records an event on the compute stream; before issuing an all-gather, while
// limit_all_gathers or more of those events are outstanding, the host waits for the oldest.
// On CPU devices an event has completed when it is recorded, so the limiter never waits.
//
// SyncBatchNorm (sync_batch_norm): its blocking collectives over the world run inside the
// BatchNorm layers' forward and backward, between the units' hooks, in the same order on every
// rank, so they pair up as the units' do; their time is the sync_bn phase, as DDP's.
//
// Every rank must run the same units in the same order each step (the same model code on
// the same batch shapes), so that their collectives pair up; a unit whose parameters got no
// gradient this backward (unused) is reduce-scattered at finish_gradient_sync() in unit
// order, which holds as long as no unit is used on one rank and unused on another.
//
// The waits. The exposed all-gather time (phase param_allgather, taken out of forward and
// backward_compute) and the exposed reduce-scatter time are the compute stream's stalls in a
// Work's wait (Note [Exposed waits on the device], exposed_waits.h): on CPU devices (Gloo,
// MPI) the host's time blocked in the collective, on NCCL the device's.
//
// Note [One reduce-scatter in flight]
// Before a unit's reduce-scatter is issued, the previous unit's has completed and its input
// (the padded flat copy of its gradients) is freed: the host waits for it there, as FSDP2's
// post-backward makes the compute stream wait for the previous reduce-scatter's event. So a
// backward holds at most two units' flat copies however slow the link, and what a rank holds
// of gradients is a formula (peak_unsharded_grad_numel), not a race between backward and the
// link; the wait, if any, is exposed reduce-scatter time (inside backward, comm_exposed, not
// backward_compute). Gloo and MPI run a rank's collectives one at a time anyway, so the
// previous one finishes before this one could start. On NCCL the wait orders the compute
// stream after the previous reduce-scatter, as FSDP2's does, but its input goes back to the
// allocator only once the group's watchdog has seen the collective end, so a GPU can hold more
// flat copies than the formula for a moment. The formula is for a step without --accumulate:
// from the second micro-step on every shard's gradient is there and each reduce-scatter adds
// into it through a buffer of its own, which the record's ratio shows.
//
// Gradient accumulation: every micro-step reduce-scatters (the shard's gradient adds up), as
// PyTorch's FSDP outside no_sync(); no full gradient outlives its unit's backward.
//
// Threads: one thread per rank (the thread running forward and backward drives the hooks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/named_enum.h"
#include "comm/process_group.h"
#include "comm/sync_batch_norm.h"
#include "core/autograd.h"
#include "core/micro_steps.h"
#include "core/nn.h"
#include "core/optim.h"
#include "core/phase_timer.h"
#include "core/step_stats.h"
#include "core/stream.h"
#include "impl_fsdp/exposed_waits.h"
#include "impl_fsdp/flat_param.h"

namespace ddpb::fsdp {

enum class ShardingStrategy : uint8_t { FullShard, ShardGradOp, NoShard, HybridShard };
inline constexpr size_t kNumShardingStrategies = 4;
constexpr NameTable<ShardingStrategy, kNumShardingStrategies> enum_names(ShardingStrategy) {
  return {{{"full_shard", ShardingStrategy::FullShard},
           {"shard_grad_op", ShardingStrategy::ShardGradOp},
           {"no_shard", ShardingStrategy::NoShard},
           {"hybrid_shard", ShardingStrategy::HybridShard}}};
}

// Whether the strategy frees a unit's parameters after its forward (full_shard, hybrid_shard).
bool reshards_after_forward(ShardingStrategy strategy);

// One unit of the wrapping policy: modules that run one after another in forward, named for
// messages and records ("h.0", "layer2").
struct FsdpUnitSpec {
  std::string name;
  std::vector<nn::Module*> modules;
};

// The groups a strategy runs over (Note [FSDP's step]): `shard` all-gathers and
// reduce-scatters (the world for full_shard and shard_grad_op, this rank alone for no_shard,
// its node for hybrid_shard); `replicate`, when not null, all-reduces each shard's gradient
// across the shard groups (no_shard: the world; hybrid_shard: the ranks of the same local
// index). `world` is every rank: buffers are broadcast over it.
struct FsdpGroups {
  std::shared_ptr<comm::ProcessGroup> world, shard, replicate;
};

struct FsdpOptions {
  ShardingStrategy strategy = ShardingStrategy::FullShard;
  bool forward_prefetch = true;   // --no-forward-prefetch
  bool backward_prefetch = true;  // --no-backward-prefetch (PyTorch's BACKWARD_PRE)
  int limit_all_gathers = 2;      // outstanding reshards before a gather waits; 0: no limit
  bool broadcast_buffers = true;  // rank 0's buffers at every step, as DDP
  // --sync-bn: BatchNorm layers become SyncBatchNorm over the world group (PyTorch's
  // convert_sync_batchnorm before FSDP wraps the model).
  bool sync_batch_norm = false;
};

// One micro-batch of a step and the loss over it (Note [Micro-steps] in core/micro_steps.h).
using ddpb::LossFn;
using ddpb::MicroBatch;

struct FsdpStepOptions {
  int64_t accumulate = 1;
  std::function<void()> in_first_forward;  // inside the first micro-step's timed forward
};

// A unit's collectives in one step, on the step's clock (ms since clock_zero_ns).
struct UnitCollective {
  std::string unit;
  std::string op;    // "allgather", "reduce_scatter", "allreduce"
  std::string when;  // "forward", "backward", "prefetch forward", "prefetch backward", "finish"
  int64_t bytes = 0;
  double launch_ms = 0, start_ms = 0, complete_ms = 0;
  // The host time this rank had spent blocked in FSDP's waits since the step began when it
  // issued this one: launch_ms - waited_before_ms is when it would have issued it had it
  // never waited for another rank (unit blame, Note [Bucket blame]).
  double waited_before_ms = 0;
};

struct FsdpStepStats : StepStats {
  std::vector<UnitCollective> units;  // in issue order
  int64_t buffer_broadcast_bytes = -1;
  int64_t limiter_waits = 0;  // gathers the rate limiter held back this step
  double exposed_gather_forward_ms = 0, exposed_gather_backward_ms = 0;
  double exposed_reduce_scatter_ms = 0;
  bool sync_batch_norm = false;
  std::vector<comm::SyncBnRecord> sync_bn;  // SyncBatchNorm's collectives (inside forward/backward)
};

class FullyShardedDataParallel {
 public:
  using ForwardFn = std::function<autograd::Var(const Tensor& x)>;

  // Collective. `module` and the groups must outlive this object; every rank passes the same
  // model and the same units. Broadcasts rank 0's parameters and buffers (as DDP's
  // constructor does), then copies the parameters into the shards. Throws UsageError
  // for sync_batch_norm on a module without BatchNorm layers.
  FullyShardedDataParallel(nn::Module& module, ForwardFn forward, FsdpGroups groups,
                           const std::vector<FsdpUnitSpec>& units, FsdpOptions options);
  ~FullyShardedDataParallel();
  FullyShardedDataParallel(const FullyShardedDataParallel&) = delete;
  FullyShardedDataParallel& operator=(const FullyShardedDataParallel&) = delete;

  // Forward with the hooks: the root gathered first.
  autograd::Var forward(const Tensor& x);
  void backward(const autograd::Var& loss, const Tensor& grad_output = Tensor());
  // After backward: every unit's gradients reduce-scattered (and all-reduced across shard
  // groups), the root released.
  void finish_gradient_sync();
  // Rank 0's buffers onto every rank; returns the bytes (0 without buffers or broadcast).
  int64_t sync_buffers();

  // The shards, in unit order (root last): what the optimizer steps.
  std::vector<autograd::Var> shards() const;
  std::unique_ptr<optim::Optimizer> make_optimizer(const optim::OptimizerConfig& config) const;

  FsdpStepStats step(const std::function<MicroBatch()>& next_batch, const LossFn& loss,
                     optim::Optimizer& optimizer, const FsdpStepOptions& options = {});

  // Collective: every unit gathered, `visit` called while the module's parameters hold the
  // full values, then released (PyTorch's summon_full_params). A full state dict, a replica
  // check and a load (writing into the parameters, copied back into the shards with
  // `writeback`) go through it.
  void with_full_params(const std::function<void()>& visit, bool writeback = false);
  // Collective: every rank's shards agree across replicate groups and every rank's full
  // parameters are finite; throws Error naming the first parameter that is not.
  void check_replicas_consistent();

  const std::vector<std::unique_ptr<FlatParamUnit>>& units() const { return units_; }
  const std::vector<std::string>& unit_names() const { return unit_names_; }
  const FsdpOptions& options() const { return options_; }
  const FsdpGroups& groups() const { return groups_; }
  // The elements (padded) gathered at once at the step's peak, beside the shards: the root
  // (gathered from forward to the end of backward), and the running unit with the prefetched
  // one, the two largest (full_shard, hybrid_shard; one with prefetch off), or every unit
  // (shard_grad_op keeps them from forward to backward; no_shard's flat copies sit beside its
  // whole shards).
  int64_t peak_unsharded_numel() const;
  // The gradient elements held beyond the shards' at the peak (Note [One reduce-scatter in
  // flight]): over the units in the order they reduce-scatter, the shards' gradients of the
  // units before, a unit's full gradients beside the larger of its padded flat copy for the
  // reduce-scatter (Note [Flat parameters]) and the previous unit's, and the root's full
  // gradients final by then; the largest such sum, less every shard's gradients.
  int64_t peak_unsharded_grad_numel() const;

 private:
  struct UnitState;
  struct Issued;
  void build_units(const std::vector<FsdpUnitSpec>& specs);
  void install_hooks(size_t index, const FsdpUnitSpec& spec);
  void pre_forward(size_t index);
  void post_forward(size_t index, const std::vector<autograd::Var>& outputs);
  void pre_backward(size_t index);
  void grad_ready(size_t index);
  void gather(size_t index, const char* when);
  void wait_gather(size_t index);
  void reshard(size_t index);
  void limit_in_flight();
  void reduce_scatter(size_t index, const char* when, bool in_backward);
  void record_issued(size_t index, const char* op, const char* when, int64_t bytes,
                     int64_t launch_ns, comm::WorkPtr work);
  void finish_unit(size_t index);
  size_t next_in_forward(size_t index, int direction) const;
  int64_t sync_buffers_now();
  std::vector<Tensor> run_micro_steps(const std::function<MicroBatch()>& next_batch,
                                      const LossFn& loss_fn, const FsdpStepOptions& options,
                                      PhaseTimer& timer);
  void fill_phases(FsdpStepStats& stats, const PhaseTimer& timer) const;
  void fill_collectives(FsdpStepStats& stats) const;
  double on_clock(int64_t ns) const;

  nn::Module& module_;
  ForwardFn forward_;
  FsdpGroups groups_;
  FsdpOptions options_;
  Device device_;
  std::vector<std::unique_ptr<FlatParamUnit>> units_;  // the specs' units, then the root
  std::vector<std::string> unit_names_;
  std::vector<UnitState> state_;
  size_t root_ = SIZE_MAX;  // the root unit's index; SIZE_MAX: every parameter is in a unit
  std::vector<size_t> forward_order_;  // unit indices as the first forward ran them
  bool order_known_ = false;           // after the first backward
  bool in_backward_ = false;
  std::deque<Event> reshard_events_;  // the rate limiter's outstanding reshards
  std::unique_ptr<comm::ProcessGroupBatchNormSync> bn_sync_;  // null without sync_batch_norm
  std::vector<Tensor> buffers_;
  // This step's collectives and waits.
  std::vector<Issued> issued_;
  int64_t clock_zero_ns_ = 0;
  int64_t limiter_waits_ = 0;
  ExposedWaits waits_;              // Note [Exposed waits on the device]
  size_t last_reduced_ = SIZE_MAX;  // the unit whose reduce-scatter was issued last this step
  // Each root gradient of the first backward: its elements, and the reduce-scatters of other
  // units issued before it was final (peak_unsharded_grad_numel).
  std::vector<std::pair<int64_t, size_t>> root_grads_ready_;
};

}  // namespace ddpb::fsdp
