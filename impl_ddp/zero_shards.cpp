#include "impl_ddp/zero_shards.h"

#include <algorithm>

#include "core/check.h"

namespace ddpb::ddp {

BucketShard shard_bucket(int64_t numel, int world, int rank) {
  DDPB_USAGE_CHECK(world >= 1 && rank >= 0 && rank < world)
      << "rank " << rank << " is outside a world of " << world;
  DDPB_USAGE_CHECK(numel >= 0) << "a bucket of " << numel << " elements";
  BucketShard s;
  s.numel = numel;
  s.chunk = (numel + world - 1) / world;
  s.padded = s.chunk * world;
  s.begin = std::min(numel, rank * s.chunk);
  s.end = std::min(numel, (rank + 1) * s.chunk);
  return s;
}

std::vector<ShardSegment> shard_segments(const std::vector<size_t>& params,
                                         const std::vector<int64_t>& numels,
                                         const BucketShard& shard) {
  DDPB_CHECK(params.size() == numels.size())
      << params.size() << " parameters but " << numels.size() << " sizes";
  std::vector<ShardSegment> out;
  int64_t at = 0;  // the parameter's first element within the bucket
  for (size_t k = 0; k < params.size(); ++k) {
    const int64_t lo = std::max(at, shard.begin), hi = std::min(at + numels[k], shard.end);
    if (lo < hi) out.push_back({params[k], lo - at, lo, hi - lo});
    at += numels[k];
  }
  DDPB_CHECK(at == shard.numel) << "the parameters hold " << at << " elements, the bucket "
                                << shard.numel;
  return out;
}

}  // namespace ddpb::ddp
