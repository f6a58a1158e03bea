// Synthetic datasets: determinism, seeds, ranges, and that each carries its signal.
#include "data/synthetic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "core/check.h"

namespace ddpb {
namespace {

struct Sample {
  std::vector<uint8_t> x;
  std::vector<int32_t> y;
  bool operator==(const Sample&) const = default;
};

Sample get(const Dataset& d, int64_t index) {
  Sample s;
  s.x.resize(static_cast<size_t>(shape_numel(d.x_shape())) * dtype_size(d.x_dtype()));
  s.y.resize(static_cast<size_t>(shape_numel(d.y_shape())));
  d.fill(index, 0, s.x.data(), s.y.data());
  return s;
}

std::vector<std::unique_ptr<Dataset>> datasets(uint64_t seed) {
  std::vector<std::unique_ptr<Dataset>> out;
  out.push_back(std::make_unique<ClassificationDataset>(500, 24, 5, seed));
  out.push_back(std::make_unique<MarkovTokenDataset>(500, 16, 50, seed));
  out.push_back(std::make_unique<BagOfIdsDataset>(500, 12, 1000, 7, seed));
  return out;
}

TEST(Dataset, SameSeedAndIndexGiveTheSameSampleInAnyOrder) {
  auto a = datasets(3);
  auto b = datasets(3);
  for (size_t k = 0; k < a.size(); ++k) {
    std::vector<Sample> forward;
    for (int64_t i = 0; i < 50; ++i) forward.push_back(get(*a[k], i));
    for (int64_t i = 49; i >= 0; --i) {
      EXPECT_EQ(get(*b[k], i), forward[static_cast<size_t>(i)])
          << "dataset " << k << " index " << i;
      EXPECT_EQ(get(*a[k], i), forward[static_cast<size_t>(i)])
          << "dataset " << k << " index " << i;
    }
  }
}

TEST(Dataset, DifferentSeedsAndIndicesDiffer) {
  auto a = datasets(3);
  auto b = datasets(4);
  for (size_t k = 0; k < a.size(); ++k) {
    int same_seed_diff = 0;
    int same_index_diff = 0;
    for (int64_t i = 0; i < 20; ++i) {
      same_seed_diff += get(*a[k], i) == get(*b[k], i);
      same_index_diff += get(*a[k], i) == get(*a[k], i + 1);
    }
    EXPECT_EQ(same_seed_diff, 0) << "dataset " << k;
    EXPECT_EQ(same_index_diff, 0) << "dataset " << k;
  }
}

TEST(Dataset, ShapesAndRanges) {
  ClassificationDataset cls(300, 10, 4, 1);
  EXPECT_EQ(cls.x_shape(), (Shape{10}));
  EXPECT_EQ(cls.y_shape(), (Shape{}));
  EXPECT_EQ(cls.x_dtype(), DType::F32);
  MarkovTokenDataset markov(300, 9, 33, 1);
  EXPECT_EQ(markov.x_shape(), (Shape{9}));
  EXPECT_EQ(markov.y_shape(), (Shape{9}));
  EXPECT_EQ(markov.x_dtype(), DType::I32);
  BagOfIdsDataset bag(300, 6, 100, 8, 1);
  EXPECT_EQ(bag.x_shape(), (Shape{6}));
  EXPECT_EQ(bag.y_shape(), (Shape{}));
  std::vector<int> class_seen(4, 0);
  for (int64_t i = 0; i < 300; ++i) {
    Sample c = get(cls, i);
    ASSERT_GE(c.y[0], 0);
    ASSERT_LT(c.y[0], 4);
    ++class_seen[static_cast<size_t>(c.y[0])];
    for (size_t j = 0; j < 10; ++j) {
      float v;
      std::memcpy(&v, c.x.data() + 4 * j, 4);
      ASSERT_TRUE(std::isfinite(v));
    }
    Sample m = get(markov, i);
    for (size_t t = 0; t < 9; ++t) {
      int32_t v;
      std::memcpy(&v, m.x.data() + 4 * t, 4);
      ASSERT_GE(v, 0);
      ASSERT_LT(v, 33);
      ASSERT_GE(m.y[t], 0);
      ASSERT_LT(m.y[t], 33);
    }
    Sample b = get(bag, i);
    ASSERT_GE(b.y[0], 0);
    ASSERT_LT(b.y[0], 8);
    for (size_t j = 0; j < 6; ++j) {
      int32_t v;
      std::memcpy(&v, b.x.data() + 4 * j, 4);
      ASSERT_GE(v, 0);
      ASSERT_LT(v, 100);
    }
  }
  for (int c = 0; c < 4; ++c) EXPECT_GT(class_seen[c], 40) << "class " << c << " is rare";
}

TEST(Dataset, MarkovTokensFollowTheChain) {
  MarkovTokenDataset d(400, 32, 64, 9);
  std::vector<int64_t> successor_rank_count(MarkovTokenDataset::kNumSuccessors, 0);
  int64_t steps = 0;
  for (int64_t i = 0; i < d.size(); ++i) {
    Sample s = get(d, i);
    std::vector<int32_t> x(32);
    std::memcpy(x.data(), s.x.data(), 32 * 4);
    for (int t = 0; t < 32; ++t) {
      if (t + 1 < 32) {
        ASSERT_EQ(x[t + 1], s.y[t]) << "y must be x shifted by one";
      }
      const int32_t* succ = d.successors(x[t]);
      int k = 0;
      while (k < MarkovTokenDataset::kNumSuccessors && succ[k] != s.y[t]) ++k;
      ASSERT_LT(k, MarkovTokenDataset::kNumSuccessors)
          << "token " << s.y[t] << " cannot follow " << x[t] << " (sample " << i << ")";
      ++successor_rank_count[static_cast<size_t>(k)];
      ++steps;
    }
  }
  // The most likely successor is taken about 55% of the time (at least: a repeated
  // successor absorbs the probability of a later slot).
  double first = static_cast<double>(successor_rank_count[0]) / static_cast<double>(steps);
  EXPECT_GT(first, 0.52);
  EXPECT_LT(first, 0.60);
}

TEST(Dataset, ClassificationIsLearnable) {
  // The nearest class mean classifies far better than chance (1/8) but not perfectly.
  ClassificationDataset d(2000, 32, 8, 5);
  int correct = 0;
  for (int64_t i = 0; i < d.size(); ++i) {
    Sample s = get(d, i);
    const auto* x = reinterpret_cast<const float*>(s.x.data());
    int best = -1;
    double best_dist = 1e300;
    for (int c = 0; c < d.classes(); ++c) {
      double dist = 0;
      for (int j = 0; j < d.features(); ++j) dist += std::pow(x[j] - d.class_mean(c)[j], 2);
      if (dist < best_dist) best_dist = dist, best = c;
    }
    correct += best == s.y[0];
  }
  double accuracy = correct / 2000.0;
  EXPECT_GT(accuracy, 0.6);
  EXPECT_LT(accuracy, 0.999);
}

TEST(Dataset, BagOfIdsCarriesTheClass) {
  BagOfIdsDataset d(1000, 20, 5000, 10, 2);
  int64_t congruent = 0;
  for (int64_t i = 0; i < d.size(); ++i) {
    Sample s = get(d, i);
    const auto* ids = reinterpret_cast<const int32_t*>(s.x.data());
    for (int j = 0; j < 20; ++j) congruent += ids[j] % 10 == s.y[0];
  }
  // 75% by construction plus 1/10 of the uniform 25%.
  double fraction = static_cast<double>(congruent) / 20000.0;
  EXPECT_NEAR(fraction, 0.75 + 0.25 / 10, 0.02);
}

TEST(Dataset, MakeBatchStacksSamplesInOrder) {
  MarkovTokenDataset d(100, 5, 20, 1);
  std::vector<int64_t> indices = {7, 3, 99, 3};
  for (bool pinned : {false, true}) {
    Batch b = make_batch(d, indices, 0, pinned);
    EXPECT_EQ(b.x.shape(), (Shape{4, 5}));
    EXPECT_EQ(b.y.shape(), (Shape{4, 5}));
    EXPECT_EQ(b.x.dtype(), DType::I32);
    EXPECT_EQ(b.y.dtype(), DType::I32);
    EXPECT_TRUE(b.x.device().is_cpu());
    EXPECT_EQ(b.x.storage()->pinned(), pinned);
    for (size_t r = 0; r < indices.size(); ++r) {
      Sample s = get(d, indices[r]);
      EXPECT_EQ(std::memcmp(b.x.data<int32_t>() + 5 * r, s.x.data(), 20), 0) << "row " << r;
      EXPECT_EQ(std::memcmp(b.y.data<int32_t>() + 5 * r, s.y.data(), 20), 0) << "row " << r;
    }
  }
  ClassificationDataset c(10, 3, 2, 1);
  Batch cb = make_batch(c, {0, 9});
  EXPECT_EQ(cb.x.shape(), (Shape{2, 3}));
  EXPECT_EQ(cb.y.shape(), (Shape{2}));
  EXPECT_THROW(make_batch(c, {10}), Error);
  EXPECT_THROW(make_batch(c, {-1}), Error);
  EXPECT_THROW(make_batch(c, {}), Error);
}

TEST(Dataset, RejectsBadArguments) {
  EXPECT_THROW(ClassificationDataset(0, 4, 2, 1), UsageError);
  EXPECT_THROW(ClassificationDataset(10, 0, 2, 1), UsageError);
  EXPECT_THROW(ClassificationDataset(10, 4, 1, 1), UsageError);
  EXPECT_THROW(MarkovTokenDataset(10, 0, 20, 1), UsageError);
  EXPECT_THROW(MarkovTokenDataset(10, 4, 1, 1), UsageError);
  EXPECT_THROW(BagOfIdsDataset(10, 4, 5, 8, 1), UsageError);
  EXPECT_THROW(BagOfIdsDataset(10, 0, 50, 8, 1), UsageError);
}

}  // namespace
}  // namespace ddpb
