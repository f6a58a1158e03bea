// DataLoader: order across epochs, the same batches at any number of workers, the prefetch
// bound, finite epochs, bad samples skipped or failed, shutdown without consumers, error
// propagation, devices.
#include "data/dataloader.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/device.h"
#include "core/ops.h"
#include "data/synthetic.h"

namespace ddpb {
namespace {

std::vector<uint8_t> host_bytes(const Tensor& t) {
  Tensor h = t.device().is_cpu() ? t : t.to(Device::cpu());
  const auto* p = static_cast<const uint8_t*>(h.raw_data());
  return std::vector<uint8_t>(p, p + h.nbytes());
}

// Expected (epoch, indices) of the first `count` batches, derived from a copy of the
// sampler exactly as the loader documents it.
std::vector<std::pair<int64_t, std::vector<int64_t>>> expected_batches(DistributedSampler s,
                                                                       int64_t batch, int count) {
  std::vector<std::pair<int64_t, std::vector<int64_t>>> out;
  while (static_cast<int>(out.size()) < count) {
    auto order = s.indices();
    for (size_t b = 0; (b + 1) * batch <= order.size() && static_cast<int>(out.size()) < count;
         ++b) {
      out.push_back({s.epoch(), std::vector<int64_t>(order.begin() + b * batch,
                                                     order.begin() + (b + 1) * batch)});
    }
    s.set_epoch(s.epoch() + 1);
  }
  return out;
}

void expect_batches_in_order(const Device& device, LoaderOptions options = {}) {
  auto data = std::make_shared<MarkovTokenDataset>(50, 6, 30, 11);
  // Rank 1 of 2: 25 samples per epoch, 3 batches of 7 (the last 4 samples are dropped).
  DistributedSampler sampler(50, 2, 1, /*shuffle=*/true, 5, /*drop_last=*/false);
  sampler.set_epoch(2);
  auto want = expected_batches(sampler, 7, 8);
  DataLoader loader(data, sampler, 7, device, options);
  EXPECT_EQ(loader.batches_per_epoch(), 3);
  EXPECT_TRUE(loader.last_indices().empty());
  EXPECT_EQ(loader.epoch_of_last(), -1);
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "batch " << i);
    Batch got = loader.next();
    EXPECT_EQ(loader.epoch_of_last(), want[i].first);
    EXPECT_EQ(loader.last_indices(), want[i].second);
    EXPECT_EQ(got.x.device(), device);
    EXPECT_EQ(got.y.device(), device);
    EXPECT_EQ(got.x.shape(), (Shape{7, 6}));
    Batch ref = make_batch(*data, want[i].second, want[i].first);
    EXPECT_EQ(host_bytes(got.x), host_bytes(ref.x));
    EXPECT_EQ(host_bytes(got.y), host_bytes(ref.y));
  }
  EXPECT_EQ(want.back().first, 4) << "the test should cross two epoch boundaries";
}

TEST(DataLoader, BatchesFollowTheSamplerAcrossEpochs) {
  expect_batches_in_order(Device::cpu());
}

TEST(DataLoader, BatchesLiveOnALogicalCpuDevice) {
  expect_batches_in_order(Device::cpu(1));
}

// Issue 26: a batch depends on (seed, epoch, rank, step) only, never on the number of workers
// or on timing; nor on the prefetch depth.
TEST(DataLoader, TheSameBatchesAtZeroOneAndFourWorkers) {
  for (int workers : {0, 1, 4}) {
    for (int prefetch : {1, 3}) {
      SCOPED_TRACE(::testing::Message() << workers << " workers, prefetch " << prefetch);
      expect_batches_in_order(Device::cpu(), {workers, prefetch});
    }
  }
}

TEST(DataLoader, CudaBatchesMatchTheHostBatches) {
  if (cuda_device_count() == 0) {
    GTEST_SKIP() << "no GPU: cuda_compiled_in()=" << cuda_compiled_in()
                 << ", cuda_device_count()=0";
  }
  expect_batches_in_order(Device::cuda(0));
}

// Page-locked staging with asynchronous copies (--pin-memory), from the caller's thread and
// from workers: the same batches, in order.
TEST(DataLoader, CudaPinnedBatchesMatchTheHostBatches) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: cuda_device_count()=0";
  for (int workers : {0, 1, 3}) {
    SCOPED_TRACE(::testing::Message() << workers << " workers");
    expect_batches_in_order(Device::cuda(0), {.num_workers = workers, .pin_memory = true});
  }
}

// Image bytes as a loader ships them with --normalize-on-device: u8 [3, 5, 7] per sample, a
// function of (index, epoch).
class ByteImages final : public Dataset {
 public:
  int64_t size() const override { return 24; }
  Shape x_shape() const override { return {3, 5, 7}; }
  DType x_dtype() const override { return DType::U8; }
  Shape y_shape() const override { return {}; }
  void fill(int64_t index, int64_t epoch, void* x, int32_t* y) const override {
    auto* bytes = static_cast<uint8_t*>(x);
    for (int64_t i = 0; i < 3 * 5 * 7; ++i)
      bytes[i] = static_cast<uint8_t>((index * 37 + epoch * 11 + i * 7) % 256);
    *y = static_cast<int32_t>(index % 4);
  }
};

// u8 batches through the loader (page-locked staging with `pin` on CUDA) and the normalize
// kernel on `device` give what the host gives for the same bytes.
void expect_normalized_batches(const Device& device, bool pin) {
  const std::vector<float> mean{0.485f, 0.456f, 0.406f}, stddev{0.229f, 0.224f, 0.225f};
  auto data = std::make_shared<ByteImages>();
  DistributedSampler sampler(24, 1, 0, /*shuffle=*/true, 3, /*drop_last=*/false);
  auto want = expected_batches(sampler, 6, 6);
  DataLoader loader(data, sampler, 6, device, {.num_workers = 2, .pin_memory = pin});
  for (const auto& [epoch, indices] : want) {
    Batch got = loader.next();
    ASSERT_EQ(got.x.dtype(), DType::U8);
    Tensor on_device = Tensor::empty(got.x.shape(), DType::F32, device);
    ops::normalize_u8_images(got.x, on_device, mean, stddev);
    Batch ref = make_batch(*data, indices, epoch);
    Tensor on_host = Tensor::empty(ref.x.shape(), DType::F32, Device::cpu());
    ops::normalize_u8_images(ref.x, on_host, mean, stddev);
    const std::vector<float> a = on_device.to_floats(), b = on_host.to_floats();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5f) << "element " << i;
  }
}

TEST(DataLoader, ByteBatchesNormalizedOnALogicalCpuDeviceMatchTheHost) {
  expect_normalized_batches(Device::cpu(1), /*pin=*/false);
}

// --normalize-on-device with and without --pin-memory (Note [Staging buffers]).
TEST(DataLoader, CudaNormalizeOnDeviceOfPinnedBytesMatchesTheHost) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: cuda_device_count()=0";
  for (bool pin : {false, true}) {
    SCOPED_TRACE(::testing::Message() << "pin_memory " << pin);
    expect_normalized_batches(Device::cuda(0), pin);
  }
}

TEST(DataLoader, ScalarLabelsAndFloatInputs) {
  auto data = std::make_shared<ClassificationDataset>(40, 5, 3, 2);
  DataLoader loader(data, DistributedSampler(40, 1, 0, false, 0, false), 8, Device::cpu());
  Batch b = loader.next();
  EXPECT_EQ(b.x.shape(), (Shape{8, 5}));
  EXPECT_EQ(b.x.dtype(), DType::F32);
  EXPECT_EQ(b.y.shape(), (Shape{8}));
  EXPECT_EQ(loader.last_indices(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

// Polls `condition` until it holds or 30 s pass; returns whether it held.
template <typename Condition>
bool wait_until(Condition condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

int loader_threads() {
  int n = 0;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(t.path() / "comm");
    std::string name;
    std::getline(comm, name);
    n += name.rfind("ddpb-load-", 0) == 0;
  }
  return n;
}

TEST(DataLoader, DestroysCleanlyWithoutConsumers) {
  auto data = std::make_shared<ClassificationDataset>(1000, 16, 4, 1);
  for (int workers : {1, 3}) {
    for (int prefetch : {1, 2, 5}) {
      for (int consumed : {0, 1, 3}) {
        DataLoader loader(data, DistributedSampler(1000, 1, 0, true, 1, false), 10, Device::cpu(),
                          {workers, prefetch});
        for (int i = 0; i < consumed; ++i) loader.next();
        // Wait until the workers have filled their room (workers * prefetch batches assembled
        // but not consumed) and block on it, the case that must wake on shutdown. A condition,
        // not a sleep: under a sanitizer a worker may take long to start and name itself.
        const int64_t room = consumed + workers * prefetch;
        const bool filled = wait_until(
            [&] { return loader_threads() == workers && loader.totals().batches == room; });
        EXPECT_TRUE(filled) << loader_threads() << " loader threads of " << workers << ", "
                            << loader.totals().batches << " batches assembled of " << room;
        // Never more than the room: the workers are blocked, not running ahead.
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        EXPECT_EQ(loader.totals().batches, room);
      }
    }
  }
  // Immediately, before the workers even ran.
  for (int i = 0; i < 20; ++i) {
    DataLoader loader(data, DistributedSampler(1000, 1, 0, true, 1, false), 10, Device::cpu(),
                      {4, 2});
  }
  EXPECT_EQ(loader_threads(), 0);
}

TEST(DataLoader, FiniteEpochsEndTheLoader) {
  auto data = std::make_shared<ClassificationDataset>(20, 4, 2, 1);
  for (int workers : {0, 2}) {
    LoaderOptions o{workers, 2};
    o.epochs = 2;
    DataLoader loader(data, DistributedSampler(20, 1, 0, true, 1, false), 6, Device::cpu(), o);
    int batches = 0;
    while (loader.has_next()) {
      loader.next();
      ++batches;
    }
    EXPECT_EQ(batches, 6) << "3 batches of 6 per epoch of 20, 2 epochs";
    EXPECT_THROW(loader.next(), Error);
  }
}

// Throws from fill() for one index.
class FailingDataset final : public Dataset {
 public:
  FailingDataset(int64_t bad_index, bool bad_sample)
      : bad_index_(bad_index), bad_sample_(bad_sample) {}
  int64_t size() const override { return 20; }
  Shape x_shape() const override { return {2}; }
  DType x_dtype() const override { return DType::F32; }
  Shape y_shape() const override { return {}; }
  void fill(int64_t index, int64_t, void* x, int32_t* y) const override {
    if (index == bad_index_) {
      if (bad_sample_) throw BadSampleError("sample 13 is corrupt");
      throw std::runtime_error("disk on fire");
    }
    static_cast<float*>(x)[0] = static_cast<float>(index);
    static_cast<float*>(x)[1] = 0;
    *y = 0;
  }

 private:
  int64_t bad_index_;
  bool bad_sample_;
};

TEST(DataLoader, ExceptionInAWorkerReachesNext) {
  // No shuffle, batch 4: batches 0..2 are fine, batch 3 (indices 12..15) holds index 13.
  for (int workers : {0, 1, 3}) {
    auto data = std::make_shared<FailingDataset>(13, /*bad_sample=*/false);
    DataLoader loader(data, DistributedSampler(20, 1, 0, false, 0, false), 4, Device::cpu(),
                      {workers, 2});
    for (int i = 0; i < 3; ++i) EXPECT_NO_THROW(loader.next()) << "batch " << i;
    for (int attempt = 0; attempt < 2; ++attempt) {
      try {
        loader.next();
        FAIL() << "expected ddpb::Error";
      } catch (const UsageError& e) {
        FAIL() << "a runtime_error must not turn into a UsageError: " << e.what();
      } catch (const Error& e) {
        std::string msg = e.what();
        EXPECT_NE(msg.find("disk on fire"), std::string::npos) << msg;
        EXPECT_NE(msg.find("batch 3 of epoch 0"), std::string::npos) << msg;
      }
    }
  }
}

// --on-bad-sample skip replaces a bad sample by the next readable one and counts it; fail (the
// default) ends the run naming it.
TEST(DataLoader, ABadSampleIsSkippedAndCountedOrFailsTheBatch) {
  auto data = std::make_shared<FailingDataset>(13, /*bad_sample=*/true);
  for (int workers : {0, 2}) {
    LoaderOptions skip{workers, 2};
    skip.on_bad_sample = OnBadSample::Skip;
    DataLoader loader(data, DistributedSampler(20, 1, 0, false, 0, false), 4, Device::cpu(), skip);
    for (int i = 0; i < 3; ++i) loader.next();
    const Batch b = loader.next();  // indices 12..15, with 13 read as 14
    EXPECT_EQ(b.x.to_floats()[2], 14.0f);
    EXPECT_EQ(loader.last_stats().skipped, 1);
    EXPECT_EQ(loader.totals().skipped, 1);
    EXPECT_NE(loader.totals().first_skip.find("sample 13 is corrupt"), std::string::npos);
  }
}

TEST(DataLoader, BadSampleErrorKeepsItsType) {
  auto data = std::make_shared<FailingDataset>(0, /*bad_sample=*/true);
  DataLoader loader(data, DistributedSampler(20, 1, 0, false, 0, false), 4, Device::cpu());
  try {
    loader.next();
    FAIL() << "expected ddpb::BadSampleError";
  } catch (const BadSampleError& e) {
    EXPECT_NE(std::string(e.what()).find("sample 13 is corrupt"), std::string::npos) << e.what();
  }
}

TEST(DataLoader, RejectsBadArguments) {
  auto data = std::make_shared<ClassificationDataset>(20, 4, 2, 1);
  auto make = [&](int64_t n, int replicas, int64_t batch, int depth) {
    DataLoader loader(data, DistributedSampler(n, replicas, 0, false, 0, true), batch,
                      Device::cpu(), {1, depth});
  };
  EXPECT_THROW(make(20, 1, 0, 2), UsageError);
  EXPECT_THROW(make(20, 1, 4, 0), UsageError);
  EXPECT_THROW(DataLoader(data, DistributedSampler(20, 1, 0, false, 0, false), 4, Device::cpu(),
                          {kMaxLoaderWorkers + 1, 2}),
               UsageError);
  EXPECT_THROW(make(21, 1, 4, 2), UsageError);  // sampler for another dataset size
  EXPECT_THROW(make(20, 4, 6, 2), UsageError);  // 5 samples per rank < one batch of 6
  EXPECT_NO_THROW(make(20, 4, 5, 2));
  if (!cuda_compiled_in()) {
    EXPECT_THROW(
        DataLoader(data, DistributedSampler(20, 1, 0, false, 0, false), 4, Device::cuda(0)),
        UsageError);
  }
}

}  // namespace
}  // namespace ddpb
