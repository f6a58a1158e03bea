// ZeRO stages 1 and 2 inside DDP: the optimizer over this rank's shard, and the parameters'
// all-gather after it.
//
// Note [ZeRO in DDP]
// ~~~~~~~~~~~~~~~~~~
// With ReducerOptions::zero_stage > 0 the Reducer pads every bucket to a multiple of the world
// size (Note [ZeRO shards]) and reduce-scatters it instead of AllReducing it: each rank
// receives only its chunk of the averaged gradients (the buckets are divided by the world size
// at copy-in, as for the AllReduce), in the bucket's shard_out. Stage 1 reduce-scatters after
// backward, as DeepSpeed's stage 1 does; stage 2 as each bucket becomes ready, overlapped with
// backward as DDP overlaps its AllReduce. The parameters keep no gradient after it (the bucket
// holds the local ones; only the shard is averaged).
//
// ZeroOptimizer then steps only the rank's shard: for every bucket, the segments of its
// parameters inside the shard, each a view of the parameter's own elements whose gradient is
// the matching view of shard_out. Its optimizer state (momentum, AdamW's moments) exists for
// those elements only: 1/N of DDP's. gather_parameters() then writes each rank's updated
// elements into its chunk of the bucket buffer (free once the reduce-scatter completed),
// all-gathers every bucket in one coalesced call, in place, and copies the buffers back into
// the parameters: every rank ends the step with the same full parameters, as in DDP. The
// volume is the paper's 2Ψ: a reduce-scatter and an all-gather of the (padded) gradients'
// size, against PyTorch's ZeroRedundancyOptimizer, which keeps DDP's AllReduce and then
// broadcasts every shard (3Ψ).
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
  void lay_out_shard();
  comm::WorkPtr broadcast_shards();

  Reducer& reducer_;
  std::shared_ptr<comm::ProcessGroup> pg_;
  optim::OptimizerConfig config_;
  Scheme scheme_;
  int64_t generation_ = -1;  // the bucket layout the shard was laid out on
  std::vector<autograd::Var> segments_;
  std::vector<size_t> segment_params_;    // each segment's parameter
  std::vector<Tensor> segment_grads_;     // each segment's view of its bucket's shard_out
  std::vector<int64_t> segment_offsets_;  // PyTorch's scheme: its first element in the parameter
  std::unique_ptr<optim::Optimizer> inner_;
};

}  // namespace ddpb::ddp
