// Note [ZeRO shards]: the shard math, without communication.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "core/check.h"
#include "impl_ddp/zero_shards.h"

namespace ddpb::ddp {
namespace {

TEST(ZeroShards, EveryRankGetsAnEqualChunkOfThePaddedBucket) {
  const BucketShard last = shard_bucket(10, 4, 3);  // 10 elements padded to 12: chunks of 3
  EXPECT_EQ(last.padded, 12);
  EXPECT_EQ(last.chunk, 3);
  EXPECT_EQ(last.begin, 9);
  EXPECT_EQ(last.end, 10) << "the last rank's chunk is two thirds padding";
  const BucketShard even = shard_bucket(12, 4, 1);
  EXPECT_EQ(even.padded, 12);
  EXPECT_EQ(even.begin, 3);
  EXPECT_EQ(even.end, 6);
  const BucketShard one = shard_bucket(7, 1, 0);
  EXPECT_EQ(one.padded, 7);
  EXPECT_EQ(one.size(), 7);
}

TEST(ZeroShards, ABucketSmallerThanTheWorldLeavesSomeRanksOnlyPadding) {
  const BucketShard s = shard_bucket(3, 8, 5);
  EXPECT_EQ(s.padded, 8);
  EXPECT_EQ(s.chunk, 1);
  EXPECT_EQ(s.size(), 0) << "ranks 3..7 own padding only";
  EXPECT_EQ(shard_bucket(3, 8, 2).size(), 1);
  EXPECT_EQ(shard_bucket(0, 4, 0).padded, 0);
}

// The ranks' shards cover the bucket once, in order, for every size and world.
TEST(ZeroShards, TheShardsPartitionTheBucket) {
  for (int world : {1, 2, 3, 4, 7, 8}) {
    for (int64_t numel : {0, 1, 5, 16, 17, 1000, 1023}) {
      int64_t covered = 0;
      for (int r = 0; r < world; ++r) {
        const BucketShard s = shard_bucket(numel, world, r);
        EXPECT_EQ(s.padded % world, 0);
        EXPECT_LT(s.padded - numel, world) << "padding is less than one element a rank";
        EXPECT_EQ(s.begin, covered) << "world " << world << " numel " << numel << " rank " << r;
        covered = s.end;
      }
      EXPECT_EQ(covered, numel);
    }
  }
}

// A shard that crosses parameters gives each its own segment; a parameter wholly outside the
// shard has none.
TEST(ZeroShards, SegmentsFollowTheParametersInsideTheShard) {
  const std::vector<size_t> params = {7, 2, 5};
  const std::vector<int64_t> numels = {4, 6, 2};  // bucket offsets 0, 4, 10; 12 elements
  const std::vector<ShardSegment> rank1 = shard_segments(params, numels, shard_bucket(12, 3, 1));
  ASSERT_EQ(rank1.size(), 1u);  // elements [4, 8): inside parameter 2
  EXPECT_EQ(rank1[0].param, 2u);
  EXPECT_EQ(rank1[0].param_offset, 0);
  EXPECT_EQ(rank1[0].bucket_offset, 4);
  EXPECT_EQ(rank1[0].numel, 4);
  const std::vector<ShardSegment> rank2 = shard_segments(params, numels, shard_bucket(12, 3, 2));
  ASSERT_EQ(rank2.size(), 2u);  // elements [8, 12): the end of parameter 2, all of 5
  EXPECT_EQ(rank2[0].param, 2u);
  EXPECT_EQ(rank2[0].param_offset, 4);
  EXPECT_EQ(rank2[0].numel, 2);
  EXPECT_EQ(rank2[1].param, 5u);
  EXPECT_EQ(rank2[1].param_offset, 0);
  EXPECT_EQ(rank2[1].bucket_offset, 10);
  EXPECT_EQ(rank2[1].numel, 2);
  // Over every rank, each element of each parameter is in exactly one segment.
  for (int world : {1, 2, 5, 13}) {
    std::vector<int64_t> owned(12, 0);
    for (int r = 0; r < world; ++r) {
      for (const ShardSegment& s : shard_segments(params, numels, shard_bucket(12, world, r)))
        for (int64_t i = 0; i < s.numel; ++i) ++owned[static_cast<size_t>(s.bucket_offset + i)];
    }
    EXPECT_EQ(owned, std::vector<int64_t>(12, 1)) << "world " << world;
  }
}

TEST(ZeroShards, ABadRankOrSizeIsAUsageError) {
  EXPECT_THROW(shard_bucket(10, 4, 4), UsageError);
  EXPECT_THROW(shard_bucket(10, 0, 0), UsageError);
  EXPECT_THROW(shard_bucket(-1, 2, 0), UsageError);
}

}  // namespace
}  // namespace ddpb::ddp
