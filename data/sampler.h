// DistributedSampler: which sample indices each rank reads in an epoch, with the semantics
// of torch.utils.data.DistributedSampler so that runs are comparable with PyTorch DDP.
//
// Per epoch:
//  1. order = shuffle ? torch_randperm(n, seed + epoch) : 0, 1, ..., n-1
//  2. without drop_last: num_samples = ceil(n / R), and the order is padded to
//     total_size = num_samples * R by repeating it from the start (as often as needed);
//     with drop_last: num_samples = floor(n / R) and the order is cut to total_size.
//  3. rank r takes order[r], order[r + R], order[r + 2R], ...
// Every rank therefore gets exactly num_samples indices, so all ranks run the same number
// of steps and issue the same collectives (a rank that ran one step more would hang DDP).
// With pad = false (ddpbench's unpadded sampler, not PyTorch's), step 2 is skipped: rank r
// takes order[r], order[r + R], ... below n, so ranks get ceil((n - r) / R) samples each:
// uneven inputs, for DDP's Join (Note [DDP Join] in impl_ddp/distributed_data_parallel.h).
// The permutation is torch.randperm's (Note [torch.randperm on the CPU], data/torch_random.h):
// the index sequence equals torch.utils.data.DistributedSampler's element for element, for
// every (size, replicas, rank, seed, epoch, shuffle, drop_last) (tests/data/test_sampler.cpp
// holds it against PyTorch 1.13 itself).
//
// Threads: a value type with no shared state; const methods may run concurrently, and
// set_epoch() must not race with them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ddpb {

class DistributedSampler {
 public:
  // Throws UsageError unless dataset_size >= 0, num_replicas >= 1 and
  // 0 <= rank < num_replicas. Starts at epoch 0.
  DistributedSampler(int64_t dataset_size, int num_replicas, int rank, bool shuffle, uint64_t seed,
                     bool drop_last, bool pad = true);

  // Selects the epoch whose order indices() returns (the shuffle seed is seed + epoch).
  // Throws UsageError for a negative epoch.
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }

  // This rank's num_samples() indices for the current epoch, in reading order.
  std::vector<int64_t> indices() const;

  int64_t num_samples() const { return num_samples_; }  // per rank
  int64_t total_size() const { return num_samples_ * num_replicas_; }
  // Samples read twice in an epoch, over all ranks: the padding by repetition (0 with
  // drop_last, which drops instead).
  int64_t padded_samples() const {
    return pad_ ? std::max<int64_t>(0, total_size() - dataset_size_) : 0;
  }
  int64_t dataset_size() const { return dataset_size_; }
  int num_replicas() const { return num_replicas_; }
  int rank() const { return rank_; }
  bool shuffle() const { return shuffle_; }
  bool drop_last() const { return drop_last_; }
  bool pad() const { return pad_; }
  uint64_t seed() const { return seed_; }

 private:
  int64_t dataset_size_;
  int num_replicas_;
  int rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  bool pad_;
  int64_t num_samples_;
  int64_t epoch_ = 0;
};

}  // namespace ddpb
