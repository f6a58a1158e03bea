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

// Two ranks from MASTER_ADDR/MASTER_PORT: rank 0 serves the store, both get a working group.
TEST(Rendezvous, RanksJoinFromTheEnvironmentAndTheirGroupWorks) {
  const int port = find_free_port("127.0.0.1");
  ASSERT_EQ(::setenv("MASTER_ADDR", "127.0.0.1", 1), 0);
  ASSERT_EQ(::setenv("MASTER_PORT", std::to_string(port).c_str(), 1), 0);
  std::vector<std::vector<float>> sums(2);
  std::vector<int64_t> offsets(2, -1);
  std::vector<std::string> errors(2);
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
        Rendezvous joined = init_process_group(env, options);
        Tensor t = Tensor::from_floats({float(r + 1), 10}, {2}, Device::cpu(r));
        joined.group->allreduce(t)->wait();
        sums[size_t(r)] = t.to_floats();
        offsets[size_t(r)] = joined.clock_offset_ns;
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  ::unsetenv("MASTER_ADDR");
  ::unsetenv("MASTER_PORT");
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
    EXPECT_EQ(sums[size_t(r)], (std::vector<float>{3, 20})) << "rank " << r;
  }
  EXPECT_EQ(offsets[0], 0);
}

// Two ranks through file://PATH: no port, a working group, and the file gone once both
// closed their store (the last FileStore of the world removes it).
TEST(Rendezvous, RanksJoinThroughAFileWhichTheLastRankRemoves) {
  testing::TempDir dir("file_rendezvous");
  const std::string path = dir / "store";
  std::vector<std::vector<float>> sums(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      try {
        RankEnv env;
        env.rank = env.local_rank = r;
        env.world_size = 2;
        RendezvousOptions options;
        options.device = Device::cpu(r);
        options.timeout = std::chrono::seconds(20);
        options.job_identity = "file-rendezvous-test";
        options.init_method = "file://" + path;
        Rendezvous joined = init_process_group(env, options);
        Tensor t = Tensor::from_floats({float(r + 1), 10}, {2}, Device::cpu(r));
        joined.group->allreduce(t)->wait();
        sums[size_t(r)] = t.to_floats();
        // Keys live under the job's identity, so another job's leftovers cannot answer.
        joined.store->set_string("probe", "x");
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
    EXPECT_EQ(sums[size_t(r)], (std::vector<float>{3, 20})) << "rank " << r;
  }
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
