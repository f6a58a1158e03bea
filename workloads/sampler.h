// DistributedSampler: which sample indices each rank reads in an epoch, with the semantics
// of torch.utils.data.DistributedSampler so that runs are comparable with PyTorch DDP.
//
// Per epoch:
//  1. order = shuffle ? rng_permutation(seed + epoch, kSamplerRngStream, n) : 0, 1, ..., n-1
//  2. without drop_last: num_samples = ceil(n / R), and the order is padded to
//     total_size = num_samples * R by repeating it from the start (as often as needed);
//     with drop_last: num_samples = floor(n / R) and the order is cut to total_size.
//  3. rank r takes order[r], order[r + R], order[r + 2R], ...
// Every rank therefore gets exactly num_samples indices, so all ranks run the same number
// of steps and issue the same collectives (a rank that ran one step more would hang DDP).
// The permutation itself differs from PyTorch's (our generator is core/rng.h, not
// torch.Generator); the padding, striding and lengths match exactly.
//
// Threads: a value type with no shared state; const methods may run concurrently, and
// set_epoch() must not race with them.
#pragma once

#include <cstdint>
#include <vector>

namespace ddpb {

// The rng stream of the shuffle permutation (the seed is seed + epoch).
inline constexpr uint64_t kSamplerRngStream = 0x5341'4D50'4C45'5231ull;  // "SAMPLER1"

class DistributedSampler {
 public:
  // Throws UsageError unless dataset_size >= 0, num_replicas >= 1 and
  // 0 <= rank < num_replicas. Starts at epoch 0.
  DistributedSampler(int64_t dataset_size, int num_replicas, int rank, bool shuffle, uint64_t seed,
                     bool drop_last);

  // Selects the epoch whose order indices() returns (the shuffle seed is seed + epoch).
  // Throws UsageError for a negative epoch.
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }

  // This rank's num_samples() indices for the current epoch, in reading order.
  std::vector<int64_t> indices() const;

  int64_t num_samples() const { return num_samples_; }  // per rank
  int64_t total_size() const { return num_samples_ * num_replicas_; }
  int64_t dataset_size() const { return dataset_size_; }
  int num_replicas() const { return num_replicas_; }
  int rank() const { return rank_; }
  bool shuffle() const { return shuffle_; }
  bool drop_last() const { return drop_last_; }
  uint64_t seed() const { return seed_; }

 private:
  int64_t dataset_size_;
  int num_replicas_;
  int rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t num_samples_;
  int64_t epoch_ = 0;
};

}  // namespace ddpb
