// comm/rendezvous.h: joining a job from the rank environment (init_process_group's env://
// and file://), Note [File rendezvous] and Note [Clock offset through the store].
#include "comm/rendezvous.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <thread>
#include <vector>

#include <filesystem>

#include "../util/temp_dir.h"
#include "comm/hash_store.h"
#include "comm/launcher.h"
#include "core/check.h"

namespace ddpb::comm {
namespace {

// Ranks that share one steady clock (threads of this process) measure offsets of about zero:
// the estimate is off by at most half a round trip through the store.
TEST(Rendezvous, ClockOffsetsOfOneClockAreAboutZero) {
  auto store = std::make_shared<HashStore>();
  store->set_timeout(std::chrono::seconds(10));
  std::vector<int64_t> offsets(3, -1);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] { offsets[size_t(r)] = sync_clock(*store, r, 3); });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(offsets[0], 0);
  for (int r = 1; r < 3; ++r) EXPECT_LT(std::llabs(offsets[size_t(r)]), 50'000'000) << r;
}

struct Joined {
  std::vector<float> sum;
  int64_t offset = -1;
  std::string error;
};

// Two thread-ranks join through `init_method` and AllReduce {rank + 1, 10}.
std::vector<Joined> join_two_ranks(const std::string& init_method, int port) {
  std::vector<Joined> out(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      try {
        RankEnv env;
        env.rank = env.local_rank = r;
        env.world_size = 2;
        env.master_port = port;
        RendezvousOptions options;
        options.device = Device::cpu(r);
        options.timeout = std::chrono::seconds(20);
        options.job_identity = "rendezvous-test";
        options.init_method = init_method;
        Rendezvous joined = init_process_group(env, options);
        Tensor t = Tensor::from_floats({float(r + 1), 10}, {2}, Device::cpu(r));
        joined.group->allreduce(t)->wait();
        out[size_t(r)].sum = t.to_floats();
        out[size_t(r)].offset = joined.clock_offset_ns;
      } catch (const std::exception& e) {
        out[size_t(r)].error = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  return out;
}

void expect_summed(const std::vector<Joined>& ranks) {
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ranks[size_t(r)].error, "") << "rank " << r;
    EXPECT_EQ(ranks[size_t(r)].sum, (std::vector<float>{3, 20})) << "rank " << r;
  }
  EXPECT_EQ(ranks[0].offset, 0);
}

// Two ranks from MASTER_ADDR/MASTER_PORT: rank 0 serves the store, both get a working group.
TEST(Rendezvous, RanksJoinFromTheEnvironmentAndTheirGroupWorks) {
  const int port = find_free_port("127.0.0.1");
  ASSERT_EQ(::setenv("MASTER_ADDR", "127.0.0.1", 1), 0);
  ASSERT_EQ(::setenv("MASTER_PORT", std::to_string(port).c_str(), 1), 0);
  const auto ranks = join_two_ranks("env://", port);
  ::unsetenv("MASTER_ADDR");
  ::unsetenv("MASTER_PORT");
  expect_summed(ranks);
}

// Two ranks through file://PATH: no port, a working group, and the file gone once both
// closed their store (the last FileStore of the world removes it).
TEST(Rendezvous, RanksJoinThroughAFileWhichTheLastRankRemoves) {
  testing::TempDir dir("file_rendezvous");
  const std::string path = dir / "store";
  expect_summed(join_two_ranks("file://" + path, 0));
  EXPECT_FALSE(std::filesystem::exists(path)) << "the last rank removes the store's file";
}

TEST(Rendezvous, InitMethodsOtherThanEnvAndFileAreUsageErrors) {
  EXPECT_NO_THROW(check_init_method("env://"));
  EXPECT_NO_THROW(check_init_method("file:///tmp/ddpbench-store"));
  for (const char* bad : {"", "tcp://127.0.0.1:29500", "file://", "env:/", "FILE:///tmp/x"})
    EXPECT_THROW(check_init_method(bad), UsageError) << bad;
  try {
    check_init_method("file:///no/such/folder/store");
    ADD_FAILURE() << "a missing folder is refused";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("/no/such/folder"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ddpb::comm
