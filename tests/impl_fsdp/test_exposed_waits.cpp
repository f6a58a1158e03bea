// Note [Exposed waits on the device]: a wait is priced by how long the compute stream stands
// still in it, whether the host blocks in it (Gloo, MPI) or only orders the stream (NCCL).
// CPU Executor streams run their work on a thread of their own, as a GPU runs a stream's
// kernels, so both kinds of wait can be made here.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "core/device.h"
#include "core/stream.h"
#include "impl_fsdp/exposed_waits.h"

namespace ddpb::fsdp {
namespace {

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// The collective: an event another stream records after `ms` of work.
Event collective_done_after(const StreamPtr& link, int ms) {
  link->enqueue([ms] { sleep_ms(ms); });
  Event done = Event::create(Device::cpu());
  done.record(*link);
  return done;
}

// NCCL's kind: the wait orders the compute stream after the collective and returns at once.
// The host spends nothing in it; the stream stalls until the collective ends.
TEST(ExposedWaits, AStreamOrderedWaitIsPricedByTheStreamsStall) {
  StreamPtr compute = make_stream(Device::cpu(), "compute");
  StreamPtr link = make_stream(Device::cpu(), "link");
  StreamGuard guard(compute);
  ExposedWaits waits;
  waits.start(Device::cpu());
  const Event done = collective_done_after(link, 150);
  waits.time(ExposedWaits::kGatherForward, [&] { compute->wait(done); });
  waits.time(ExposedWaits::kGatherBackward, [&] { compute->wait(done); });  // done already then
  EXPECT_LT(waits.host_ms(), 50.0) << "the host never blocked";
  compute->synchronize();
  const auto stalled = waits.stalled_ms();
  EXPECT_GT(stalled[ExposedWaits::kGatherForward], 100.0);
  EXPECT_LT(stalled[ExposedWaits::kGatherForward], 1000.0);
  EXPECT_LT(stalled[ExposedWaits::kGatherBackward], 50.0) << "its collective had ended";
  EXPECT_EQ(stalled[ExposedWaits::kReduceScatterAfter], 0.0) << "no wait of that kind";
}

// A stream busy with compute for longer than the collective takes does not stall in the
// wait: the collective was hidden, though the host reached the wait early.
TEST(ExposedWaits, ACollectiveHiddenBehindComputeCostsNothing) {
  StreamPtr compute = make_stream(Device::cpu(), "compute");
  StreamPtr link = make_stream(Device::cpu(), "link");
  StreamGuard guard(compute);
  ExposedWaits waits;
  waits.start(Device::cpu());
  const Event done = collective_done_after(link, 50);
  compute->enqueue([] { sleep_ms(200); });  // the unit's forward, still running
  waits.time(ExposedWaits::kGatherForward, [&] { compute->wait(done); });
  compute->synchronize();
  EXPECT_LT(waits.stalled_ms()[ExposedWaits::kGatherForward], 40.0);
}

// Gloo's kind: the host blocks in the wait, on a stream that runs work as it is enqueued; the
// stall is the host's wait.
TEST(ExposedWaits, AHostBlockingWaitIsPricedByTheHostsTime) {
  ExposedWaits waits;
  waits.start(Device::cpu());
  waits.time(ExposedWaits::kReduceScatterAfter, [] { sleep_ms(120); });
  EXPECT_GE(waits.host_ms(), 120.0);
  const double stalled = waits.stalled_ms()[ExposedWaits::kReduceScatterAfter];
  EXPECT_GE(stalled, 119.0);
  EXPECT_LT(stalled, waits.host_ms() + 5.0);
  waits.start(Device::cpu());
  EXPECT_EQ(waits.host_ms(), 0.0) << "a new step starts from nothing";
  EXPECT_EQ(waits.stalled_ms()[ExposedWaits::kReduceScatterAfter], 0.0);
}

}  // namespace
}  // namespace ddpb::fsdp
