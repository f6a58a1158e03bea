// The stream-order sanitizer (core/stream_sanitizer.h): ordered accesses pass, and each
// negative control, a missing event wait taken from real code paths, is reported naming the
// two streams. CPU devices only: the sanitizer sees the same streams as on CUDA.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/hash_store.h"
#include "comm/host_staging.h"
#include "comm/process_group.h"
#include "core/ops.h"
#include "core/stream.h"
#include "core/stream_sanitizer.h"
#include "impl_dp/coalesce.h"
#include "impl_dp/transport.h"

namespace ddpb {
namespace {

class StreamSanitizer : public ::testing::Test {
 protected:
  void SetUp() override { sanitizer::set_enabled(true); }
  void TearDown() override { sanitizer::set_enabled(false); }
};

// Runs fn and expects a race report that names every one of `names`.
void expect_race(const std::function<void()>& fn, const std::vector<std::string>& names) {
  std::string message;
  try {
    fn();
  } catch (const Error& e) {
    message = e.what();
  }
  ASSERT_NE(message.find("stream-order race"), std::string::npos)
      << "expected a race report, got: '" << message << "'";
  for (const auto& name : names) {
    EXPECT_NE(message.find(name), std::string::npos) << "'" << name << "' missing in: " << message;
  }
}

// A Gloo group of one rank on cpu:0: its collectives run on the "ddpb-gloo" stream.
std::shared_ptr<comm::ProcessGroup> single_rank_group() {
  comm::ProcessGroupOptions options;
  options.device = Device::cpu();
  return comm::make_process_group(std::make_shared<comm::HashStore>(), 0, 1, options);
}

Tensor ones(int64_t n, const Device& device = Device::cpu()) {
  Tensor t = Tensor::empty({n}, DType::F32, device);
  ops::fill(t, 1.0f);
  return t;
}

TEST_F(StreamSanitizer, OneStreamIsAlwaysOrdered) {
  Tensor a = ones(16), b = Tensor::empty({16}, DType::F32, Device::cpu());
  ops::scale_copy(a, b, 2.0f);
  ops::axpy(1.0f, b, a);
  EXPECT_EQ(a.to_floats()[0], 3.0f);
}

TEST_F(StreamSanitizer, EventWaitOrdersTwoStreams) {
  auto producer = make_stream(Device::cpu(), "producer", StreamKind::Executor);
  Tensor t = Tensor::empty({8}, DType::F32, Device::cpu());
  {
    StreamGuard guard(producer);
    ops::fill(t, 5.0f);
  }
  Event done = Event::create(Device::cpu());
  done.record(*producer);
  current_stream(Device::cpu()).wait(done);
  Tensor out = Tensor::empty({8}, DType::F32, Device::cpu());
  ops::scale_copy(t, out, 1.0f);  // ordered by the wait
  EXPECT_EQ(out.to_floats()[7], 5.0f);
}

TEST_F(StreamSanitizer, ReadWithoutEventIsReportedWithBothStreamsAndOps) {
  auto producer = make_stream(Device::cpu(), "producer", StreamKind::Executor);
  Tensor t = Tensor::empty({8}, DType::F32, Device::cpu());
  sanitizer::set_name(t, "fc1.weight");
  {
    StreamGuard guard(producer);
    ops::fill(t, 5.0f);
  }
  Tensor out = Tensor::empty({8}, DType::F32, Device::cpu());
  expect_race([&] { ops::scale_copy(t, out, 1.0f); },
              {"'producer' (cpu:0)", "'default:cpu:0' (cpu:0)", "fill", "scale_copy",
               "f32[8] on cpu", "'fc1.weight'"});
  producer->synchronize();
}

TEST_F(StreamSanitizer, WriteAfterAnUnorderedReadIsReported) {
  auto reader = make_stream(Device::cpu(), "reader", StreamKind::Executor);
  Tensor t = ones(8);
  Tensor out = Tensor::empty({8}, DType::F32, Device::cpu());
  Event written = Event::create(Device::cpu());
  written.record(current_stream(Device::cpu()));
  reader->wait(written);
  {
    StreamGuard guard(reader);
    ops::scale_copy(t, out, 1.0f);  // reads t: ordered after the fill
  }
  expect_race([&] { ops::fill(t, 0.0f); }, {"'reader' (cpu:0)", "scale_copy", "fill"});
  reader->synchronize();
}

// The host is a stream: reading a side stream's result needs a synchronize or an event.
TEST_F(StreamSanitizer, HostReadBeforeSynchronizeIsReported) {
  auto side = make_stream(Device::cpu(), "side", StreamKind::Executor);
  Tensor t = Tensor::empty({4}, DType::F32, Device::cpu());
  {
    StreamGuard guard(side);
    ops::fill(t, 2.0f);
  }
  expect_race([&] { (void)t.to_floats(); }, {"'host'", "'side' (cpu:0)", "to_floats"});
  side->synchronize();
  EXPECT_EQ(t.to_floats()[0], 2.0f);  // ordered now
}

// Negative control: DataParallel joining only device 0's driver stream after backward (the
// race the CUDA review found). Replica 1's gradient is written on its compute stream, the
// driver's device-0 stream waits on it, but reduce_add's flatten runs on device 1's own
// stream, which did not.
TEST_F(StreamSanitizer, DpJoinOfDeviceZeroOnlyIsReported) {
  const std::vector<Device> devices{Device::cpu(0), Device::cpu(1)};
  auto compute1 = make_stream(devices[1], "dp-compute-1", StreamKind::Inline);
  std::vector<std::vector<Tensor>> grads{{ones(32, devices[0])}, {Tensor()}};
  grads[1][0] = Tensor::empty({32}, DType::F32, devices[1]);
  sanitizer::set_name(grads[1][0], "grad of fc1.weight");
  {
    StreamGuard guard(compute1);
    ops::fill(grads[1][0], 1.0f);  // replica 1's backward
  }
  Event e = Event::create(devices[1]);
  e.record(*compute1);
  current_stream(devices[0]).wait(e);  // device 0 only
  auto transport = dp::make_transport(devices);
  const std::vector<std::vector<size_t>> groups{{0}};
  expect_race([&] { dp::reduce_add_coalesced(*transport, grads, groups, 2); },
              {"'dp-compute-1' (cpu:1)", "'default:cpu:1' (cpu:1)", "'grad of fc1.weight'"});

  // With device 1's stream joined too, the same reduction is clean.
  current_stream(devices[1]).wait(e);
  dp::reduce_add_coalesced(*transport, grads, groups, 2);
  EXPECT_EQ(grads[0][0].to_floats()[0], 2.0f);
}

// Negative control: a data-loader batch consumed without waiting for its copy.
TEST_F(StreamSanitizer, BatchConsumedWithoutWaitingForItsCopyIsReported) {
  auto h2d = make_stream(Device::cpu(), "ddpb-h2d", StreamKind::Executor);
  Tensor host = Tensor::from_floats(std::vector<float>(64, 1.0f), {64});  // written by the host
  Tensor batch = Tensor::empty({64}, DType::F32, Device::cpu());
  {
    StreamGuard guard(h2d);
    ops::copy(host, batch);
  }
  Event ready = Event::create(Device::cpu());
  ready.record(*h2d);
  Tensor y = Tensor::empty({64}, DType::F32, Device::cpu());
  expect_race([&] { ops::relu_forward(batch, y); },
              {"'ddpb-h2d' (cpu:0)", "'default:cpu:0' (cpu:0)", "copy", "relu_forward"});
  current_stream(Device::cpu()).wait(ready);
  ops::relu_forward(batch, y);  // what DataLoader::next() does first
}

// Negative control: a DDP bucket read before its collective's end event. The collective is
// recorded on the group's comm stream when it runs, so the race is found either by the read
// (collective first) or by the collective (read first), which then fails its Work.
TEST_F(StreamSanitizer, BucketReadBeforeItsCollectiveEndsIsReported) {
  auto group = single_rank_group();
  Tensor bucket = ones(128);
  sanitizer::set_name(bucket, "bucket 0");
  Tensor out = Tensor::empty({128}, DType::F32, Device::cpu());
  comm::WorkPtr work = group->allreduce(bucket);
  expect_race(
      [&] {
        std::string found;
        try {
          ops::scale_copy(bucket, out, 1.0f);
        } catch (const Error& e) {
          found = e.what();
        }
        try {
          work->wait();
        } catch (const Error& e) {
          if (found.empty()) found = e.what();
        }
        if (!found.empty()) throw Error(found);
      },
      {"'ddpb-gloo' (cpu:0)", "'default:cpu:0' (cpu:0)", "allreduce", "'bucket 0'"});
}

TEST_F(StreamSanitizer, BucketReadAfterWorkWaitIsClean) {
  auto group = single_rank_group();
  Tensor bucket = ones(128);
  Tensor out = Tensor::empty({128}, DType::F32, Device::cpu());
  for (int i = 0; i < 3; ++i) {
    group->allreduce(bucket)->wait();
    ops::scale_copy(bucket, out, 2.0f);
    ops::axpy(1.0f, out, bucket);  // the next collective's input, written after the last
  }
  EXPECT_EQ(bucket.to_floats()[0], 27.0f);
}

// Negative control: a gradient written into its bucket view on one stream and read (as the
// bucket) on another without an event. Views share their bucket's storage and history.
TEST_F(StreamSanitizer, GradientIntoBucketViewReadOnAnotherStreamIsReported) {
  auto comm_stream = make_stream(Device::cpu(), "ddpb-gloo", StreamKind::Executor);
  Tensor bucket = Tensor::zeros({100}, DType::F32, Device::cpu());
  sanitizer::set_name(bucket, "bucket 1");
  Tensor view = bucket.flat_view(10, {4, 5});
  Event zeroed = Event::create(Device::cpu());
  zeroed.record(current_stream(Device::cpu()));
  comm_stream->wait(zeroed);
  ops::fill(view, 3.0f);  // the gradient, on the compute (default) stream
  Tensor staged = Tensor::empty({100}, DType::F32, Device::cpu());
  StreamGuard guard(comm_stream);
  expect_race([&] { ops::copy(bucket, staged); },
              {"'ddpb-gloo' (cpu:0)", "'default:cpu:0' (cpu:0)", "'bucket 1'", "fill"});
  comm_stream->synchronize();
}

TEST_F(StreamSanitizer, OffRecordsNothing) {
  sanitizer::set_enabled(false);
  auto producer = make_stream(Device::cpu(), "producer", StreamKind::Executor);
  Tensor t = Tensor::empty({8}, DType::F32, Device::cpu());
  {
    StreamGuard guard(producer);
    ops::fill(t, 5.0f);
  }
  producer->synchronize();
  Tensor out = Tensor::empty({8}, DType::F32, Device::cpu());
  EXPECT_NO_THROW(ops::scale_copy(t, out, 1.0f));
}

// Note [Staging buffers]: a page-locked block released while a stream still reads it goes
// back to a pool that hands it to the next host caller at once. The release is reported at
// the next host access (a destructor cannot throw).
TEST_F(StreamSanitizer, ReleasingAPageLockedBlockAStreamStillReadsIsARace) {
  auto comm = make_stream(Device::cpu(), "comm", StreamKind::Inline);
  Tensor out = Tensor::empty({16}, DType::F32, Device::cpu());
  {
    Tensor staging = Tensor::empty_pinned({16}, DType::F32);
    sanitizer::set_name(staging, "staging");
    StreamGuard guard(comm);
    ops::copy(staging, out);
  }
  expect_race([&] { out.to_floats(); }, {"page-locked", "'staging'", "released", "'comm'"});
  EXPECT_NO_THROW(ones(4).to_floats());  // reported once
}

TEST_F(StreamSanitizer, APageLockedBlockReleasedAfterASynchronizeIsOrdered) {
  auto comm = make_stream(Device::cpu(), "comm", StreamKind::Inline);
  Tensor out = Tensor::empty({16}, DType::F32, Device::cpu());
  {
    Tensor staging = Tensor::empty_pinned({16}, DType::F32);
    StreamGuard guard(comm);
    ops::copy(staging, out);
    comm->synchronize();
  }
  EXPECT_NO_THROW(out.to_floats());
}

// The staged path of Gloo and MPI on CUDA tensors, run on CPU tensors staged the same way: it
// copies in, runs the host collective, copies back and releases its page-locked buffers only
// once the copies back are done.
TEST_F(StreamSanitizer, AStagedHostCollectiveReleasesItsBuffersInStreamOrder) {
  auto comm = make_stream(Device::cpu(), "ddpb-gloo", StreamKind::Executor);
  Tensor input = ones(8), output = Tensor::zeros({8}, DType::F32, Device::cpu());
  Event ready = Event::create(Device::cpu());  // the caller orders the stream (as the group does)
  ready.record(current_stream(Device::cpu()));
  comm->wait(ready);
  const comm::StagedOperand operands[] = {{&output, false, true}, {&input, true, false}};
  const auto stage_all = [](const Tensor&) { return true; };
  comm::run_staged_on_host(
      comm, operands,
      [](const comm::HostTensors& host) {
        EXPECT_TRUE(host[0].storage()->pinned());
        EXPECT_TRUE(host[1].storage()->pinned());
        const float* in = host[1].data<float>();
        float* out = host[0].data<float>();
        for (int i = 0; i < 8; ++i) out[i] = 2 * in[i] + static_cast<float>(i);
      },
      +stage_all);
  std::vector<float> got;
  ASSERT_NO_THROW(got = output.to_floats());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], 2.0f + static_cast<float>(i));
}

}  // namespace
}  // namespace ddpb
