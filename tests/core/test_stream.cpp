#include <atomic>
#include <chrono>
#include <thread>

#include "core/ops.h"
#include "core/stream.h"
#include "test_util.h"

namespace ddpb {
namespace {

TEST(CpuStream, ExecutorRunsInOrderAndEventsSignalCompletion) {
  auto s = make_stream(Device::cpu(), "test-exec", StreamKind::Executor);
  std::vector<int> seen;
  std::atomic<bool> release{false};
  s->enqueue([&] {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    seen.push_back(1);
  });
  s->enqueue([&] { seen.push_back(2); });
  Event e = Event::create(Device::cpu());
  e.record(*s);
  EXPECT_FALSE(e.query()) << "the event is behind blocked work";
  release = true;
  e.synchronize();
  EXPECT_TRUE(e.query());
  EXPECT_EQ(seen, (std::vector<int>{1, 2}));
}

TEST(CpuStream, WaitOrdersOneStreamAfterAnother) {
  auto producer = make_stream(Device::cpu(), "producer", StreamKind::Executor);
  auto consumer = make_stream(Device::cpu(), "consumer", StreamKind::Executor);
  std::atomic<int> value{0};
  producer->enqueue([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    value = 42;
  });
  Event done = Event::create(Device::cpu());
  done.record(*producer);
  consumer->wait(done);
  int observed = -1;
  consumer->enqueue([&] { observed = value; });
  consumer->synchronize();
  EXPECT_EQ(observed, 42);
}

TEST(CpuStream, OpsOnAnExecutorStreamRunThereInOrder) {
  auto side = make_stream(Device::cpu(), "side", StreamKind::Executor);
  Tensor t = Tensor::zeros({4}, DType::F32, Device::cpu());
  {
    StreamGuard g(side);
    ops::fill(t, 3.0f);
    ops::scale(t, 2.0f);
  }
  side->synchronize();
  EXPECT_EQ(t.to_floats(), (std::vector<float>{6, 6, 6, 6}));
}

TEST(CpuStream, ErrorsOnAnExecutorSurfaceAtSynchronize) {
  auto s = make_stream(Device::cpu(), "failing", StreamKind::Executor);
  s->enqueue([] { throw Error("boom"); });
  Event e = Event::create(Device::cpu());
  e.record(*s);
  e.synchronize();  // later work still completes: no hang
  EXPECT_THROW(s->synchronize(), Error);
}

TEST(Event, ElapsedTimeOnCpu) {
  auto& s = current_stream(Device::cpu());
  Event a = Event::create(Device::cpu()), b = Event::create(Device::cpu());
  a.record(s);
  std::this_thread::sleep_for(std::chrono::milliseconds(15));
  b.record(s);
  EXPECT_GE(a.elapsed_ms(b), 14.0);
}

}  // namespace
}  // namespace ddpb
