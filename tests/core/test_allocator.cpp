#include "core/allocator.h"

#include <map>
#include <string>
#include <thread>

#include "test_util.h"

namespace ddpb {
namespace {

class CountingMemory : public MemoryBackend {
 public:
  explicit CountingMemory(int* allocs) : allocs_(allocs) {}
  void* raw_alloc(size_t n) override {
    ++*allocs_;
    return std::malloc(n);
  }
  void raw_free(void* p) override { std::free(p); }

 private:
  int* allocs_;
};

// Fails once `budget` bytes are out, like a device that is full.
class BoundedMemory : public MemoryBackend {
 public:
  explicit BoundedMemory(size_t budget, int* frees) : budget_(budget), frees_(frees) {}
  void* raw_alloc(size_t n) override {
    if (used_ + n > budget_) throw Error("backend out of memory");
    used_ += n;
    sizes_[p_ = std::malloc(n)] = n;
    return p_;
  }
  void raw_free(void* p) override {
    ++*frees_;
    used_ -= sizes_[p];
    std::free(p);
  }

 private:
  size_t budget_, used_ = 0;
  int* frees_;
  void* p_ = nullptr;
  std::map<void*, size_t> sizes_;
};

TEST(CachingAllocator, OutOfMemoryEmptiesTheCacheAndRetries) {
  int frees = 0;
  CachingAllocator a(std::make_unique<BoundedMemory>(4096, &frees));
  a.free(a.allocate(4096));    // cached
  void* p = a.allocate(2048);  // does not fit until the cache is given back
  EXPECT_EQ(frees, 1);
  a.free(p);
}

// Note [Out of memory with NCCL live]: no cudaFree while a communicator may be waiting.
TEST(CachingAllocator, OutOfMemoryWithACommunicatorLiveFailsFastWithStatistics) {
  int frees = 0;
  CachingAllocator a(std::make_unique<BoundedMemory>(4096, &frees));
  a.free(a.allocate(4096));
  CommunicatorLease lease;
  try {
    a.allocate(2048);
    FAIL() << "expected an out-of-memory error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("while a communicator is live"), std::string::npos) << what;
    EXPECT_NE(what.find("reserved 0 MiB"), std::string::npos) << what;
    EXPECT_NE(what.find("backend out of memory"), std::string::npos) << what;
  }
  EXPECT_EQ(frees, 0) << "the cache must be kept";
}

TEST(CachingAllocator, ReusesFreedBlocksOfTheSameRoundedSize) {
  int backend_allocs = 0;
  CachingAllocator a(std::make_unique<CountingMemory>(&backend_allocs));
  void* p = a.allocate(1000);
  a.free(p);
  void* q = a.allocate(1000);
  EXPECT_EQ(p, q);
  void* r = a.allocate(1010);  // rounds to the same size class as 1000
  EXPECT_NE(r, q);
  EXPECT_EQ(backend_allocs, 2);
  a.free(q);
  a.free(r);
  auto s = a.stats();
  EXPECT_EQ(s.num_allocs, 3);
  EXPECT_EQ(s.num_cache_hits, 1);
  EXPECT_EQ(s.num_backend_allocs, 2);
  EXPECT_EQ(s.current_bytes, 0);
}

TEST(CachingAllocator, TracksCurrentAndPeakBytes) {
  int n = 0;
  CachingAllocator a(std::make_unique<CountingMemory>(&n));
  size_t s1 = CachingAllocator::round_size(4096), s2 = CachingAllocator::round_size(10000);
  void* p = a.allocate(4096);
  void* q = a.allocate(10000);
  EXPECT_EQ(a.stats().current_bytes, int64_t(s1 + s2));
  EXPECT_EQ(a.stats().peak_bytes, int64_t(s1 + s2));
  a.free(q);
  EXPECT_EQ(a.stats().current_bytes, int64_t(s1));
  EXPECT_EQ(a.stats().peak_bytes, int64_t(s1 + s2));
  a.reset_peak();
  EXPECT_EQ(a.stats().peak_bytes, int64_t(s1));
  EXPECT_EQ(a.stats().reserved_bytes, int64_t(s1 + s2));  // q is cached, still reserved
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes, int64_t(s1));
  a.free(p);
}

TEST(CachingAllocator, PoolsAreSeparatePerStream) {
  int n = 0;
  CachingAllocator a(std::make_unique<CountingMemory>(&n));
  void* p = a.allocate(2048, /*pool=*/1);
  a.free(p);
  void* q = a.allocate(2048, /*pool=*/2);
  EXPECT_NE(p, q) << "a block freed on one stream must not be reused by another";
  a.free(q);
}

TEST(CachingAllocator, RoundingWastesAtMostAQuarter) {
  for (size_t n : {1ul, 511ul, 513ul, 1000ul, 4097ul, 123457ul, 1ul << 26}) {
    size_t r = CachingAllocator::round_size(n);
    EXPECT_GE(r, n);
    EXPECT_LE(double(r), std::max(512.0, 1.25 * double(n))) << n;
  }
}

TEST(CachingAllocator, RejectsForeignPointers) {
  int n = 0;
  CachingAllocator a(std::make_unique<CountingMemory>(&n));
  int x;
  EXPECT_THROW(a.free(&x), Error);
}

TEST(DeviceAllocator, TensorsReturnMemoryToTheirDevicePool) {
  auto& a = device_allocator(Device::cpu(3));
  auto before = a.stats();
  {
    Tensor t = Tensor::empty({1000}, DType::F32, Device::cpu(3));
    EXPECT_GT(a.stats().current_bytes, before.current_bytes);
  }
  EXPECT_EQ(a.stats().current_bytes, before.current_bytes);
  Tensor again = Tensor::empty({1000}, DType::F32, Device::cpu(3));
  EXPECT_GT(a.stats().num_cache_hits, before.num_cache_hits);
}

// Note [Memory categories]: each block is filed under the innermost scope of the thread that
// allocated it (else the process default), a retag moves it, and a new peak remembers what each
// category held then.
TEST(CachingAllocator, MemoryByCategoryAtThePeak) {
  int n = 0;
  CachingAllocator a(std::make_unique<CountingMemory>(&n));
  const auto at = [](const MemoryByCategory& m, MemoryCategory c) {
    return m[static_cast<size_t>(c)];
  };
  void* params = nullptr;
  {
    MemoryCategoryScope scope(MemoryCategory::Parameters);
    params = a.allocate(4096);
    MemoryCategoryScope inner(MemoryCategory::OptimizerState);
    void* state = a.allocate(8192);
    EXPECT_EQ(at(a.stats().current_by_category, MemoryCategory::OptimizerState), 8192);
    a.free(state);
  }
  EXPECT_EQ(current_memory_category(), MemoryCategory::Other) << "outside every scope";
  set_default_memory_category(MemoryCategory::Activations);
  void* act = nullptr;
  std::thread([&] { act = a.allocate(2048); }).join();  // a thread in no scope: the default
  set_default_memory_category(MemoryCategory::Other);
  MemoryStats s = a.stats();
  EXPECT_EQ(at(s.current_by_category, MemoryCategory::Parameters), 4096);
  EXPECT_EQ(at(s.current_by_category, MemoryCategory::Activations), 2048);
  EXPECT_EQ(at(s.peak_by_category, MemoryCategory::OptimizerState), 8192)
      << "the peak (4096 + 8192) came while the state was live";
  EXPECT_EQ(at(s.peak_by_category, MemoryCategory::Activations), 0);
  a.set_category(act, MemoryCategory::Gradients);
  s = a.stats();
  EXPECT_EQ(at(s.current_by_category, MemoryCategory::Activations), 0);
  EXPECT_EQ(at(s.current_by_category, MemoryCategory::Gradients), 2048);
  a.reset_peak();
  EXPECT_EQ(a.stats().peak_by_category, a.stats().current_by_category);
  int64_t sum = 0;
  for (int64_t b : a.stats().current_by_category) sum += b;
  EXPECT_EQ(sum, a.stats().current_bytes);
  a.free(params);
  a.free(act);
  EXPECT_EQ(a.stats().current_by_category, MemoryByCategory{});
}

}  // namespace
}  // namespace ddpb
