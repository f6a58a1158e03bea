// ZeRO stages 1 and 2 inside DDP: the optimizer over this rank's shard, and the parameters'
// all-gather after it.
//
// Note [ZeRO in DDP]
// ~~~~~~~~~~~~~~~~~~
// With ReducerOptions::zero_stage > 0 the Reducer pads every bucket to a multiple of the world
// size (Note [ZeRO shards]) and reduce-scatters it instead of AllReducing it: each rank
// receives only its chunk of the averaged gradients (the buckets are divided by the world size
// at copy-in, as for the AllReduce), in the bucket's shard_out. Both stages reduce-scatter
// each bucket as it becomes ready, overlapped with backward as DDP overlaps its AllReduce
// (DeepSpeed's overlap_comm; --no-overlap waits for backward to end); they differ in what
// they keep of the gradients (Note [ZeRO gradient release]). The parameters keep no gradient
// after it (the bucket holds the local ones; only the shard is averaged).
//
// ZeroOptimizer then steps only the rank's shard: for every bucket, the segments of its
// parameters inside the shard, each a view of the parameter's own elements whose gradient is
// the matching view of shard_out. Its optimizer state (momentum, AdamW's moments) exists for
// those elements only: 1/N of DDP's. At its first step it lays the parameters out as the
// buckets are, one flat padded buffer per bucket, each parameter rebound to its view of it
// (Note [Rebinding a parameter's storage]); gather_parameters() then all-gathers every
// bucket's buffer in one coalesced call, in place, each rank's chunk being the elements it
// just stepped: every rank ends the step with the same full parameters, as in DDP, with no
// copy and no second buffer. The volume is the paper's 2Ψ: a reduce-scatter and an
// all-gather of the (padded) gradients' size, against PyTorch's ZeroRedundancyOptimizer,
// which keeps DDP's AllReduce and then broadcasts every shard (3Ψ).
//
// Note [ZeRO gradient release]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// What each stage keeps of the gradients, per rank (fp32, Ψ parameters, N ranks):
// - Stage 1 keeps every bucket's buffer (4Ψ, padded) and reduce-scatters it in place: its
//   shard_out is its own chunk of the buffer.
// - Stage 2 keeps only shard_out (4Ψ/N). A bucket's buffer is allocated when its first
//   gradient arrives and given back as soon as its reduce-scatter is done; the caching
//   allocator hands the same blocks to the next bucket, so the buckets reuse a few buffers.
//   After launching bucket b the Reducer finishes every bucket before b - 1, so at most
//   kBucketsInFlight launched buffers (and those being filled) exist at once. Backward
//   waits there only when communication has fallen two buckets behind. That bound is the
//   host backends' (Gloo, MPI), whose finish waits on the host; NCCL's finish only orders the
//   compute stream after the reduce-scatter, so reuse is safe, but the group holds each
//   buffer until its collective ends on the GPU, and a host running ahead keeps more alive.
//   Under gradient accumulation (no_sync) the micro-steps' full gradients accumulate in
//   .grad, as in DDP, until the synchronising step copies them in and drops them: the
//   4Ψ/N holds for that step's end, not for the micro-steps'.
// Either way a parameter's own gradient is dropped once it is in its bucket, so it is never
// held twice. Stage 2 allocates the first bucket's buffer when backward starts and bucket
// b + 1's when bucket b is ready (backward fills them roughly in index order), so that their
// slots are offered as destinations (Note [Gradient destinations]) before their gradients
// come and backward computes them straight in; a gradient that comes earlier allocates its
// bucket then, is copied in, and its bucket's later gradients go straight in.
// With few buckets (a model not much larger than --bucket-cap-mb) the buffers in flight are
// most of the gradients, and stage 2 saves little over stage 1: the record's
// ratio_by_category shows it (Note [Model-state memory]).
//
// PyTorch's variant (`--zero-variant pytorch`, the row zero1-pytorch; PyTorch's
// ZeroRedundancyOptimizer over DDP) keeps DDP's AllReduce: every rank has the whole averaged
// gradient, steps only its shard of each bucket (the same shards, unpadded) and then
// broadcasts it from its owner to the others: 2Ψ(n-1)/n for the AllReduce plus Ψ of broadcasts,
// against the paper's 2Ψ(n-1)/n, on the same runtime.
//
// Element for element the update is DDP's: the same averaged gradient and the same elementwise
// optimizer, so the parameters match plain DDP's to rounding. The shards follow the bucket
// layout, so it must not change once the first iteration has reduced into it: DDP's rebuild
// in the observed ready order is skipped (the buckets stay in reverse model order, the order
// backward roughly produces them in, as DeepSpeed's partitions stay in parameter order), and a
// layout that changes after the first step (the warm-up bucket search) is refused rather than
// losing the state of elements that change hands.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/process_group.h"
#include "core/optim.h"
#include "impl_ddp/reducer.h"

namespace ddpb::ddp {

class ZeroOptimizer final : public optim::Optimizer {
 public:
  // How the shards meet again after the step: the paper's reduce-scatter and all-gather, or
  // PyTorch's AllReduce and broadcasts.
  enum class Scheme { ReduceScatter, AllReduceBroadcast };
  ZeroOptimizer(Reducer& reducer, std::shared_ptr<comm::ProcessGroup> pg,
                optim::OptimizerConfig config, Scheme scheme = Scheme::ReduceScatter);

  // Steps this rank's shard of every bucket (its parameters' elements, in place).
  void step() override;
  // Collective: every rank's updated elements to every rank. Returns the all-gather's Work
  // (the last broadcast's in PyTorch's scheme), waited for.
  comm::WorkPtr gather_parameters();
  // The bytes of the parameters' all-gather (nccl-tests' size: the padded buckets), or of the
  // broadcasts (every parameter once).
  int64_t gather_bytes() const;
  // The collective gather_parameters issues: "allgather" or "broadcast".
  const char* gather_op() const;

 private:
  void flatten_parameters();
  void lay_out_shard();
  comm::WorkPtr broadcast_shards();

  Reducer& reducer_;
  std::shared_ptr<comm::ProcessGroup> pg_;
  optim::OptimizerConfig config_;
  Scheme scheme_;
  int64_t generation_ = -1;    // the bucket layout the shard was laid out on
  std::vector<Tensor> flats_;  // per bucket, its parameters' storage (the paper's scheme)
  std::vector<autograd::Var> segments_;
  std::vector<size_t> segment_params_;    // each segment's parameter
  std::vector<Tensor> segment_grads_;     // each segment's view of its bucket's shard_out
  std::vector<int64_t> segment_offsets_;  // PyTorch's scheme: its first element in the parameter
  std::unique_ptr<optim::Optimizer> inner_;
};

}  // namespace ddpb::ddp
