// ZeRO's shard math: a pure function, unit-tested without any communication, as
// compute_bucket_assignment is (impl_ddp/bucket_assignment.h).
//
// Note [ZeRO shards]
// ~~~~~~~~~~~~~~~~~~
// A ZeRO stage shards each bucket over the ranks: the bucket's flat buffer is padded with
// zeros to a multiple of the world size N, so that a reduce-scatter gives every rank an equal
// chunk, and rank r owns elements [r·S, (r+1)·S) of it, S = padded / N. Its shard of the
// bucket is that range clipped to the bucket's real elements (the last ranks' may be partly
// or wholly padding). The shard crosses the bucket's parameters: each parameter's part of it
// is one contiguous segment of that parameter's flat elements, which is what the rank's
// optimizer steps. Every rank computes the same layout from the same bucket sizes, so the
// chunks of a reduce-scatter and of the all-gather that follows line up on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ddpb::ddp {

struct BucketShard {
  int64_t numel = 0;   // the bucket's real elements
  int64_t padded = 0;  // numel rounded up to a multiple of the world size
  int64_t chunk = 0;   // padded / world size: every rank's chunk of a reduce-scatter
  int64_t begin = 0;   // this rank's real elements: [begin, end) of the bucket
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// Rank `rank` of `world` ranks' shard of a bucket of `numel` elements. Throws UsageError for
// a rank outside the world or a negative size.
BucketShard shard_bucket(int64_t numel, int world, int rank);

// One parameter's part of a rank's shard.
struct ShardSegment {
  size_t param = 0;           // the parameter's index, as the bucket lists it
  int64_t param_offset = 0;   // first element of the segment within the parameter
  int64_t bucket_offset = 0;  // and within the bucket
  int64_t numel = 0;
};

// The segments of `shard` over a bucket whose parameters `params` hold `numels` elements each,
// laid out one after another in that order; parameters outside the shard have none.
std::vector<ShardSegment> shard_segments(const std::vector<size_t>& params,
                                         const std::vector<int64_t>& numels,
                                         const BucketShard& shard);

}  // namespace ddpb::ddp
