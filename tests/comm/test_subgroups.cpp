// Note [Sub-groups] (comm/process_group.h): groups of some of the world's ranks, met through
// the world's store, as the hybrid designs need, and a second queue over the same store. Gloo
// here, ranks as threads; MPI's split in test_process_group_mpi.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "base/rank_team.h"
#include "comm/flight_recorder.h"
#include "comm/hash_store.h"
#include "comm/process_group.h"
#include "core/check.h"
#include "core/device.h"
#include "core/tensor.h"

namespace ddpb::comm {
namespace {

constexpr std::chrono::seconds kTimeout{20};

ProcessGroupOptions gloo_on(int rank) {
  ProcessGroupOptions o;
  o.backend = CommBackend::Gloo;
  o.device = Device::cpu(rank);
  o.timeout = kTimeout;
  return o;
}

// Runs fn(rank, its options) on `size` thread-ranks at once, each under its device's guard,
// all meeting through one store.
void on_every_rank(int size, const std::function<void(const std::shared_ptr<HashStore>&, int,
                                                      const ProcessGroupOptions&)>& fn) {
  auto store = std::make_shared<HashStore>();
  store->set_timeout(kTimeout);
  RankTeam team(size);
  team.run_void([&](int r) {
    const ProcessGroupOptions o = gloo_on(r);
    DeviceGuard guard(o.device);
    fn(store, r, o);
  });
}

// Four ranks as two nodes of two: each rank sums within its node (the shard group), then
// across the nodes (the replicate group), and ends with the world's sum. A rank outside a
// group gets none; inside, its rank is its place in the list.
TEST(SubGroups, AShardGroupInsideANodeAndAReplicateGroupAcross) {
  on_every_rank(
      4, [](const std::shared_ptr<HashStore>& store, int r, const ProcessGroupOptions& o) {
        // Every rank creates every group, in one order (Note [Process group store prefix]).
        const std::shared_ptr<ProcessGroup> shard[2] = {new_group(store, r, 4, {0, 1}, o),
                                                        new_group(store, r, 4, {2, 3}, o)};
        const std::shared_ptr<ProcessGroup> replicate[2] = {new_group(store, r, 4, {2, 0}, o),
                                                            new_group(store, r, 4, {1, 3}, o)};
        ProcessGroup& node = *shard[r / 2];
        ProcessGroup& across = *replicate[r % 2];
        EXPECT_EQ(shard[1 - r / 2], nullptr);
        EXPECT_EQ(replicate[1 - r % 2], nullptr);
        EXPECT_EQ(node.size(), 2);
        EXPECT_EQ(node.rank(), r % 2);
        EXPECT_EQ(across.rank(), r == 2 || r == 1 ? 0 : 1) << "its place in {2, 0} or {1, 3}";
        Tensor t = Tensor::from_floats({static_cast<float>(r + 1)}, {1}, o.device);
        node.allreduce(t)->wait();
        EXPECT_EQ(t.item(), r < 2 ? 3.0f : 7.0f);
        across.allreduce(t)->wait();
        EXPECT_EQ(t.item(), 10.0f);
      });
}

// A second group of every rank is a second queue: rank 1 issues its part of a reduce-scatter
// on the first only after an all-gather on the second, which rank 0 issued after its own
// reduce-scatter. On one queue rank 0's all-gather would wait behind its reduce-scatter,
// which waits for rank 1, which waits in the all-gather: they would time out.
TEST(SubGroups, AnAllGatherOnASecondQueueDoesNotWaitBehindAReduceScatter) {
  on_every_rank(2, [](const std::shared_ptr<HashStore>& store, int r,
                      const ProcessGroupOptions& o) {
    const std::shared_ptr<ProcessGroup> gradients = new_group(store, r, 2, {0, 1}, o);
    const std::shared_ptr<ProcessGroup> parameters = new_group(store, r, 2, {0, 1}, o);
    const float base = static_cast<float>(r + 1);
    Tensor in = Tensor::from_floats({base, 2 * base, 3 * base, 4 * base}, {4}, o.device);
    Tensor out = Tensor::zeros({2}, DType::F32, o.device);
    Tensor mine = Tensor::from_floats({base}, {1}, o.device);
    Tensor all = Tensor::zeros({2}, DType::F32, o.device);
    WorkPtr scatter;
    if (r == 0) scatter = gradients->reduce_scatter(out, in);
    parameters->allgather(all, mine)->wait();
    EXPECT_EQ(all.to_floats(), (std::vector<float>{1, 2}));
    if (r == 1) scatter = gradients->reduce_scatter(out, in);
    scatter->wait();
    EXPECT_EQ(out.to_floats(), r == 0 ? (std::vector<float>{3, 6}) : (std::vector<float>{9, 12}));
  });
}

TEST(SubGroups, RanksOutsideTheWorldOrRepeatedAreRefused) {
  auto store = std::make_shared<HashStore>();
  const ProcessGroupOptions o = gloo_on(0);
  EXPECT_THROW(new_group(store, 0, 2, {}, o), UsageError);
  EXPECT_THROW(new_group(store, 0, 2, {0, 0}, o), UsageError);
  EXPECT_THROW(new_group(store, 0, 2, {0, 2}, o), UsageError);
  EXPECT_THROW(new_group(store, 0, 2, {-1}, o), UsageError);
  EXPECT_EQ(new_group(store, 0, 2, {1}, o), nullptr) << "rank 0 is not in {1}";
}

// Note [Sub-groups]: a sub-group numbers its collectives from 0 as the world does, so the
// flight recorder keeps them in a ring of their own, named by the group's world ranks: the
// world's entry of the same number stays as it was, and a dump lists the group's under
// "groups".
TEST(SubGroups, ASubGroupsCollectivesAreListedUnderItsOwnNumbers) {
  on_every_rank(1,
                [](const std::shared_ptr<HashStore>& store, int r, const ProcessGroupOptions& o) {
                  const auto world = make_process_group(store, r, 1, o);
                  const auto sub = new_group(store, r, 1, {0}, o);
                  ASSERT_NE(sub, nullptr);
                  const Tensor t = Tensor::from_floats({1.0f, 2.0f}, {2}, o.device);
                  const auto entry = [](const nlohmann::json& entries, int64_t seq) {
                    for (const nlohmann::json& e : entries)
                      if (e["seq"].get<int64_t>() == seq) return e;
                    return nlohmann::json();
                  };
                  // This group's ring: "ranks 0", or "ranks 0 #k" after other groups over rank 0.
                  const auto group_entries = [] {
                    nlohmann::json mine = nlohmann::json::array();
                    for (const nlohmann::json& g : flight_recorder().groups_to_json())
                      if (g["group"].get<std::string>().rfind("ranks 0", 0) == 0)
                        mine = g["entries"];
                    return mine;
                  };
                  const comm::WorkPtr w0 = world->allreduce(t);
                  w0->wait();
                  const int64_t first = w0->sequence;
                  ASSERT_GE(first, 0);
                  const nlohmann::json before = entry(flight_recorder().to_json(), first);
                  ASSERT_FALSE(before.is_null());
                  const size_t listed = group_entries().size();
                  comm::WorkPtr last;
                  for (int k = 0; k < 3; ++k) (last = sub->allreduce(t))->wait();
                  EXPECT_EQ(entry(flight_recorder().to_json(), first), before)
                      << "a sub-group's collective overwrote the world's";
                  const nlohmann::json listed_now = group_entries();
                  EXPECT_EQ(listed_now.size(), listed + 3);
                  const nlohmann::json mine = entry(listed_now, last->sequence);
                  ASSERT_FALSE(mine.is_null()) << listed_now.dump();
                  EXPECT_EQ(mine["state"], "completed");
                  EXPECT_EQ(mine["op"], "allreduce");
                  EXPECT_NE(last->flight_ring, FlightRecorder::kWorld);
                  // A second group over the same ranks counts from 0 too: a ring of its own.
                  const auto again = new_group(store, r, 1, {0}, o);
                  const comm::WorkPtr other = again->allreduce(t);
                  other->wait();
                  EXPECT_NE(other->flight_ring, last->flight_ring);
                  EXPECT_EQ(entry(group_entries(), other->sequence)["state"], "completed");
                  EXPECT_FALSE(flight_recorder().any_in_flight());
                  const comm::WorkPtr next = world->allreduce(t);
                  next->wait();
                  EXPECT_EQ(next->sequence, first + 1);
                  EXPECT_EQ(next->flight_ring, FlightRecorder::kWorld);
                  const nlohmann::json after = entry(flight_recorder().to_json(), first + 1);
                  ASSERT_FALSE(after.is_null());
                  EXPECT_EQ(after["state"], "completed");
                  EXPECT_EQ(after["op"], "allreduce");
                });
}

// ... but it is in flight while it waits for a peer, so that the step watchdog leaves a rank
// waiting in it to the collective's own timeout (Note [Step watchdog]).
TEST(SubGroups, ASubGroupsCollectiveWaitingForAPeerIsInFlight) {
  on_every_rank(2,
                [](const std::shared_ptr<HashStore>& store, int r, const ProcessGroupOptions& o) {
                  const auto sub = new_group(store, r, 2, {0, 1}, o);
                  const Tensor t = Tensor::from_floats({1.0f}, {1}, o.device);
                  if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
                  const comm::WorkPtr w = sub->allreduce(t);
                  if (r == 0) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(100));
                    EXPECT_TRUE(flight_recorder().any_in_flight());
                  }
                  w->wait();
                });
  EXPECT_FALSE(flight_recorder().any_in_flight());
}

}  // namespace
}  // namespace ddpb::comm
