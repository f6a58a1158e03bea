// compute_bucket_assignment is a pure function: caps, first bucket, reverse order, dtype
// and device separation, one huge parameter.
#include <gtest/gtest.h>

#include "core/check.h"
#include "impl_ddp/bucket_assignment.h"

namespace ddpb::ddp {
namespace {

std::vector<ParamInfo> f32(std::vector<int64_t> numels) {
  std::vector<ParamInfo> out;
  for (int64_t n : numels) out.push_back({n, DType::F32, Device::cpu()});
  return out;
}

constexpr size_t kB = 4;  // bytes per f32

TEST(BucketAssignment, WalksParametersInReverseOrder) {
  auto a = compute_bucket_assignment(f32({10, 10, 10, 10}), 1 << 20, 1 << 20);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0], (std::vector<size_t>{3, 2, 1, 0}));
}

TEST(BucketAssignment, FirstBucketHasItsOwnSmallerCap) {
  // Caps in bytes: first 80 (20 floats), then 200 (50 floats). A bucket closes once it
  // reaches its cap.
  auto a = compute_bucket_assignment(f32({10, 10, 10, 10, 10, 10}), 20 * kB, 50 * kB);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0], (std::vector<size_t>{5, 4}));        // 20 floats: reaches the first cap
  EXPECT_EQ(a[1], (std::vector<size_t>{3, 2, 1, 0}));  // 40 floats: under 50, left open
}

TEST(BucketAssignment, CapsSplitLaterBuckets) {
  auto a = compute_bucket_assignment(f32({30, 30, 30, 30, 30}), 30 * kB, 60 * kB);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0], (std::vector<size_t>{4}));
  EXPECT_EQ(a[1], (std::vector<size_t>{3, 2}));
  EXPECT_EQ(a[2], (std::vector<size_t>{1, 0}));
}

TEST(BucketAssignment, OneHugeParameterGetsItsOwnBucket) {
  auto a = compute_bucket_assignment(f32({5, 1000000, 5}), 100 * kB, 100 * kB);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0], (std::vector<size_t>{2, 1}));  // 5 + 1e6 floats: over the cap, closes
  EXPECT_EQ(a[1], (std::vector<size_t>{0}));
  auto b = compute_bucket_assignment(f32({1000000}), 1, 1);
  EXPECT_EQ(b, (BucketAssignment{{0}}));
}

TEST(BucketAssignment, DtypesAndDevicesNeverShareABucket) {
  std::vector<ParamInfo> ps = {{10, DType::F32, Device::cpu()},
                               {10, DType::F16, Device::cpu()},
                               {10, DType::F32, Device::cpu(1)},
                               {10, DType::F32, Device::cpu()}};
  auto a = compute_bucket_assignment(ps, 1 << 20, 1 << 20);
  ASSERT_EQ(a.size(), 3u);
  for (const auto& bucket : a) {
    for (size_t i : bucket) {
      EXPECT_EQ(ps[i].dtype, ps[bucket[0]].dtype);
      EXPECT_EQ(ps[i].device, ps[bucket[0]].device);
    }
  }
  // Ordered by the walk position of their first member: param 3 is walked first.
  EXPECT_EQ(a[0], (std::vector<size_t>{3, 0}));
  EXPECT_EQ(a[1], (std::vector<size_t>{2}));
  EXPECT_EQ(a[2], (std::vector<size_t>{1}));
}

TEST(BucketAssignment, FollowsAnObservedReadyOrder) {
  auto a = compute_bucket_assignment(f32({10, 10, 10, 10}), 20 * kB, 20 * kB, {1, 3, 0, 2});
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0], (std::vector<size_t>{1, 3}));
  EXPECT_EQ(a[1], (std::vector<size_t>{0, 2}));
}

TEST(BucketAssignment, EveryParameterExactlyOnce) {
  std::vector<int64_t> sizes;
  for (int i = 0; i < 57; ++i) sizes.push_back(1 + (i * 7919) % 300);
  auto a = compute_bucket_assignment(f32(sizes), 256, 1024);
  std::vector<int> count(sizes.size(), 0);
  for (auto& b : a)
    for (size_t i : b) ++count[i];
  for (int c : count) EXPECT_EQ(c, 1);
}

TEST(BucketAssignment, RejectsBadInput) {
  EXPECT_THROW(compute_bucket_assignment(f32({1, 2}), 0, 10), Error);
  EXPECT_THROW(compute_bucket_assignment(f32({1, 2}), 10, 10, {0}), Error);
  EXPECT_THROW(compute_bucket_assignment(f32({1, 2}), 10, 10, {0, 0}), Error);
}

}  // namespace
}  // namespace ddpb::ddp
