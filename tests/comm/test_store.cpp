// One suite for every Store: the semantics of comm/store.h, run against HashStore, FileStore
// and TCPStore; FileStore and TCPStore also across forked processes.
#include <gmock/gmock.h>

#include "store_test_util.h"

namespace ddpb::comm::testing {
namespace {

using ::testing::HasSubstr;

Bytes bytes(const std::string& s) {
  return Bytes(s.begin(), s.end());
}

template <typename W>
class StoreTest : public ::testing::Test {
 protected:
  W world;
};

using AllWorlds = ::testing::Types<HashWorld, FileWorld, TcpWorld>;
TYPED_TEST_SUITE(StoreTest, AllWorlds, WorldNames);

TYPED_TEST(StoreTest, SetGetOverwrite) {
  auto a = this->world.client();
  auto b = this->world.client();
  a->set_string("k", "one");
  EXPECT_EQ(a->get_string("k"), "one");
  EXPECT_EQ(b->get_string("k"), "one");
  b->set_string("k", "two");
  EXPECT_EQ(a->get_string("k"), "two");

  const Bytes binary = {0, 1, 0, 255, 10};
  a->set("bin", binary);
  EXPECT_EQ(b->get("bin"), binary);
  a->set("empty", {});
  EXPECT_TRUE(b->get("empty").empty());
}

TYPED_TEST(StoreTest, GetAndWaitTimeOutWithStoreTimeout) {
  auto s = this->world.client();
  s->set_timeout(200ms);
  auto t0 = Clock::now();
  try {
    s->get("missing-key");
    FAIL() << "get of a missing key returned";
  } catch (const StoreTimeout& e) {
    EXPECT_THAT(e.what(), HasSubstr("missing-key"));
    EXPECT_THAT(e.what(), HasSubstr("200 ms"));
  }
  double ms = ms_since(t0);
  EXPECT_GE(ms, 190);
  EXPECT_LT(ms, 2000);

  s->set_string("present", "x");
  t0 = Clock::now();
  EXPECT_THROW(s->wait({"present", "also-missing"}), StoreTimeout);
  EXPECT_LT(ms_since(t0), 2000);
}

TYPED_TEST(StoreTest, AddCountsAndIsReadableAsDecimal) {
  auto s = this->world.client();
  EXPECT_EQ(s->add("c", 5), 5);
  EXPECT_EQ(s->add("c", -2), 3);
  EXPECT_EQ(s->add("c", 0), 3);
  EXPECT_EQ(s->get_string("c"), "3");
  s->set_string("not-a-number", "abc");
  EXPECT_THROW(s->add("not-a-number", 1), Error);
  EXPECT_EQ(s->add("c", 1), 4);  // the store still works after the failed add
}

TYPED_TEST(StoreTest, ConcurrentAddFromEightThreadsIsExact) {
  constexpr int kThreads = 8, kAdds = 1000;
  std::vector<std::shared_ptr<Store>> clients;
  for (int t = 0; t < kThreads; ++t) clients.push_back(this->world.client());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAdds; ++i) clients[t]->add("counter", 1);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(this->world.client()->add("counter", 0), kThreads * kAdds);
}

TYPED_TEST(StoreTest, WaitForSeveralKeysAndCheck) {
  auto s = this->world.client();
  EXPECT_FALSE(s->check({"w1", "w2", "w3"}));
  std::thread setter([&] {
    auto other = this->world.client();
    for (const char* k : {"w3", "w1", "w2"}) {
      std::this_thread::sleep_for(30ms);
      other->set_string(k, k);
    }
  });
  auto t0 = Clock::now();
  s->wait({"w1", "w2", "w3"});
  EXPECT_GE(ms_since(t0), 60);  // not before the last key
  EXPECT_TRUE(s->check({"w1", "w2", "w3"}));
  EXPECT_EQ(s->get_string("w2"), "w2");
  setter.join();
}

TYPED_TEST(StoreTest, LateJoinerUnblocksGet) {
  auto waiter = this->world.client();
  std::thread late([&] {
    std::this_thread::sleep_for(300ms);
    this->world.client()->set_string("late", "here");
  });
  auto t0 = Clock::now();
  EXPECT_EQ(waiter->get_string("late"), "here");
  EXPECT_GE(ms_since(t0), 250);
  late.join();
}

TYPED_TEST(StoreTest, RejectsKeysOverTheLimit) {
  auto s = this->world.client();
  const std::string big(kMaxKeyBytes + 1, 'k');
  EXPECT_THROW(s->set_string(big, "v"), Error);
  EXPECT_THROW(s->add(big, 1), Error);
  EXPECT_THROW(s->set_string("", "v"), Error);
  const std::string max(kMaxKeyBytes, 'k');
  s->set_string(max, "v");
  EXPECT_EQ(s->get_string(max), "v");
}

TYPED_TEST(StoreTest, PrefixStoreSharesTheBaseUnderItsPrefix) {
  auto base = this->world.client();
  PrefixStore pg0("pg0/", base), pg1("pg1/", base);
  pg0.set_string("k", "zero");
  pg1.set_string("k", "one");
  EXPECT_EQ(base->get_string("pg0/k"), "zero");
  EXPECT_EQ(pg1.get_string("k"), "one");
  EXPECT_EQ(pg0.add("n", 2), 2);
  EXPECT_TRUE(pg0.check({"k", "n"}));
  EXPECT_FALSE(pg1.check({"n"}));
  pg0.wait({"k", "n"});
  pg0.set_timeout(200ms);  // the base's timeout
  EXPECT_EQ(base->timeout(), 200ms);
  EXPECT_THROW(pg1.get("missing"), StoreTimeout);
}

// Stores that ranks in separate processes share.
template <typename W>
class MultiProcessStoreTest : public StoreTest<W> {};

using ProcessWorlds = ::testing::Types<FileWorld, TcpWorld>;
TYPED_TEST_SUITE(MultiProcessStoreTest, ProcessWorlds, WorldNames);

TYPED_TEST(MultiProcessStoreTest, FourProcessesAddExactly) {
  constexpr int kProcs = 4, kAdds = 100;
  auto parent = this->world.client();
  std::thread go([&] {
    std::this_thread::sleep_for(50ms);  // the children block in get("go") meanwhile
    parent->set_string("go", "1");
  });
  run_in_children(kProcs, [&](int rank) {
    auto s = this->world.client();  // a new Store object in the child
    s->get("go");
    for (int i = 0; i < kAdds; ++i) s->add("procs", 1);
    s->set_string("done/" + std::to_string(rank), "1");
  });
  go.join();
  parent->wait({"done/0", "done/1", "done/2", "done/3"});
  EXPECT_EQ(parent->add("procs", 0), kProcs * kAdds);
}

}  // namespace
}  // namespace ddpb::comm::testing
