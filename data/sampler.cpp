#include "data/sampler.h"

#include "core/check.h"
#include "data/torch_random.h"

namespace ddpb {

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank,
                                       bool shuffle, uint64_t seed, bool drop_last, bool pad)
    : dataset_size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last),
      pad_(pad) {
  DDPB_USAGE_CHECK(dataset_size >= 0)
      << "DistributedSampler: dataset size must be >= 0, got " << dataset_size;
  DDPB_USAGE_CHECK(num_replicas >= 1)
      << "DistributedSampler: num_replicas must be >= 1, got " << num_replicas;
  DDPB_USAGE_CHECK(rank >= 0 && rank < num_replicas)
      << "DistributedSampler: rank " << rank << " is outside [0, " << num_replicas << ")";
  // PyTorch computes ceil((n - R) / R) for drop_last with n % R != 0; that is floor(n / R),
  // including 0 when n < R. Without drop_last it is ceil(n / R).
  num_samples_ =
      drop_last ? dataset_size / num_replicas : (dataset_size + num_replicas - 1) / num_replicas;
  if (!pad && !drop_last) {
    num_samples_ =
        dataset_size > rank ? (dataset_size - rank + num_replicas - 1) / num_replicas : 0;
  }
}

void DistributedSampler::set_epoch(int64_t epoch) {
  DDPB_USAGE_CHECK(epoch >= 0) << "DistributedSampler: epoch must be >= 0, got " << epoch;
  epoch_ = epoch;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> order;
  if (shuffle_) {
    order = torch_randperm(dataset_size_, seed_ + static_cast<uint64_t>(epoch_));
  } else {
    order.resize(static_cast<size_t>(dataset_size_));
    for (int64_t i = 0; i < dataset_size_; ++i) order[static_cast<size_t>(i)] = i;
  }
  // Position p of the padded (or cut) list of total_size() entries is order[p % n]: that is
  // both "repeat from the start" padding and, when p < n always holds, the drop_last cut.
  std::vector<int64_t> mine(static_cast<size_t>(num_samples_));
  for (int64_t i = 0; i < num_samples_; ++i) {
    int64_t p = rank_ + i * num_replicas_;
    mine[static_cast<size_t>(i)] = order[static_cast<size_t>(p % dataset_size_)];
  }
  return mine;
}

}  // namespace ddpb
