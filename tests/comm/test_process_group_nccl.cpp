// ProcessGroupNccl on real GPUs (built only with CUDA and NCCL). Every test needs a GPU and,
// without one, skips saying why (the GPU test script must treat such skips as failures).
//  - One GPU: a world of one rank runs every collective; two ranks on the one GPU are refused
//    with a hint to use gloo; a rendezvous without every rank times out; destruction with
//    collectives in flight does not hang.
//  - Two or more GPUs: a world of two threads on cuda:0 and cuda:1 runs every collective,
//    many in flight, and a collective that no peer joins times out and breaks the group.
//
// Ranks are threads meeting through a HashStore. Inputs are small integers times (rank + 1),
// so every sum is exact in f32, bf16 and f16: sum over n ranks of (rank + 1) = n(n+1)/2.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "comm/flight_recorder.h"
#include "comm/hash_store.h"
#include "comm/process_group.h"
#include "core/cuda/cuda_stream.h"
#include "core/device.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "pg_test_util.h"

namespace ddpb::comm {
namespace {

using namespace std::chrono_literals;
using testing::Clock;
using testing::ramp;
using testing::ramp_sum;
using testing::seconds_since;
using testing::triangle;

std::string no_gpu_reason() {
  const std::string reason = gpu::unavailable_reason();
  return reason.empty() ? "cuda_device_count() returned 0" : reason;
}

#define DDPB_REQUIRE_GPUS(n)                                                  \
  do {                                                                        \
    const int gpus_ = cuda_device_count();                                    \
    if (gpus_ == 0) GTEST_SKIP() << "no CUDA device: " << no_gpu_reason();    \
    if (gpus_ < (n)) {                                                        \
      GTEST_SKIP() << "needs " << (n) << " GPUs, this machine has " << gpus_; \
    }                                                                         \
  } while (false)

ProcessGroupOptions nccl_options(int gpu, std::chrono::milliseconds timeout) {
  ProcessGroupOptions o;
  o.backend = CommBackend::Nccl;
  o.device = Device::cuda(gpu);
  o.timeout = timeout;
  return o;
}

// Runs body(rank, group) on `size` threads that meet through one HashStore; rank r uses GPU
// gpu_of(r).
void run_ranks(int size, const std::function<int(int)>& gpu_of,
               const std::function<void(int, ProcessGroup&)>& body,
               std::chrono::milliseconds timeout = 60s) {
  testing::run_thread_ranks(
      size, [&](int r) { return nccl_options(gpu_of(r), timeout); }, body, timeout);
}
std::vector<float> concat_ramps(int size, int64_t numel) {
  std::vector<float> all;
  for (int r = 0; r < size; ++r) {
    auto part = ramp(r, numel);
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

// A GPU tensor of `dtype` holding `values` (exact in every dtype used here).
Tensor gpu_tensor(const std::vector<float>& values, DType dtype, const Device& device) {
  const auto n = static_cast<int64_t>(values.size());
  Tensor host = Tensor::empty({n}, dtype, Device::cpu());
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::F32:
        host.data<float>()[i] = values[i];
        break;
      case DType::BF16:
        host.data<uint16_t>()[i] = float_to_bf16(values[i]);
        break;
      case DType::F16:
        host.data<uint16_t>()[i] = float_to_f16(values[i]);
        break;
      case DType::I32:
        host.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
        break;
      case DType::I64:
        host.data<int64_t>()[i] = static_cast<int64_t>(values[i]);
        break;
      case DType::U8:
        host.data<uint8_t>()[i] = static_cast<uint8_t>(values[i]);
        break;
    }
  }
  return host.to(device);
}

// The values of a GPU tensor of any dtype, as floats (a synchronous copy: it waits for the
// current stream, which Work::wait() ordered after the collective).
std::vector<float> values_of(const Tensor& t) {
  Tensor host = t.to(Device::cpu());
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t.dtype()) {
      case DType::F32:
        v[i] = host.data<float>()[i];
        break;
      case DType::BF16:
        v[i] = bf16_to_float(host.data<uint16_t>()[i]);
        break;
      case DType::F16:
        v[i] = f16_to_float(host.data<uint16_t>()[i]);
        break;
      case DType::I32:
        v[i] = static_cast<float>(host.data<int32_t>()[i]);
        break;
      case DType::I64:
        v[i] = static_cast<float>(host.data<int64_t>()[i]);
        break;
      case DType::U8:
        v[i] = static_cast<float>(host.data<uint8_t>()[i]);
        break;
    }
  }
  return v;
}

// Polls is_completed() (which never blocks) for up to `limit`.
bool completes_within(Work& w, std::chrono::milliseconds limit) {
  const auto give_up = Clock::now() + limit;
  while (!w.is_completed()) {
    if (Clock::now() >= give_up) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Every collective among pg.size() ranks, each on its own GPU, with exact expected values.
void every_collective(int rank, ProcessGroup& pg) {
  const int n = pg.size();
  const Device d = Device::cuda(rank);  // run_ranks puts rank r on cuda:r
  EXPECT_EQ(pg.backend(), "nccl");
  EXPECT_EQ(pg.rank(), rank);
  int64_t expected_sequence = 0;

  // allreduce, every dtype and a range of sizes.
  for (DType dtype : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64}) {
    for (int64_t numel : {1, 7, 1000, 300001}) {
      if (dtype != DType::F32 && numel > 1000) continue;
      Tensor t = gpu_tensor(ramp(rank, numel), dtype, d);
      WorkPtr w = pg.allreduce(t);
      w->wait();
      EXPECT_EQ(w->op, "allreduce");
      EXPECT_EQ(w->sequence, expected_sequence++);
      EXPECT_EQ(w->bytes, numel * int64_t(dtype_size(dtype)));
      EXPECT_EQ(t.dtype(), dtype);
      EXPECT_EQ(values_of(t), ramp_sum(n, numel))
          << dtype_name(dtype) << " numel " << numel << " rank " << rank;
      // values_of synchronised the stream that waited on the collective's end event.
      EXPECT_TRUE(completes_within(*w, 5s));
      EXPECT_EQ(w->exception(), nullptr);
      EXPECT_GT(w->start_ns, 0);
      EXPECT_GE(w->end_ns, w->start_ns);
    }
  }

  // broadcast from the last rank.
  const int root = n - 1;
  for (int64_t numel : {1, 70001}) {
    Tensor t = gpu_tensor(ramp(rank, numel), DType::F32, d);
    WorkPtr w = pg.broadcast(t, root);
    w->wait();
    EXPECT_EQ(w->op, "broadcast");
    EXPECT_EQ(w->sequence, expected_sequence++);
    EXPECT_EQ(values_of(t), ramp(root, numel)) << "numel " << numel << " rank " << rank;
  }

  // allgather, out of place and in place.
  for (int64_t k : {1, 10007}) {
    Tensor in = gpu_tensor(ramp(rank, k), DType::F32, d);
    Tensor out = Tensor::zeros({n * k}, DType::F32, d);
    WorkPtr w = pg.allgather(out, in);
    w->wait();
    EXPECT_EQ(w->op, "allgather");
    EXPECT_EQ(w->bytes, k * 4);
    EXPECT_EQ(w->sequence, expected_sequence++);
    EXPECT_EQ(values_of(out), concat_ramps(n, k)) << "k " << k << " rank " << rank;

    Tensor whole = gpu_tensor(std::vector<float>(size_t(n * k), 0.0f), DType::F32, d);
    Tensor own = whole.flat_view(rank * k, {k});
    Tensor mine = gpu_tensor(ramp(rank, k), DType::F32, d);
    ops::copy(mine, own);
    pg.allgather(whole, own)->wait();
    ++expected_sequence;
    EXPECT_EQ(values_of(whole), concat_ramps(n, k)) << "in place, k " << k << " rank " << rank;
  }

  // reduce_scatter: chunk `rank` of the sum; the input is left alone.
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (int64_t k : {1, 4099}) {
      Tensor in = gpu_tensor(ramp(rank, n * k), dtype, d);
      Tensor out = Tensor::zeros({k}, dtype, d);
      WorkPtr w = pg.reduce_scatter(out, in);
      w->wait();
      EXPECT_EQ(w->op, "reduce_scatter");
      EXPECT_EQ(w->bytes, n * k * int64_t(dtype_size(dtype)));
      EXPECT_EQ(w->sequence, expected_sequence++);
      EXPECT_EQ(values_of(out), ramp_sum(n, k, rank * k))
          << dtype_name(dtype) << " k " << k << " rank " << rank;
      EXPECT_EQ(values_of(in), ramp(rank, n * k)) << "reduce_scatter must not modify its input";
    }
  }

  // barrier: wait() blocks the host until it completes.
  WorkPtr b = pg.barrier();
  b->wait();
  EXPECT_EQ(b->op, "barrier");
  EXPECT_EQ(b->bytes, 0);
  EXPECT_EQ(b->sequence, expected_sequence++);
  EXPECT_TRUE(b->is_completed());

  // allreduce_coalesced: one group launch, one sequence number, mixed dtypes and an empty one.
  std::vector<Tensor> parts = {
      gpu_tensor(ramp(rank, 5), DType::F32, d), gpu_tensor(ramp(rank, 1000, 3), DType::BF16, d),
      Tensor::empty({0}, DType::F32, d), gpu_tensor(ramp(rank, 3, 1), DType::I32, d)};
  WorkPtr c = pg.allreduce_coalesced(parts);
  c->wait();
  EXPECT_EQ(c->op, "allreduce_coalesced");
  EXPECT_EQ(c->sequence, expected_sequence++);
  EXPECT_EQ(c->bytes, 5 * 4 + 1000 * 2 + 0 + 3 * 4);
  EXPECT_EQ(values_of(parts[0]), ramp_sum(n, 5));
  EXPECT_EQ(values_of(parts[1]), ramp_sum(n, 1000, 3));
  EXPECT_EQ(values_of(parts[3]), ramp_sum(n, 3, 1));
  // The sharded designs' pair: one group launch each; Avg is ncclAvg.
  {
    const int64_t k = 257;
    std::vector<Tensor> ins = {gpu_tensor(ramp(rank, n * k), DType::F32, d),
                               gpu_tensor(ramp(rank, n * 3, 1), DType::F32, d)};
    std::vector<Tensor> outs = {Tensor::zeros({k}, DType::F32, d),
                                Tensor::zeros({3}, DType::F32, d)};
    WorkPtr rs = pg.reduce_scatter_tensor_coalesced(outs, ins);
    rs->wait();
    EXPECT_EQ(rs->op, "reduce_scatter_tensor_coalesced");
    EXPECT_EQ(rs->sequence, expected_sequence++);
    EXPECT_EQ(values_of(outs[0]), ramp_sum(n, k, rank * k));
    EXPECT_EQ(values_of(outs[1]), ramp_sum(n, 3, rank * 3 + 1));
    std::vector<Tensor> whole = {Tensor::zeros({n * k}, DType::F32, d),
                                 Tensor::zeros({n * 3}, DType::F32, d)};
    WorkPtr ag = pg.allgather_into_tensor_coalesced(whole, outs);
    ag->wait();
    EXPECT_EQ(ag->op, "allgather_into_tensor_coalesced");
    EXPECT_EQ(ag->sequence, expected_sequence++);
    EXPECT_EQ(values_of(whole[0]), ramp_sum(n, n * k));
    Tensor avg = Tensor::zeros({k}, DType::F32, d);
    pg.reduce_scatter_tensor_coalesced({avg}, {ins[0]}, ReduceOp::Avg)->wait();
    ++expected_sequence;
    const std::vector<float> sum = ramp_sum(n, k, rank * k), mean = values_of(avg);
    for (size_t i = 0; i < sum.size(); ++i) EXPECT_NEAR(mean[i], sum[i] / n, 1e-5 * sum[i]);
  }
  WorkPtr none = pg.allreduce_coalesced({});
  EXPECT_TRUE(none->is_completed());
  EXPECT_EQ(none->sequence, -1);
  none->wait();

  // Empty tensors complete without communicating; the group still works afterwards.
  Tensor empty = Tensor::empty({0}, DType::F32, d);
  pg.allreduce(empty)->wait();
  pg.broadcast(empty, 0)->wait();
  pg.allgather(Tensor::empty({0}, DType::F32, d), empty)->wait();
  pg.reduce_scatter(empty, Tensor::empty({0}, DType::F32, d))->wait();
  Tensor one = gpu_tensor({float(rank + 1)}, DType::F32, d);
  pg.allreduce(one)->wait();
  EXPECT_EQ(values_of(one), std::vector<float>{float(triangle(n))});

  // Bad arguments throw at issue, on every rank alike, and use no sequence number.
  const int64_t before = expected_sequence + 5;
  EXPECT_THROW(pg.allreduce(Tensor::zeros({4}, DType::F32, Device::cpu())), Error);
  EXPECT_THROW(pg.allreduce(Tensor()), Error);
  EXPECT_THROW(
      pg.allgather(Tensor::zeros({n * 4 + 1}, DType::F32, d), Tensor::zeros({4}, DType::F32, d)),
      Error);
  EXPECT_THROW(
      pg.reduce_scatter(Tensor::zeros({3}, DType::F32, d), Tensor::zeros({n * 4}, DType::F32, d)),
      Error);
  EXPECT_THROW(pg.broadcast(one, n), Error);
  WorkPtr after = pg.allreduce(one);
  after->wait();
  EXPECT_EQ(after->sequence, before);
}

// ---- One GPU --------------------------------------------------------------------------------

TEST(NcclOneGpu, WorldOfOneRunsEveryCollective) {
  DDPB_REQUIRE_GPUS(1);
  run_ranks(
      1, [](int) { return 0; }, every_collective);
}

// The flight recorder lists NCCL's collectives as Gloo's: enqueued at issue, completed once
// the watchdog has seen the end event (the host cannot see one start on the device).
TEST(NcclOneGpu, CollectivesAreInTheFlightRecorder) {
  DDPB_REQUIRE_GPUS(1);
  run_ranks(
      1, [](int) { return 0; },
      [](int, ProcessGroup& pg) {
        const Tensor t = gpu_tensor({1.0f, 2.0f, 3.0f}, DType::F32, Device::cuda(0));
        const WorkPtr w = pg.allreduce(t);
        w->wait();
        EXPECT_EQ(w->flight_ring, FlightRecorder::kWorld);
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        nlohmann::json found;
        while (std::chrono::steady_clock::now() < deadline) {
          for (const nlohmann::json& e : flight_recorder().to_json())
            if (e["seq"].get<int64_t>() == w->sequence) found = e;
          if (!found.is_null() && found["state"] == "completed") break;
          std::this_thread::sleep_for(10ms);
        }
        ASSERT_FALSE(found.is_null()) << flight_recorder().to_json().dump();
        EXPECT_EQ(found["state"], "completed");
        EXPECT_EQ(found["op"], "allreduce");
        EXPECT_EQ(found["dtype"], "f32");
        EXPECT_EQ(found["bytes"], 12);
        EXPECT_FALSE(flight_recorder().any_in_flight());
      });
}

TEST(NcclOneGpu, TwoRanksOnOneGpuAreRefusedWithAGlooHint) {
  DDPB_REQUIRE_GPUS(1);
  auto store = std::make_shared<HashStore>();
  store->set_timeout(30s);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        DeviceGuard guard(Device::cuda(0));
        make_process_group(store, r, 2, nccl_options(0, 30s));
        errors[size_t(r)] = "(no error)";
      } catch (const UsageError& e) {
        errors[size_t(r)] = e.what();
      } catch (const std::exception& e) {
        errors[size_t(r)] = std::string("(not a UsageError) ") + e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    const std::string& e = errors[size_t(r)];
    EXPECT_NE(e.find("NCCL cannot run two ranks on one GPU (ranks 0 and 1 both on cuda:0 of host "),
              std::string::npos)
        << "rank " << r << ": " << e;
    EXPECT_NE(e.find("); use --backend gloo"), std::string::npos) << "rank " << r << ": " << e;
  }
}

TEST(NcclOneGpu, RendezvousWithoutEveryRankTimesOut) {
  DDPB_REQUIRE_GPUS(1);
  auto store = std::make_shared<HashStore>();
  store->set_timeout(30s);  // longer than the group's: the group's timeout must govern
  DeviceGuard guard(Device::cuda(0));
  const auto t0 = Clock::now();
  try {
    make_process_group(store, 0, 2, nccl_options(0, 1500ms));
    FAIL() << "rank 1 never came, yet the rendezvous succeeded";
  } catch (const CommTimeout& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 of 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("missing ranks: 1"), std::string::npos) << e.what();
  }
  const double s = seconds_since(t0);
  EXPECT_GE(s, 1.4);
  EXPECT_LT(s, 4.0) << "the rendezvous took " << s << " s for a 1.5 s timeout";
}

TEST(NcclOneGpu, DestructionWithCollectivesInFlightDoesNotHang) {
  DDPB_REQUIRE_GPUS(1);
  auto store = std::make_shared<HashStore>();
  DeviceGuard guard(Device::cuda(0));
  auto pg = make_process_group(store, 0, 1, nccl_options(0, 10s));
  std::vector<WorkPtr> works;
  {
    Tensor t = Tensor::zeros({1 << 22}, DType::F32, Device::cuda(0));
    for (int i = 0; i < 100; ++i) works.push_back(pg->allreduce(t));
  }  // the caller drops the tensor at once: the group keeps it alive
  const auto t0 = Clock::now();
  pg.reset();
  EXPECT_LT(seconds_since(t0), 5.0);
  int finished = 0, failed = 0;
  for (auto& w : works) {
    EXPECT_TRUE(w->is_completed());
    if (w->exception() == nullptr) {
      ++finished;
    } else {
      ++failed;
    }
  }
  EXPECT_EQ(finished + failed, 100);
}

// ---- Two GPUs -------------------------------------------------------------------------------

TEST(NcclTwoGpus, EveryCollectiveAmongTwoRanks) {
  DDPB_REQUIRE_GPUS(2);
  run_ranks(
      2, [](int r) { return r; }, every_collective);
}

TEST(NcclTwoGpus, ManyCollectivesInFlightCompleteInIssueOrder) {
  DDPB_REQUIRE_GPUS(2);
  run_ranks(
      2, [](int r) { return r; },
      [](int rank, ProcessGroup& pg) {
        const Device d = Device::cuda(rank);
        constexpr int kOps = 40;
        std::vector<Tensor> tensors;
        std::vector<WorkPtr> works;
        for (int i = 0; i < kOps; ++i) {
          const int64_t numel = 1 + (i * 977) % 200000;
          tensors.push_back(gpu_tensor(ramp(rank, numel, i), DType::F32, d));
          works.push_back(i % 10 == 9 ? pg.barrier() : pg.allreduce(tensors.back()));
        }
        int64_t previous_end = 0;
        for (int i = 0; i < kOps; ++i) {
          Work& w = *works[size_t(i)];
          w.wait();
          EXPECT_EQ(w.sequence, i);
          if (i % 10 != 9) {
            EXPECT_EQ(values_of(tensors[size_t(i)]), ramp_sum(2, tensors[size_t(i)].numel(), i))
                << "op " << i << " rank " << rank;
          }
          ASSERT_TRUE(completes_within(w, 5s)) << "op " << i;
          // One stream: each starts after the previous one ended. The times come from float
          // milliseconds against clock anchors that differ by a few microseconds, hence the slack.
          EXPECT_GE(w.start_ns, previous_end - 100'000)
              << "collectives overlapped on the comm stream";
          EXPECT_GE(w.end_ns, w.start_ns);
          previous_end = w.end_ns;
        }
      });
}

TEST(NcclTwoGpus, CollectiveThatNoPeerJoinsTimesOutAndBreaksTheGroup) {
  DDPB_REQUIRE_GPUS(2);
  auto store = std::make_shared<HashStore>();
  store->set_timeout(30s);
  std::atomic<bool> rank0_done{false};
  std::string peer_error;
  std::thread peer([&] {
    try {
      DeviceGuard guard(Device::cuda(1));
      auto pg = make_process_group(store, 1, 2, nccl_options(1, 2s));
      Tensor t = Tensor::zeros({1024}, DType::F32, Device::cuda(1));
      pg->allreduce(t)->wait();  // the warm-up, then nothing
      (void)t.to_floats();
      while (!rank0_done) std::this_thread::sleep_for(5ms);
    } catch (const std::exception& e) {
      peer_error = e.what();
    }
  });
  std::string error, next_error;
  double fail_s = 0, destroy_s = 0;
  {
    DeviceGuard guard(Device::cuda(0));
    auto pg = make_process_group(store, 0, 2, nccl_options(0, 2s));
    Tensor t = Tensor::zeros({1024}, DType::F32, Device::cuda(0));
    pg->allreduce(t)->wait();  // warm-up: connections are up
    (void)t.to_floats();
    const auto t0 = Clock::now();
    WorkPtr w = pg->allreduce(t);  // rank 1 never issues this one
    EXPECT_TRUE(completes_within(*w, 6s)) << "the watchdog did not end the collective";
    fail_s = seconds_since(t0);
    try {
      w->wait();
      ADD_FAILURE() << "wait() on a timed-out collective returned normally";
    } catch (const CommTimeout& e) {
      error = e.what();
    }
    try {
      pg->allreduce(t)->wait();
    } catch (const Error& e) {
      next_error = e.what();
    }
    const auto t1 = Clock::now();
    pg.reset();
    destroy_s = seconds_since(t1);
  }
  rank0_done = true;
  peer.join();
  EXPECT_EQ(peer_error, "");
  EXPECT_NE(error.find("nccl allreduce #1"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 0 of 2"), std::string::npos) << error;
  EXPECT_NE(error.find("group timeout of 2000 ms"), std::string::npos) << error;
  EXPECT_GE(fail_s, 1.9);
  EXPECT_LT(fail_s, 5.0);
  EXPECT_NE(next_error.find("broken since allreduce #1"), std::string::npos) << next_error;
  EXPECT_LT(destroy_s, 3.0);
}

}  // namespace
}  // namespace ddpb::comm
