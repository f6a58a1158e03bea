// DistributedDataParallel: one process per device; every rank holds a full replica, computes
// the gradients of its own part of the batch, and the Reducer averages them over the ranks
// with bucketed AllReduces that overlap the rest of backward (impl_ddp/reducer.h).
//
// Shape, as impl_dp/data_parallel.h: construct it from a model and a process group with
// options, then per step call step() (zero_grad, the buffer broadcast, forward, backward with
// the bucketed AllReduces, finish_gradient_sync, the optimizer), which times each phase and
// returns the step's stats as DataParallel::step does; or drive forward, backward and
// finish_gradient_sync yourself. The harness (bench/run/runner_ddp.cpp) joins the job,
// builds this object and records what step() returns.
//
// Note [DDP in PyTorch's terms]
// ours                              torch.nn.parallel.DistributedDataParallel
// --------------------------------  ------------------------------------------------------
// constructor: verify_same_model    _verify_param_shape_across_processes (names, shapes,
//                                   dtypes; a mismatch names the parameter and the ranks)
// constructor: broadcast from 0     _sync_module_states (parameters and buffers)
// DdpOptions::sync_batch_norm       nn.SyncBatchNorm.convert_sync_batchnorm (before DDP)
// sync_buffers()                    _sync_buffers: rank 0's buffers to every rank, one
//                                   coalesced broadcast per dtype (PyTorch runs it at the top
//                                   of forward; here the harness calls it, to time it)
// constructor: Reducer              the C++ Reducer (bucket assignment, autograd hooks)
// forward(x)                        forward (where _sync_buffers would run)
// backward(loss, grad)              Reducer::prepare_for_backward, then loss.backward(); the
//                                   hooks are Reducer::autograd_hook -> mark_variable_ready
// no_sync()                         no_sync(): gradients accumulate locally, no collective
// finish_gradient_sync()            Reducer::finalize_backward (wait for every bucket)
// check_replicas_consistent()       none: our end-of-run proof of DDP's invariant
//
// Note [DDP buffers]
// Buffers (BatchNorm's running statistics) are state, not gradients: no hook, no bucket.
// With broadcast_buffers, every synchronising step starts from rank 0's buffers, as in
// PyTorch, and each rank then updates them from its own batch during forward; so after any
// step the ranks' buffers differ by design, and only rank 0's are "the model's". Without it
// each rank keeps its own statistics throughout. Either way the end-of-run check compares
// parameters only. With sync_batch_norm the statistics are the global batch's, so every
// rank's updates are the same.
//
// Threads: one thread per rank (the Reducer's, see its header).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "comm/process_group.h"
#include "comm/sync_batch_norm.h"
#include "core/autograd.h"
#include "core/micro_steps.h"
#include "core/nn.h"
#include "core/optim.h"
#include "core/phase_timer.h"
#include "core/step_phase.h"
#include "core/step_stats.h"
#include "impl_ddp/reducer.h"
#include "impl_ddp/zero_optimizer.h"

namespace ddpb::ddp {

// Note [DDP Join]
// ~~~~~~~~~~~~~~~
// Uneven inputs (--uneven-inputs join), with the semantics of PyTorch's
// torch.distributed.algorithms.Join around a DDP model:
//  - Every synchronising iteration begins with a join round: each rank says whether it has
//    input (an allgather of one flag), so every rank knows which ranks are still active.
//  - A rank with input runs its step; a rank without one shadows the step's collectives
//    (join_shadow): the buffer broadcast, and zeros for each bucket's collectives in bucket
//    order (Note [Join shadow] in impl_ddp/reducer.h), so that the active ranks' collectives
//    complete. Its parameters and optimizer stay as they were, except under a ZeRO stage
//    (Note [ZeRO in DDP]): there it owns a shard the active ranks cannot step, so it steps its
//    shard with the gradients its shadowed collectives brought (the active ranks' average, as
//    PyTorch's ZeroRedundancyOptimizer's join hook does) and takes its part in the gather.
//  - Buffers come from the highest active rank (PyTorch's authoritative rank), not rank 0,
//    which may have joined.
//  - divide_by_initial_world_size (the default): gradients are divided by the world size
//    still, so a joined rank's zeros dilute the step as PyTorch's do; without it, by the
//    number of active ranks.
//  - When no rank has input left, the final model comes from the last rank to join (the most
//    iterations, ties to the highest rank), broadcast to all (PyTorch's _sync_final_model), so
//    the end-of-run check holds.
// Every rank must run DDP's first iteration with input (the bucket rebuild), and Join does not
// combine with SyncBatchNorm (whose collectives sit inside forward) or gradient accumulation.
struct JoinOptions {
  bool enable = false;
  bool divide_by_initial_world_size = true;
};

struct DdpOptions {
  ReducerOptions reducer;
  bool broadcast_buffers = true;  // false: --no-broadcast-buffers
  bool sync_batch_norm = false;   // --sync-bn: BatchNorm layers become SyncBatchNorm
  JoinOptions join;               // --uneven-inputs join (Note [DDP Join])
  // --zero-variant pytorch (Note [ZeRO in DDP]): DDP's AllReduce, then each rank steps its
  // shard and broadcasts it, as PyTorch's ZeroRedundancyOptimizer; reducer.zero_stage stays 0.
  bool zero_broadcast = false;
};

// One micro-batch of a step and the loss over it (Note [Micro-steps] in core/micro_steps.h).
using ddpb::LossFn;
using ddpb::MicroBatch;

struct DdpStepOptions {
  int64_t accumulate = 1;  // micro-steps; the first K-1 accumulate locally (no_sync)
  // Called inside the first micro-step's timed forward (a fault injected there shows as this
  // rank's own compute).
  std::function<void()> in_first_forward;
};

// What one step did (Note [Step stats] in core/step_stats.h): the phases (Note [One phase
// vocabulary]), every bucket's and SyncBatchNorm's collectives on the backward's clock
// (clock_zero_ns: when backward began; compute_end_ms: when its compute ended), and what only
// DDP has. Derived figures (communication time, overlap) are the harness's.
struct DdpStepStats : StepStats {
  int64_t buffer_broadcast_bytes = -1;  // -1: no broadcast this step
  bool sync_batch_norm = false;
  std::vector<comm::SyncBnRecord> sync_bn;  // SyncBatchNorm's collectives (inside forward/backward)
  std::vector<BucketRecord> buckets;        // the Reducer's records of this step's buckets
};

class DistributedDataParallel {
 public:
  using ForwardFn = std::function<autograd::Var(const Tensor& x)>;

  // Collective: every rank constructs it at the same point with the same model. `module`
  // and `pg` must outlive this object; `forward` runs the module on a batch.
  // Throws UsageError for sync_batch_norm on a module without BatchNorm layers.
  DistributedDataParallel(nn::Module& module, ForwardFn forward,
                          std::shared_ptr<comm::ProcessGroup> pg, DdpOptions options);

  autograd::Var forward(const Tensor& x) const { return forward_(x); }
  // The optimizer over what this rank steps: the module's parameters, or with a ZeRO stage its
  // shard, whose parameters step() then all-gathers (Note [ZeRO in DDP]).
  std::unique_ptr<optim::Optimizer> make_optimizer(const optim::OptimizerConfig& config);
  // Whether the optimizer is sharded over the ranks (a ZeRO stage or PyTorch's variant).
  bool sharded() const { return options_.reducer.zero_stage > 0 || options_.zero_broadcast; }
  // Rank 0's buffers onto every rank (Note [DDP buffers]); a no-op without broadcast_buffers,
  // at world size 1 or for a module without buffers. Returns the bytes broadcast.
  int64_t sync_buffers();
  bool syncs_buffers() const;
  // Backward of one micro-step: synchronising unless inside no_sync().
  void backward(const autograd::Var& loss, const Tensor& grad_output = Tensor());
  // After the synchronising backward: every bucket is reduced, the gradients are averaged.
  void finish_gradient_sync();

  // One full training step, as DataParallel::step: zero_grad, the buffer broadcast, the
  // micro-steps (forward, loss, backward; no_sync for all but the last), the gradient sync,
  // optimizer.step(), each phase timed on the device's stream. Collective.
  DdpStepStats step(const std::function<MicroBatch()>& next_batch, const LossFn& loss,
                    optim::Optimizer& optimizer, const DdpStepOptions& options = {});

  // While the guard lives, backward() accumulates gradients locally (the first K-1
  // micro-steps of gradient accumulation); the next backward after it synchronises.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp) { ddp_.sync_ = false; }
    ~NoSync() { ddp_.sync_ = true; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
  };
  NoSync no_sync() { return NoSync(*this); }

  // Note [DDP Join]. A rank without input calls join_shadow() where its peers call step():
  // one shadowed iteration, or false (nothing done) once no rank has input left. Collective.
  bool join_shadow();
  // After its last step: shadow until every rank is out, then take the final parameters and
  // buffers from the last rank to join. Collective. Returns the iterations shadowed.
  int64_t join_finish();
  // Steps this rank ran with input since construction (join only).
  int64_t iterations() const { return iterations_; }
  // Collective: which ranks have input for the next iteration (an allgather of one flag
  // each). Without Join the caller must stop every rank when some have run out and others
  // not: PyTorch's DDP would hang there.
  std::vector<bool> ranks_with_input(bool have_input) const;

  // Collective. DDP's invariant, checked at the end of a run: every rank holds the same
  // parameters. A non-finite parameter is named first (Error: "NaN or Inf in parameter X
  // on rank R"), then differing checksums.
  void check_replicas_consistent() const;

  Reducer& reducer() { return *reducer_; }
  const Reducer& reducer() const { return *reducer_; }
  comm::ProcessGroup& process_group() const { return *pg_; }
  // The SyncBatchNorm bridge (null without sync_batch_norm).
  comm::ProcessGroupBatchNormSync* batch_norm_sync() const { return bn_sync_.get(); }

 private:
  // The micro-steps of step(); returns their losses, unread (Note [The loss is read last]),
  // with "comm_exposed" left begun.
  std::vector<Tensor> run_micro_steps(const std::function<MicroBatch()>& next_batch,
                                      const LossFn& loss, const DdpStepOptions& options,
                                      PhaseTimer& timer);
  void fill_phases(DdpStepStats& stats, const PhaseTimer& timer) const;
  void add_collectives(DdpStepStats& stats) const;
  void verify_same_model() const;
  void broadcast_from_rank0() const;
  // Note [DDP Join]: which ranks have input this iteration (an allgather of one flag each);
  // sets the buffer source and the gradient divisor from it.
  std::vector<bool> join_round(bool have_input);

  nn::Module& module_;
  ForwardFn forward_;
  std::shared_ptr<comm::ProcessGroup> pg_;
  std::unique_ptr<Reducer> reducer_;
  Device device_;
  DdpOptions options_;
  std::vector<Tensor> f32_buffers_, i64_buffers_;  // the module's buffers, by dtype
  int64_t buffer_bytes_ = 0;
  std::vector<comm::SyncBnRecord> buffer_broadcasts_;  // the last sync_buffers(), host-timed
  ZeroOptimizer* zero_ = nullptr;                      // the optimizer make_optimizer made (ZeRO)
  std::vector<comm::SyncBnRecord> param_gathers_;      // the last step's all-gather (ZeRO)
  std::unique_ptr<comm::ProcessGroupBatchNormSync> bn_sync_;
  bool sync_ = true;
  int buffer_source_ = 0;   // the rank whose buffers sync_buffers() broadcasts
  int64_t iterations_ = 0;  // steps run with input (join)
};

}  // namespace ddpb::ddp
