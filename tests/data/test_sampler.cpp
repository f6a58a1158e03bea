// DistributedSampler: PyTorch's padding, striding and drop_last rules, epoch shuffling, and
// the index sequence of torch.utils.data.DistributedSampler itself, element for element.
#include "data/sampler.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "data/torch_random.h"

namespace ddpb {
namespace {

std::vector<std::vector<int64_t>> all_ranks(int64_t n, int replicas, bool shuffle, bool drop_last,
                                            int64_t epoch, uint64_t seed = 17) {
  std::vector<std::vector<int64_t>> out;
  for (int r = 0; r < replicas; ++r) {
    DistributedSampler s(n, replicas, r, shuffle, seed, drop_last);
    s.set_epoch(epoch);
    out.push_back(s.indices());
  }
  return out;
}

TEST(Sampler, MatchesPyTorchWithoutShuffle) {
  // torch.utils.data.DistributedSampler(range(10), num_replicas=3, rank=r, shuffle=False)
  auto ranks = all_ranks(10, 3, /*shuffle=*/false, /*drop_last=*/false, 0);
  EXPECT_EQ(ranks[0], (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(ranks[1], (std::vector<int64_t>{1, 4, 7, 0}));
  EXPECT_EQ(ranks[2], (std::vector<int64_t>{2, 5, 8, 1}));
  // ... and with drop_last=True.
  ranks = all_ranks(10, 3, /*shuffle=*/false, /*drop_last=*/true, 0);
  EXPECT_EQ(ranks[0], (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(ranks[1], (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(ranks[2], (std::vector<int64_t>{2, 5, 8}));
  // Padding longer than the dataset repeats it: [0, 1, 0, 1, 0] for n = 2, R = 5.
  ranks = all_ranks(2, 5, /*shuffle=*/false, /*drop_last=*/false, 0);
  for (int r = 0; r < 5; ++r) EXPECT_EQ(ranks[r], (std::vector<int64_t>{r % 2})) << "rank " << r;
}

TEST(Sampler, SizesFollowPyTorch) {
  struct Case {
    int64_t n;
    int replicas;
    bool drop_last;
    int64_t num_samples;
  };
  for (Case c :
       {Case{10, 3, false, 4}, Case{10, 3, true, 3}, Case{9, 3, false, 3}, Case{9, 3, true, 3},
        Case{2, 5, false, 1}, Case{2, 5, true, 0}, Case{0, 4, false, 0}, Case{1, 1, true, 1},
        Case{1000, 7, true, 142}, Case{1000, 7, false, 143}}) {
    DistributedSampler s(c.n, c.replicas, 0, /*shuffle=*/true, 1, c.drop_last);
    EXPECT_EQ(s.num_samples(), c.num_samples) << "n=" << c.n << " R=" << c.replicas;
    EXPECT_EQ(s.total_size(), c.num_samples * c.replicas);
    EXPECT_EQ(static_cast<int64_t>(s.indices().size()), c.num_samples);
  }
}

// For many (n, R, shuffle, drop_last): equal lengths on every rank; without drop_last every
// index appears, and exactly total_size - n indices appear twice (the padding); with
// drop_last no index repeats and only the tail n - total_size is missing. Rank r takes
// positions r, r + R, ... of one epoch order shared by all ranks.
TEST(Sampler, PartitionsEveryEpochAcrossRanks) {
  for (int64_t n : {1, 2, 5, 10, 17, 64, 101}) {
    for (int replicas : {1, 2, 3, 4, 8}) {
      for (bool shuffle : {false, true}) {
        for (bool drop_last : {false, true}) {
          for (int64_t epoch : {0, 3}) {
            SCOPED_TRACE(::testing::Message()
                         << "n=" << n << " R=" << replicas << " shuffle=" << shuffle
                         << " drop_last=" << drop_last << " epoch=" << epoch);
            auto ranks = all_ranks(n, replicas, shuffle, drop_last, epoch);
            DistributedSampler s0(n, replicas, 0, shuffle, 17, drop_last);
            for (const auto& r : ranks) ASSERT_EQ(static_cast<int64_t>(r.size()), s0.num_samples());
            std::map<int64_t, int> count;
            for (const auto& r : ranks)
              for (int64_t i : r) {
                ASSERT_GE(i, 0);
                ASSERT_LT(i, n);
                ++count[i];
              }
            if (!drop_last) {
              EXPECT_EQ(static_cast<int64_t>(count.size()), n) << "an index is missing";
              int64_t extra = 0;
              for (auto [i, c] : count) extra += c - 1;
              EXPECT_EQ(extra, s0.total_size() - n) << "padding count";
            } else {
              for (auto [i, c] : count) EXPECT_EQ(c, 1) << "index " << i << " repeats";
              EXPECT_EQ(static_cast<int64_t>(count.size()), s0.total_size());
            }
            // Interleave the ranks back into one order: position p = r + i * R.
            std::vector<int64_t> order(static_cast<size_t>(s0.total_size()));
            for (int r = 0; r < replicas; ++r)
              for (size_t i = 0; i < ranks[r].size(); ++i) order[r + i * replicas] = ranks[r][i];
            if (!shuffle) {
              for (size_t p = 0; p < order.size(); ++p)
                EXPECT_EQ(order[p], static_cast<int64_t>(p) % n) << "position " << p;
            } else if (!drop_last) {
              // The padding repeats the start of the same epoch order.
              for (size_t p = static_cast<size_t>(n); p < order.size(); ++p)
                EXPECT_EQ(order[p], order[p % n]) << "position " << p;
            }
          }
        }
      }
    }
  }
}

TEST(Sampler, ShuffleChangesWithEpochAndSeedButIsReproducible) {
  DistributedSampler a(1000, 4, 1, /*shuffle=*/true, 42, /*drop_last=*/false);
  DistributedSampler b(1000, 4, 1, /*shuffle=*/true, 42, /*drop_last=*/false);
  EXPECT_EQ(a.indices(), b.indices());
  auto epoch0 = a.indices();
  a.set_epoch(1);
  EXPECT_EQ(a.epoch(), 1);
  EXPECT_NE(a.indices(), epoch0);
  a.set_epoch(0);
  EXPECT_EQ(a.indices(), epoch0) << "an epoch's order must not depend on history";
  DistributedSampler c(1000, 4, 1, /*shuffle=*/true, 43, /*drop_last=*/false);
  EXPECT_NE(c.indices(), epoch0);
  // Not the identity order either.
  DistributedSampler plain(1000, 4, 1, /*shuffle=*/false, 42, /*drop_last=*/false);
  EXPECT_NE(plain.indices(), epoch0);
  plain.set_epoch(5);
  DistributedSampler plain0(1000, 4, 1, /*shuffle=*/false, 42, /*drop_last=*/false);
  EXPECT_EQ(plain.indices(), plain0.indices()) << "without shuffle the epoch does not matter";
}

TEST(Sampler, RejectsBadArguments) {
  EXPECT_THROW(DistributedSampler(-1, 1, 0, false, 0, false), UsageError);
  EXPECT_THROW(DistributedSampler(10, 0, 0, false, 0, false), UsageError);
  EXPECT_THROW(DistributedSampler(10, 2, 2, false, 0, false), UsageError);
  EXPECT_THROW(DistributedSampler(10, 2, -1, false, 0, false), UsageError);
  DistributedSampler s(10, 2, 1, false, 0, false);
  EXPECT_THROW(s.set_epoch(-1), UsageError);
  try {
    DistributedSampler(10, 4, 7, false, 0, false);
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 7"), std::string::npos) << e.what();
  }
}

// The shuffle order is torch.randperm's (Note [torch.randperm on the CPU]).
TEST(Sampler, RandpermIsTorchsForKnownSeeds) {
  // torch.randperm(10, generator=torch.Generator().manual_seed(5)).tolist() (PyTorch 1.13).
  EXPECT_EQ(torch_randperm(10, 5), (std::vector<int64_t>{1, 4, 9, 6, 3, 5, 0, 2, 8, 7}));
  EXPECT_EQ(torch_randperm(5, 0), (std::vector<int64_t>{4, 0, 1, 3, 2}));
  EXPECT_EQ(torch_randperm(1, 3), (std::vector<int64_t>{0}));
  EXPECT_TRUE(torch_randperm(0, 3).empty());
}

// Issue 26: a ddpbench run and a PyTorch job read the same samples. For every configuration of
// the grid (tests/data/torch_sampler_grid.py: sizes to 100,003, 1 to 8 replicas, seeds up to
// 2^40, epochs, shuffle and drop_last both ways), the indices equal PyTorch's DistributedSampler's.
TEST(Sampler, EqualsTorchsDistributedSamplerElementForElement) {
  const std::string cmd = std::string(DDPB_TEST_PYTHON) + " " + DDPB_SAMPLER_GRID + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string text;
  char buf[1 << 16];
  while (size_t n = std::fread(buf, 1, sizeof(buf), pipe)) text.append(buf, n);
  const int status = ::pclose(pipe);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) GTEST_SKIP() << text.substr(0, 300);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << text.substr(0, 2000);
  std::istringstream lines(text);
  int compared = 0;
  for (std::string line; std::getline(lines, line);) {
    const size_t colon = line.find(':');
    if (line.rfind("torch ", 0) == 0 || colon == std::string::npos) continue;
    std::istringstream head(line.substr(0, colon)), body(line.substr(colon + 1));
    int64_t n = 0, epoch = 0;
    int replicas = 0, rank = 0, shuffle = 0, drop_last = 0;
    uint64_t seed = 0;
    head >> n >> replicas >> rank >> seed >> epoch >> shuffle >> drop_last;
    std::vector<int64_t> want;
    for (int64_t v; body >> v;) want.push_back(v);
    DistributedSampler s(n, replicas, rank, shuffle != 0, seed, drop_last != 0);
    s.set_epoch(epoch);
    ASSERT_EQ(s.indices(), want) << line.substr(0, colon);
    ++compared;
  }
  EXPECT_GT(compared, 1000) << text.substr(0, 500);
}

}  // namespace
}  // namespace ddpb
