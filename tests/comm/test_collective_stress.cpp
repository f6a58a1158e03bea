// Collectives under load: 1,500 small allreduces (1..4096 floats) and 15 large ones
// (1..16 Mi floats) of random sizes among 4 thread-ranks on the Gloo process group, issued
// asynchronously in windows of up to 8 Works as DDP does, with some synchronous ones mixed
// in. Every element of every result is checked against its exact sum, and nothing leaks:
// after a warm-up phase (the first 500 small and 5 large), each rank's caching allocator,
// malloc's bytes in use and the process's resident memory stay flat to the end.
//
// What is legitimately cached, and therefore done during warm-up:
//  - the allocator keeps freed blocks per rounded size (core/allocator.h), so warm-up holds a
//    full window (plus a synchronous op) of every small size class at once, and the first
//    large collective uses the largest size; every large tensor is a view into a fresh
//    max-size allocation, as DDP's gradients are views into flat buckets, so they all share
//    that one size class;
//  - malloc keeps its arenas and Gloo sizes its scratch by the message, so the largest
//    message must go through Gloo during warm-up for the high-water mark to include it.
// The patterns the inputs and expected sums are copied from are built before warm-up too.
//
// Inputs come from pg_test_util.h: ramp(rank, ...) on every rank sums to ramp_sum(4, ...),
// small integers, exact in f32. ramp has period 7, so op i's input is the rank's pattern
// from offset i % 7 on, and its expected sum the expected pattern from the same offset.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "core/allocator.h"
#include "core/device.h"
#include "core/tensor.h"
#include "pg_test_util.h"

namespace ddpb::comm {
namespace {

using namespace std::chrono_literals;
using testing::Clock;
using testing::ramp;
using testing::ramp_sum;
using testing::seconds_since;

constexpr int kRanks = 4;
constexpr int kSmallOps = 1'500, kLargeOps = 15;
// Op i is large iff i % 101 == 100: large ones are 101 ops apart, never two in one window.
constexpr int kLargeEvery = (kSmallOps + kLargeOps) / kLargeOps;
constexpr int kTotalOps = kSmallOps + kLargeOps;
// The first 500 small and 5 large: 4 ranks' 2,020 collectives fill the flight recorder's
// 2,000-entry ring (comm/flight_recorder.h), whose entries' strings would otherwise count as
// growth after warm-up (66 KB over 788 entries).
constexpr int kWarmupOps = 500 + 5;
constexpr int64_t kSmallMax = 4096, kLargeMax = int64_t{16} << 20;
constexpr size_t kWindow = 8;   // Works in flight at most, as DDP's buckets
constexpr int kSyncEvery = 37;  // every 37th small op is waited at once, outside the window
constexpr int kPeriod = 7;      // of ramp's values
static_assert(kLargeEvery > int(kWindow), "one max-size block per rank is all warm-up caches");
static_assert(kWarmupOps % kLargeEvery == 0, "warm-up ends after a large op");
static_assert(kWarmupOps * kRanks >= 2000, "warm-up fills the flight recorder's ring");
// Bounds on growth after warm-up, over the 1,010 ops of each of the 4 ranks that follow it.
// The allocator only ever caches, so its figures are exact and the slack is a few blocks.
// malloc's bytes in use are exact too, but Gloo's and the standard library's containers
// keep their high-water capacity; 64 KiB is 16 bytes per op per rank, where one leaked
// tensor or Work per op would be over 100. The resident
// set is counted in pages, approximately (per-CPU counters), hence a few MiB.
constexpr int64_t kAllocatorSlackBytes = 64 << 10;
constexpr int64_t kHeapSlackBytes = 64 << 10;
constexpr int64_t kRssSlackBytes = 4 << 20;

// Sanitizer runtimes replace malloc and grow their own shadow memory as the run goes, so the
// process's figures say nothing about ours there; the allocator's still do.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kCheckProcessMemory = false;
#else
constexpr bool kCheckProcessMemory = true;
#endif

struct Op {
  int64_t numel;
  bool large;
  bool sync;
};

// The schedule every rank follows: the same seeded generator, so the same sizes everywhere.
std::vector<Op> make_schedule() {
  std::mt19937_64 rng(20240611);
  std::uniform_int_distribution<int64_t> small(1, kSmallMax), large(1, kLargeMax);
  std::vector<Op> ops;
  int small_count = 0;
  for (int i = 0; i < kTotalOps; ++i) {
    const bool is_large = i % kLargeEvery == kLargeEvery - 1;
    const int64_t numel = is_large ? large(rng) : small(rng);
    const bool sync = !is_large && ++small_count % kSyncEvery == 0;
    ops.push_back({numel, is_large, sync});
  }
  // The largest message goes through Gloo in warm-up (see the top of the file).
  ops[kLargeEvery - 1].numel = kLargeMax;
  return ops;
}

struct ProcessMemory {
  int64_t rss_bytes = 0;   // VmRSS
  int64_t hwm_bytes = 0;   // VmHWM: the peak of VmRSS so far
  int64_t heap_bytes = 0;  // malloc's bytes in use (arenas + mmapped chunks); -1 if unknown
};

ProcessMemory process_memory() {
  ProcessMemory m;
#if defined(__GLIBC__)
  const struct mallinfo2 mi = ::mallinfo2();
  m.heap_bytes = static_cast<int64_t>(mi.uordblks + mi.hblkhd);
#else
  m.heap_bytes = -1;
#endif
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    fields >> key >> kib;
    if (key == "VmRSS:") m.rss_bytes = kib * 1024;
    if (key == "VmHWM:") m.hwm_bytes = kib * 1024;
  }
  return m;
}

double mib(int64_t bytes) {
  return static_cast<double>(bytes) / (1 << 20);
}

struct RankReport {
  MemoryStats after_warmup, at_end;
  int64_t checked_ops = 0, checked_elements = 0;
  std::vector<std::string> failures;  // the first few mismatches
};

struct Timings {
  double warmup_s = 0, measured_s = 0;
  ProcessMemory after_warmup, at_end;
};

class Stress {
 public:
  Stress(int rank, ProcessGroup& pg, const std::vector<Op>& ops, const std::vector<float>& expected,
         RankReport& report)
      : rank_(rank),
        pg_(pg),
        ops_(ops),
        expected_(expected),
        input_(ramp(rank, kLargeMax + kPeriod)),
        report_(report) {}

  // Holds, at once, as many tensors of every small size class as can ever be live (a full
  // window and a synchronous op) and one max-size block, so the allocator has cached all it
  // will ever need.
  void fill_allocator_cache() {
    std::vector<Tensor> held;
    size_t last_class = 0;
    for (int64_t numel = 1; numel <= kSmallMax; ++numel) {
      const size_t size_class = CachingAllocator::round_size(size_t(numel) * sizeof(float));
      if (size_class == last_class) continue;
      last_class = size_class;
      for (size_t k = 0; k < kWindow + 1; ++k) held.push_back(new_input(numel, /*large=*/false, 0));
    }
    held.push_back(new_input(kLargeMax, /*large=*/true, 0));
  }

  void run(int begin, int end) {
    for (int i = begin; i < end; ++i) {
      const Op& op = ops_[size_t(i)];
      if (op.sync) {
        Tensor t = new_input(op.numel, op.large, i);
        pg_.allreduce(t)->wait();
        check(t, i);
        continue;
      }
      if (window_.size() == kWindow) retire_oldest();
      Tensor t = new_input(op.numel, op.large, i);
      window_.push_back({t, pg_.allreduce(t), i});
    }
  }

  // Waits for and checks every Work in flight, then meets the other ranks at a barrier. The
  // group releases an op's tensors only after completing its Work, on its comm thread; that
  // thread runs the barrier after it has let go of the last op, so once the barrier has
  // completed this rank holds no tensor of any op and neither does the group.
  void quiesce() {
    while (!window_.empty()) retire_oldest();
    pg_.barrier()->wait();
  }

 private:
  struct InFlight {
    Tensor tensor;
    WorkPtr work;
    int index;
  };

  // A fresh tensor holding op `index`'s input; large ones are views into a max-size block.
  Tensor new_input(int64_t numel, bool large, int index) const {
    Tensor t = Tensor::empty({large ? kLargeMax : numel}, DType::F32, Device::cpu(rank_));
    if (large) t = t.narrow(0, numel);
    std::memcpy(t.data<float>(), input_.data() + index % kPeriod, size_t(numel) * sizeof(float));
    return t;
  }

  void retire_oldest() {
    InFlight f = std::move(window_.front());
    window_.pop_front();
    f.work->wait();
    check(f.tensor, f.index);
  }

  void check(const Tensor& t, int index) {
    const float* got = t.data<float>();
    const float* want = expected_.data() + index % kPeriod;
    const auto [g, w] = std::mismatch(got, got + t.numel(), want);
    ++report_.checked_ops;
    report_.checked_elements += t.numel();
    if (g == got + t.numel() || report_.failures.size() >= 5) return;
    std::ostringstream s;
    s << "op " << index << " (" << t.numel() << " floats) element " << (g - got) << ": got " << *g
      << ", expected " << *w;
    report_.failures.push_back(s.str());
  }

  int rank_;
  ProcessGroup& pg_;
  const std::vector<Op>& ops_;
  const std::vector<float>& expected_;
  const std::vector<float> input_;  // ramp(rank_, ...): op i copies from offset i % 7
  RankReport& report_;
  std::deque<InFlight> window_;
};

TEST(GlooStress, ThousandsOfSmallAndDozensOfLargeAllreducesAreExactAndLeakNothing) {
  const std::vector<Op> ops = make_schedule();
  const std::vector<float> expected = ramp_sum(kRanks, kLargeMax + kPeriod);
  std::vector<RankReport> reports(kRanks);  // rank r writes reports[r] only
  Timings timings;                          // rank 0 writes it

  ProcessGroupOptions options;
  options.backend = comm::CommBackend::Gloo;
  options.timeout = 60s;
  testing::run_thread_ranks(
      kRanks,
      [&](int r) {
        ProcessGroupOptions o = options;
        o.device = Device::cpu(r);
        return o;
      },
      [&](int rank, ProcessGroup& pg) {
        RankReport& report = reports[size_t(rank)];
        CachingAllocator& allocator = device_allocator(Device::cpu(rank));
        Stress stress(rank, pg, ops, expected, report);
        // Every rank is quiescent (nothing in flight, no op's tensor held) while the figures
        // are taken, and waits at the second barrier until rank 0 has read the process's.
        const auto measure = [&](MemoryStats& allocator_stats, ProcessMemory& process) {
          stress.quiesce();
          allocator_stats = allocator.stats();
          if (rank == 0) process = process_memory();
          pg.barrier()->wait();
        };
        stress.fill_allocator_cache();
        pg.barrier()->wait();
        const auto t0 = Clock::now();
        stress.run(0, kWarmupOps);
        if (rank == 0) timings.warmup_s = seconds_since(t0);
        measure(report.after_warmup, timings.after_warmup);
        const auto t1 = Clock::now();
        stress.run(kWarmupOps, kTotalOps);
        if (rank == 0) timings.measured_s = seconds_since(t1);
        measure(report.at_end, timings.at_end);
      },
      options.timeout);

  const ProcessMemory& warm = timings.after_warmup;
  const ProcessMemory& end = timings.at_end;
  std::printf(
      "[   INFO   ] %d allreduces (%d of 1..%lld floats, %d of 1..%lld) among %d "
      "thread-ranks, at most %zu in flight: warm-up %d ops in %.1f s, then %d ops in "
      "%.1f s (%.2f ms per op)\n",
      kTotalOps, kSmallOps, static_cast<long long>(kSmallMax), kLargeOps,
      static_cast<long long>(kLargeMax), kRanks, kWindow, kWarmupOps, timings.warmup_s,
      kTotalOps - kWarmupOps, timings.measured_s,
      1e3 * timings.measured_s / (kTotalOps - kWarmupOps));
  std::printf(
      "[   INFO   ] process after warm-up / at the end: RSS %.1f / %.1f MiB, peak RSS "
      "%.1f / %.1f MiB, malloc in use %.3f / %.3f MiB\n",
      mib(warm.rss_bytes), mib(end.rss_bytes), mib(warm.hwm_bytes), mib(end.hwm_bytes),
      mib(warm.heap_bytes), mib(end.heap_bytes));
  for (int r = 0; r < kRanks; ++r) {
    const RankReport& rep = reports[size_t(r)];
    std::printf(
        "[   INFO   ] rank %d allocator after warm-up / at the end: live %.3f / %.3f "
        "MiB, reserved %.3f / %.3f MiB, %lld / %lld backend allocations; %lld floats "
        "checked\n",
        r, mib(rep.after_warmup.current_bytes), mib(rep.at_end.current_bytes),
        mib(rep.after_warmup.reserved_bytes), mib(rep.at_end.reserved_bytes),
        static_cast<long long>(rep.after_warmup.num_backend_allocs),
        static_cast<long long>(rep.at_end.num_backend_allocs),
        static_cast<long long>(rep.checked_elements));
  }

  for (int r = 0; r < kRanks; ++r) {
    const RankReport& rep = reports[size_t(r)];
    EXPECT_EQ(rep.checked_ops, kTotalOps) << "rank " << r;
    for (const std::string& f : rep.failures) ADD_FAILURE() << "rank " << r << ": " << f;
    EXPECT_LE(rep.at_end.current_bytes, rep.after_warmup.current_bytes)
        << "rank " << r << ": tensors still live after every collective completed";
    EXPECT_LE(rep.at_end.reserved_bytes, rep.after_warmup.reserved_bytes + kAllocatorSlackBytes)
        << "rank " << r << ": the allocator grew after warm-up";
  }
  if (!kCheckProcessMemory) {
    std::printf("[   INFO   ] sanitizer build: the process's memory is not checked\n");
    return;
  }
  if (warm.heap_bytes >= 0) {
    EXPECT_LE(end.heap_bytes, warm.heap_bytes + kHeapSlackBytes)
        << "malloc'ed memory in use grew after warm-up";
  }
  EXPECT_LE(end.rss_bytes, warm.hwm_bytes + kRssSlackBytes) << "the process grew after warm-up";
  EXPECT_LE(end.hwm_bytes, warm.hwm_bytes + kRssSlackBytes)
      << "the process's peak grew after warm-up";
}

}  // namespace
}  // namespace ddpb::comm
