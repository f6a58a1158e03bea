// PowerSGD (Vogels et al., 2019), with the semantics of PyTorch's powerSGD_hook
// (torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook):
//
//  - For the first start_iter synchronising iterations, a plain AllReduce of the averaged
//    bucket. From then on the Reducer hands the bucket over unaveraged.
//  - With error feedback, the bucket's error from the last iteration is added first, and a
//    copy of the result is kept.
//  - Each parameter's gradient is viewed as a matrix M [shape[0], numel / shape[0]]. A
//    matrix is compressed at rank r = min(rows, cols, rank) when (rows + cols) * r *
//    min_compression_rate < rows * cols, and, whatever the rate, (rows + cols) * r <
//    rows * cols (Note [PowerSGD differences from PyTorch]); the others (1-D tensors always)
//    are AllReduced uncompressed, side by side in one buffer, and divided by the world size.
//  - Per compressed matrix: Q [cols, r] is drawn at random (the same on every rank) the first
//    time, or with warm start kept from the last iteration, and orthogonalised; P = M Q;
//    AllReduce every P of the bucket at once; orthogonalise P; Q = M^T P; AllReduce every Q;
//    Q /= world size; M = P Q^T. The new error is the kept copy minus the bucket.
//
// Collectives per bucket: "uncompressed" (when any), "P", then "Q" (Note [Comm hook collective
// order]: launch() issues the first two, advance() the third, finish() decompresses).
//
// Note [PowerSGD differences from PyTorch]
//  - Orthogonalisation is Gram-Schmidt at every rank (PyTorch switches to QR above rank 2,
//    which gives the same columns up to sign); Note [Orthogonalisation epsilon] in
//    core/ops.h for a zero column.
//  - The random Q comes from ddpbench's counter-based generator (core/rng.h), not torch's:
//    with keep_random_q every draw is kept, and --dump writes it, so a reference can be fed
//    the same Q.
//  - batch_tensors_with_same_shape is not offered.
//  - A matrix is never "compressed" into more bytes than it has: PyTorch with
//    min_compression_rate below 1 sends P and Q larger than M, and orthogonalises them, which
//    made a --powersgd-rank 1024 step of mlp-small take 50 s instead of 60 ms (issue 25, P1).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "impl_ddp/comm_hooks.h"

namespace ddpb::ddp {

// PyTorch's _should_compress: whether a rows x cols matrix is worth compressing at rank r, and
// never when P and Q would hold as many values as the matrix.
bool powersgd_should_compress(int64_t rows, int64_t cols, int64_t r, double min_compression_rate);

// Usage errors for options PyTorch's PowerSGDState refuses or that mean nothing.
void validate_powersgd_options(const PowerSgdOptions& options);

class PowerSgdHook final : public BucketCommHook {
 public:
  PowerSgdHook(PowerSgdOptions options, std::shared_ptr<comm::ProcessGroup> pg,
               std::function<double()> now_ms);
  ~PowerSgdHook() override;

  bool averages_at_copy_in() const override { return !compressing(); }
  void launch(HookBucket& b) override;
  void advance(HookBucket& b) override;
  void finish(HookBucket& b) override;
  void end_iteration() override { ++iteration_; }
  void buckets_rebuilt() override;
  std::vector<std::pair<std::string, Tensor>> dump_tensors() const override { return drawn_q_; }

  int64_t iteration() const { return iteration_; }

 private:
  struct Matrix;
  struct BucketState;

  bool compressing() const { return iteration_ >= options_.start_iter; }
  BucketState& state_for(HookBucket& b);
  void prepare_q(HookBucket& b, BucketState& s);
  void draw_q(const HookBucket& b, const Matrix& m);

  PowerSgdOptions options_;
  int64_t iteration_ = 0;  // synchronising iterations finished
  int64_t draws_ = 0;      // random Q draws so far (each one a new seed stream)
  std::vector<std::unique_ptr<BucketState>> states_;  // per bucket index
  std::vector<std::pair<std::string, Tensor>> drawn_q_;
};

}  // namespace ddpb::ddp
