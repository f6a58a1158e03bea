// FSDP's flat parameters: one unit's parameters laid out in one flat buffer that is sharded
// over a process group, gathered whole only while the unit runs (PyTorch's FlatParameter and
// FlatParamHandle; FSDP2's FSDPParamGroup does the same work per parameter).
//
// Note [Flat parameters]
// ~~~~~~~~~~~~~~~~~~~~~~
// A unit (a module a wrapping policy picks: a Linear, a transformer block) owns a
// FlatParamUnit built from its parameters: f32 leaves that require grad, all on one device.
//
// Layout. The parameters lie one after another in the order given, parameter k at
// offsets[k], and the buffer is padded with zeros at its end to a multiple of the group size
// N (PyTorch's FlatParameter rule), padded = ceil(numel / N) * N, so that every rank holds an
// equal shard of S = padded / N elements: rank r owns [r·S, (r+1)·S). The last ranks' shards
// may be partly or wholly padding. Every rank computes the same layout from the same shapes,
// so the chunks of an all-gather and a reduce-scatter line up on every rank, as ZeRO's
// buckets do (Note [ZeRO shards] in impl_ddp; no code is shared, impl_* never include each
// other).
//
// The shard is the only persistent copy. shard() is a leaf Var of S elements of its own (not
// a view of the full buffer, which comes and goes): the optimizer steps it, its optimizer
// state is S elements, and its .grad is the sharded gradient. Padding elements get zero
// gradients, so an elementwise optimizer (SGD, AdamW) leaves them zero.
//
// The full buffer. Each parameter is rebound at construction to its view of one flat Tensor
// (Note [Rebinding a parameter's storage]) whose Storage lives as long as the unit; only its
// memory comes and goes (Note [Freeable parameters]): gather() reallocates it and all-gathers
// the shards into it, release() frees it, so the parameters' views and every tensor autograd
// saved from them in forward see the memory of the latest gather. That is why the buffer is
// never replaced by a new one: a weight LinearBackward saved in forward must see the
// re-gathered values in backward. A parameter's data is valid only between gather() (once its
// Work is waited on: wait_gather()) and release(); outside, any read of it throws naming the
// unit and its parameters (the buffer's one Storage names them all). The optimizer must not step
// the shard while a gather reads it, and gathered parameters are stale once the shard has been
// stepped: step between release() and gather(). Construction copies the parameters' current values
// in (every rank must hold the same ones, as every rank's model is built from the same seed) and
// ends released.
//
// Gradients. Backward leaves each parameter's full gradient in its .grad; after the unit's
// backward, reduce_scatter_grads() copies them into a flat gradient buffer of the same
// layout, each divided by N on the way in (as DDP's Reducer averages at copy-in, so the
// collective is a plain sum; zeros for a parameter without a gradient and for the padding),
// drops the full gradients and reduce-scatters: after wait_reduce_scatter() the shard's .grad
// holds rank r's chunk of the average over ranks, added to what it held (gradient
// accumulation) or as a new tensor when it held none. Gradients live in the shard's .grad
// after that, nowhere else. With a replicate group (hybrid_shard; no_shard, whose shard group
// is one rank), wait_reduce_scatter() then issues the all-reduce of the shard's chunk over the
// ranks holding the same chunk in the other groups, and the division at copy-in is by every
// rank of both; wait_replicate() waits for it.
//
// Issue and wait. gather() and reduce_scatter_grads() issue their collective and return its
// Work, so a caller can issue one early (prefetch the next unit's gather) and wait later with
// wait_gather() / wait_reduce_scatter(). Every rank must issue the same units' collectives in
// the same order (comm/process_group.h); hooks driven by the same model and batch shapes do.
//
// Threads: one thread per rank drives its units (the thread running forward and backward).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "core/autograd.h"

namespace ddpb::fsdp {

// Where a unit's parameters lie in its flat buffer and how the buffer is sharded (Note [Flat
// parameters]): a pure function of the shapes and the group size, tested without a group.
struct FlatParamLayout {
  std::vector<Shape> shapes;     // per parameter, in the unit's order
  std::vector<int64_t> offsets;  // each parameter's first element in the flat buffer
  int64_t numel = 0;             // the parameters' elements
  int64_t padded_numel = 0;      // numel rounded up to a multiple of world
  int64_t shard_numel = 0;       // padded_numel / world: every rank's shard
  int world = 1;

  // Rank `rank`'s shard is [shard_begin, shard_begin + shard_numel) of the flat buffer.
  int64_t shard_begin(int rank) const { return int64_t{rank} * shard_numel; }
  // How many of rank `rank`'s shard elements are padding (at its end).
  int64_t shard_padding(int rank) const;
};

// Throws UsageError for a world below 1 or a negative dimension.
FlatParamLayout flat_param_layout(const std::vector<Shape>& shapes, int world);

// Collectives a unit issued since it was built, for measurement: bytes are nccl-tests' size,
// the full (padded) buffer for both, the all-gather's output and the reduce-scatter's input.
struct FlatParamTraffic {
  int64_t gathers = 0;
  int64_t reduce_scatters = 0;
  int64_t bytes_gathered = 0;
  int64_t bytes_reduce_scattered = 0;
  int64_t allreduces = 0;  // over the replicate group, the shard's size each
  int64_t bytes_allreduced = 0;
};

class FlatParamUnit {
 public:
  // `name` labels the unit in messages ("h.0"; "" for the root). `params`: distinct f32 leaf
  // Vars that require grad, on one device, allocated, at least one element in all. They are
  // rebound to views of the unit's flat buffer and end released (Note [Flat parameters]).
  // `replicate`, when given, all-reduces the shard's gradient over the ranks that hold the
  // same shard in other shard groups (hybrid_shard, no_shard): the average then runs over
  // pg->size() * replicate->size() ranks.
  FlatParamUnit(std::string name, std::vector<autograd::Var> params,
                std::shared_ptr<comm::ProcessGroup> pg,
                std::shared_ptr<comm::ProcessGroup> replicate = nullptr);
  // Collectives in flight keep the tensors they use alive (comm/'s Work holds them), so a
  // unit may be dropped with one pending; its results are then lost.
  FlatParamUnit(const FlatParamUnit&) = delete;
  FlatParamUnit& operator=(const FlatParamUnit&) = delete;

  const std::string& name() const { return name_; }
  const FlatParamLayout& layout() const { return layout_; }
  const std::vector<autograd::Var>& params() const { return params_; }
  // This rank's shard: the leaf the optimizer steps; its .grad is the sharded gradient.
  const autograd::Var& shard() const { return shard_; }

  // Allocates the full buffer, points every parameter at its view and issues the all-gather
  // of the shards into it. Returns its Work, the one in flight if a gather is pending, or null
  // if the parameters are gathered already (then there is nothing to wait for).
  comm::WorkPtr gather();
  // Waits for the pending gather (none: returns); the parameters are then readable.
  void wait_gather();
  // The full buffer is allocated (its values final once wait_gather() returned).
  bool gathered() const;
  // A gather was issued and not yet waited for.
  bool gather_pending() const { return gather_work_ != nullptr; }
  // Frees the full buffer's memory, and with it every parameter's (waits for a pending gather
  // first). A no-op while released.
  void release();

  // Copies the parameters' gradients in, averaged, drops them and issues the reduce-scatter
  // into the shard's gradient (Note [Flat parameters]); returns its Work. One at a time.
  comm::WorkPtr reduce_scatter_grads();
  // Waits for the pending reduce-scatter (none: returns) and, with a replicate group, issues
  // the all-reduce of the result; shard().grad() is final once wait_replicate() returned.
  void wait_reduce_scatter();
  void wait_replicate();
  bool reduce_scatter_pending() const { return rs_work_ != nullptr; }
  // Once the pending reduce-scatter has completed, frees its input (the padded full
  // gradients) without waiting, so that a backward does not hold every unit's until
  // wait_reduce_scatter(). Issues nothing: safe to call in any order on any rank.
  void reclaim_reduce_scatter_input();
  // Waits for the pending reduce-scatter (if any) and frees its input; its result stays for
  // wait_reduce_scatter(). Issues nothing.
  void await_reduce_scatter_input();

  // Sizes, for measurement: elements of the parameters, of the padded buffer, of the shard;
  // bytes one gather and one reduce-scatter move (FlatParamTraffic's measure).
  int64_t numel() const { return layout_.numel; }
  int64_t padded_numel() const { return layout_.padded_numel; }
  int64_t shard_numel() const { return layout_.shard_numel; }
  int64_t gather_bytes() const;
  int64_t reduce_scatter_bytes() const;
  int64_t allreduce_bytes() const;  // the shard's, over the replicate group
  const std::shared_ptr<comm::ProcessGroup>& replicate_group() const { return replicate_; }
  // The Works of the last collectives issued (their host timestamps, for records).
  const comm::WorkPtr& last_gather() const { return last_gather_; }
  const comm::WorkPtr& last_reduce_scatter() const { return last_rs_; }
  const comm::WorkPtr& last_allreduce() const { return last_ar_; }
  const FlatParamTraffic& traffic() const { return traffic_; }

 private:
  void check_params() const;
  void flatten_and_shard();
  void copy_grads_in(const Tensor& flat_grad) const;

  std::string name_;
  std::vector<autograd::Var> params_;
  std::shared_ptr<comm::ProcessGroup> pg_;
  std::shared_ptr<comm::ProcessGroup> replicate_;
  FlatParamLayout layout_;
  Device device_;
  Tensor flat_;                // the full buffer: its Storage lives with the unit
  std::vector<Tensor> views_;  // each parameter's view of flat_
  autograd::Var shard_;
  std::string owner_;  // what a read of a released parameter reports
  comm::WorkPtr gather_work_;
  comm::WorkPtr rs_work_;
  comm::WorkPtr ar_work_;  // the replicate group's all-reduce of the shard's gradient
  Tensor ar_out_;          // its tensor (added into the shard's gradient when accumulating)
  Tensor flat_grad_;       // the pending reduce-scatter's input
  Tensor rs_out_;          // and output: the shard's gradient, or a scratch added into it
  bool rs_accumulates_ = false;
  comm::WorkPtr last_gather_, last_rs_, last_ar_;
  FlatParamTraffic traffic_;
};

}  // namespace ddpb::fsdp
