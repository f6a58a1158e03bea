// DistributedDataParallel: one process per device; every rank holds a full replica, computes
// the gradients of its own part of the batch, and the Reducer averages them over the ranks
// with bucketed AllReduces that overlap the rest of backward (impl_ddp/reducer.h).
//
// Shape, as impl_dp/data_parallel.h: construct it from a model and a process group with
// options, then per step call forward, backward and finish_gradient_sync; the optimizer
// steps on the averaged gradients, the same on every rank. The harness (bench/runner_ddp)
// only times it, records it and wires the CLI.
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
#include "core/autograd.h"
#include "core/nn.h"
#include "impl_ddp/reducer.h"
#include "impl_ddp/sync_batch_norm.h"

namespace ddpb::ddp {

struct DdpOptions {
  ReducerOptions reducer;
  bool broadcast_buffers = true;  // false: --no-broadcast-buffers
  bool sync_batch_norm = false;   // --sync-bn: BatchNorm layers become SyncBatchNorm
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
  // Rank 0's buffers onto every rank (Note [DDP buffers]); a no-op without broadcast_buffers,
  // at world size 1 or for a module without buffers. Returns the bytes broadcast.
  int64_t sync_buffers();
  bool syncs_buffers() const;
  // Backward of one micro-step: synchronising unless inside no_sync().
  void backward(const autograd::Var& loss, const Tensor& grad_output = Tensor());
  // After the synchronising backward: every bucket is reduced, the gradients are averaged.
  void finish_gradient_sync();

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

  // Collective. DDP's invariant, checked at the end of a run: every rank holds the same
  // parameters. A non-finite parameter is named first (Error: "NaN or Inf in parameter X
  // on rank R"), then differing checksums.
  void check_replicas_consistent() const;

  Reducer& reducer() { return *reducer_; }
  const Reducer& reducer() const { return *reducer_; }
  comm::ProcessGroup& process_group() const { return *pg_; }
  // The SyncBatchNorm bridge (null without sync_batch_norm).
  ProcessGroupBatchNormSync* batch_norm_sync() const { return bn_sync_.get(); }

 private:
  void verify_same_model() const;
  void broadcast_from_rank0() const;
  // Broadcasts `tensors` (one dtype) from rank 0 as one flat tensor.
  void broadcast_coalesced(const std::vector<Tensor>& tensors) const;

  nn::Module& module_;
  ForwardFn forward_;
  std::shared_ptr<comm::ProcessGroup> pg_;
  std::unique_ptr<Reducer> reducer_;
  Device device_;
  DdpOptions options_;
  std::vector<Tensor> f32_buffers_, i64_buffers_;  // the module's buffers, by dtype
  int64_t buffer_bytes_ = 0;
  std::unique_ptr<ProcessGroupBatchNormSync> bn_sync_;
  bool sync_ = true;
};

}  // namespace ddpb::ddp
