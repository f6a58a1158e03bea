#include <atomic>
#include <chrono>
#include <thread>

#include "core/allocator.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/ops.h"
#include "core/phase_timer.h"
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

// Graph capture on an Inline CPU stream: recorded, not run; replayed as often as asked;
// what the capture allocated lives as long as the graph.
TEST(StreamCapture, CpuRecordsReplaysAndKeepsItsTensorsAlive) {
  Stream& s = current_stream(Device::cpu());
  Tensor acc = Tensor::from_floats({1, 2, 3}, {3});
  Tensor input = Tensor::from_floats({10, 20, 30}, {3});
  CachingAllocator& alloc = device_allocator(Device::cpu());
  const int64_t before = alloc.stats().current_bytes;
  s.begin_capture();
  EXPECT_TRUE(s.capturing());
  {
    // A temporary made inside the capture, whose handle dies before the replay.
    Tensor tmp = Tensor::empty({3}, DType::F32, Device::cpu());
    ops::scale_copy(input, tmp, 0.5f);  // tmp = input / 2
    ops::axpy(1.0f, tmp, acc);          // acc += tmp
  }
  auto graph = s.end_capture();
  EXPECT_FALSE(s.capturing());
  EXPECT_EQ(acc.to_floats(), (std::vector<float>{1, 2, 3})) << "capture must not run the work";
  EXPECT_GT(alloc.stats().current_bytes, before) << "the graph keeps its temporary";
  graph->replay(s);
  EXPECT_EQ(acc.to_floats(), (std::vector<float>{6, 12, 18}));
  // A replay reads the inputs' current contents: new data goes into the same tensors.
  ops::fill(input, 2.0f);
  graph->replay(s);
  EXPECT_EQ(acc.to_floats(), (std::vector<float>{7, 13, 19}));
  graph.reset();
  EXPECT_EQ(alloc.stats().current_bytes, before) << "destroying the graph frees what it kept";
}

TEST(StreamCapture, ExecutorStreamsRefuseAndNestedCapturesFail) {
  auto exec = make_stream(Device::cpu(), "test-exec", StreamKind::Executor);
  EXPECT_THROW(exec->begin_capture(), UsageError);
  Stream& s = current_stream(Device::cpu());
  EXPECT_THROW(s.end_capture(), Error) << "not capturing";
  s.begin_capture();
  EXPECT_THROW(s.begin_capture(), Error);
  s.end_capture();
}

}  // namespace
}  // namespace ddpb

namespace ddpb {
namespace {

// PhaseTimer::device_end_ns: when a phase's work finished on the stream, on the host clock,
// against host_end_ns, when the host finished issuing it (DDP's compute end, Note [The loss is
// read last]).
TEST(PhaseTimer, DeviceEndIsWhenTheStreamFinishedNotWhenTheHostIssued) {
  auto stream = make_stream(Device::cpu(), "timed", StreamKind::Executor);
  PhaseTimer timer(*stream);
  timer.begin("forward");
  timer.begin("backward");
  stream->enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(40)); });
  timer.begin("optimizer");
  timer.end();
  const int64_t issued_ns = timer.host_end_ns("backward");
  timer.synchronize();
  const int64_t ran_ns = timer.device_end_ns("backward");
  EXPECT_GE(ran_ns - timer.host_start_ns("forward"), 40'000'000);
  EXPECT_GE(ran_ns - issued_ns, 30'000'000) << "the host issued the sleep at once";
  EXPECT_LE(ran_ns, steady_now_ns());
  EXPECT_EQ(timer.device_end_ns("never"), 0);
}

}  // namespace
}  // namespace ddpb
