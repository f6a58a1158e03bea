// DP's primitives one at a time: scatter/gather, replicate, reduce_add, coalescing, workers.
#include <gtest/gtest.h>

#include <atomic>

#include "core/check.h"
#include "core/ops.h"
#include "core/rng.h"
#include "impl_dp/coalesce.h"
#include "impl_dp/data_parallel.h"
#include "impl_dp/scatter_gather.h"
#include "impl_dp/transport.h"
#include "impl_dp/worker_pool.h"

namespace ddpb::dp {
namespace {

Tensor iota(const Shape& shape, float start = 0, const Device& d = Device::cpu()) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return Tensor::from_floats(v, shape, d);
}

std::vector<Device> cpus(int n) {
  std::vector<Device> d;
  for (int i = 0; i < n; ++i) d.push_back(Device::cpu(i));
  return d;
}

std::vector<StreamPtr> side_streams(const std::vector<Device>& devices) {
  std::vector<StreamPtr> s;
  for (auto& d : devices) s.push_back(make_stream(d, "side", StreamKind::Executor));
  return s;
}

TEST(ChunkSizes, FollowTorchChunk) {
  EXPECT_EQ(chunk_sizes(8, 4), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(chunk_sizes(7, 3), (std::vector<int64_t>{3, 3, 1}));
  EXPECT_EQ(chunk_sizes(5, 4), (std::vector<int64_t>{2, 2, 1}));  // fewer chunks than asked
  EXPECT_EQ(chunk_sizes(3, 4), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(chunk_sizes(1, 1), (std::vector<int64_t>{1}));
  EXPECT_THROW(chunk_sizes(0, 2), Error);
}

TEST(ScatterGather, GatherOfScatterIsTheIdentity) {
  auto devices = cpus(3);
  for (int64_t rows : {3, 7, 10}) {
    Tensor batch = iota({rows, 5});
    auto sizes = chunk_sizes(rows, 3);
    auto sides = side_streams(devices);
    Scattered s = scatter(batch, sizes, devices, sides);
    for (size_t i = 0; i < s.parts.size(); ++i) {
      s.ready[i].synchronize();
      EXPECT_EQ(s.parts[i].device(), devices[i]);
      EXPECT_EQ(s.parts[i].size(0), sizes[i]);
    }
    Tensor back = gather(s.parts, Device::cpu(0));
    EXPECT_EQ(back.shape(), batch.shape());
    EXPECT_EQ(back.to_floats(), batch.to_floats()) << rows << " rows";
  }
}

TEST(Coalesce, GroupsRespectTheCapWithOddSizes) {
  std::vector<Tensor> ts;
  for (int64_t n : {3, 250, 7, 1000, 1, 1, 129}) ts.push_back(iota({n}));
  const size_t cap = 1024;  // bytes: 256 floats
  auto groups = coalesce_groups(ts, cap);
  std::vector<size_t> seen;
  for (auto& g : groups) {
    size_t bytes = 0;
    for (size_t i : g) {
      bytes += ts[i].nbytes();
      seen.push_back(i);
    }
    EXPECT_TRUE(bytes <= cap || g.size() == 1)
        << "group over the cap with " << g.size() << " tensors";
  }
  std::vector<size_t> expect(ts.size());
  std::iota(expect.begin(), expect.end(), 0);
  EXPECT_EQ(seen, expect) << "every tensor once, in order";
  // The 1000-float tensor is over the cap: alone.
  for (auto& g : groups) {
    if (std::find(g.begin(), g.end(), 3u) != g.end()) EXPECT_EQ(g.size(), 1u);
  }
  // Round trip through flat chunks.
  for (auto& g : groups) {
    Tensor flat = flatten(ts, g);
    std::vector<Tensor> copies;
    for (auto& t : ts) copies.push_back(Tensor::zeros(t.shape(), t.dtype(), t.device()));
    unflatten(flat, copies, g);
    for (size_t i : g) EXPECT_EQ(copies[i].to_floats(), ts[i].to_floats());
  }
}

TEST(Transport, BroadcastIsBitIdenticalAndReduceAddSums) {
  auto devices = cpus(3);
  auto t = make_transport(devices);
  EXPECT_STREQ(t->name(), "copy");
  std::vector<float> v(1001);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(rng_normal(1, 2, i));
  Tensor src = Tensor::from_floats(v, {1001}, devices[0]);
  std::vector<Tensor> dst = {Tensor::zeros({1001}, DType::F32, devices[1]),
                             Tensor::zeros({1001}, DType::F32, devices[2])};
  t->broadcast(src, dst);
  for (auto& d : dst) EXPECT_EQ(std::memcmp(d.raw_data(), src.raw_data(), src.nbytes()), 0);

  std::vector<Tensor> parts = {iota({4}, 1, devices[0]), iota({4}, 10, devices[1]),
                               iota({4}, 100, devices[2])};
  t->reduce_add(parts);
  EXPECT_EQ(parts[0].to_floats(), (std::vector<float>{111, 114, 117, 120}));
}

TEST(WorkerPool, RunsEveryTaskOnItsOwnDeviceThread) {
  auto devices = cpus(3);
  std::vector<StreamPtr> streams;
  for (auto& d : devices) streams.push_back(make_stream(d, "c", StreamKind::Inline));
  WorkerPool pool(devices, streams);
  std::vector<std::string> labels(3);
  std::vector<std::thread::id> ids(3);
  pool.run(3, [&](size_t i) {
    labels[i] = current_device_label();
    ids[i] = std::this_thread::get_id();
  });
  EXPECT_EQ(labels, (std::vector<std::string>{"cpu:0", "cpu:1", "cpu:2"}));
  EXPECT_NE(ids[0], ids[1]);
  EXPECT_NE(ids[1], ids[2]);
}

TEST(WorkerPool, AFailureReachesTheCallerWithItsDeviceAndOthersFinish) {
  auto devices = cpus(3);
  std::vector<StreamPtr> streams;
  for (auto& d : devices) streams.push_back(make_stream(d, "c", StreamKind::Inline));
  WorkerPool pool(devices, streams);
  std::atomic<int> finished{0};
  try {
    pool.run(3, [&](size_t i) {
      if (i == 1) throw Error("injected failure");
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      ++finished;
    });
    FAIL() << "expected the worker's error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("replica 1 on cpu:1"), std::string::npos) << m;
    EXPECT_NE(m.find("injected failure"), std::string::npos) << m;
  }
  EXPECT_EQ(finished, 2) << "the other workers ran to completion before the rethrow";
  // The pool is still usable afterwards: nothing deadlocked.
  pool.run(3, [&](size_t) { ++finished; });
  EXPECT_EQ(finished, 5);
}

TEST(DpDevices, ResolveAndReject) {
  EXPECT_EQ(resolve_dp_devices("cpu", 3, ""), cpus(3));
  EXPECT_THROW(resolve_dp_devices("cpu", 0, ""), UsageError);
  EXPECT_THROW(resolve_dp_devices("cpu", 2, "cpu:0,cpu:0"), UsageError);
  EXPECT_THROW(resolve_dp_devices("cpu", 3, "cpu:0,cpu:1"), UsageError);
  if (cuda_device_count() == 0) EXPECT_THROW(resolve_dp_devices("cuda", 2, ""), UsageError);
  EXPECT_TRUE(has_logical_replicas({Device::cuda(0), Device::cuda(0)}));
  EXPECT_FALSE(has_logical_replicas(cpus(2)));
}

}  // namespace
}  // namespace ddpb::dp
