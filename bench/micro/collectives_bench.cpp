// Collective micro-benchmarks: allreduce, broadcast and allgather through ddpbench's
// ProcessGroup (comm/process_group.h), for each backend, world size and message size.
//
// Ranks are threads of this process, each with its own ProcessGroup over one shared
// HashStore (comm/group_team.h); rank 0 is Google Benchmark's thread, the others are
// parked on a barrier and released once per iteration (base/rank_team.h).
//
//   gloo  ranks 2 and 4, on logical CPU devices cpu:0..n-1 (TCP over loopback);
//   nccl  ranks 2, 4 and 8 on cuda:0..n-1, registered only when built with NCCL; without a
//         GPU (or with fewer GPUs than ranks) each reports SkipWithError("no CUDA device").
//
// Names: <backend>/<collective>/ranks:<n>/bytes:<size>/manual_time, size from 1 KiB to
// 256 MiB in powers of 4 (--max_bytes=N lowers the top; the smoke test uses 64 KiB). As in
// nccl-tests, size is the f32 tensor that is reduced or broadcast, and for allgather the
// *output*: every rank contributes size/n bytes.
//
// Timing (UseManualTime): every iteration releases all ranks together through a barrier;
// each rank times issuing the collective and Work::wait() (gloo: host steady clock, wait()
// blocks until done; nccl: CUDA events on the rank's current stream, which wait() orders
// after the collective), and the iteration time is the maximum over ranks.
//
// Counters, nccl-tests' definitions (its doc/PERFORMANCE.md):
//   algbw  size / time (bytes/s)
//   busbw  algbw x factor, the per-link traffic of a ring, comparable across world sizes and
//          with the hardware's bandwidth: AllReduce 2(n-1)/n, AllGather (n-1)/n, Broadcast 1.
//
// Correctness: before timing, each benchmark runs its collective once on inputs of rank+1
// and checks the result (allreduce: n(n+1)/2 everywhere, broadcast: rank 0's 1, allgather:
// chunk k holds k+1); a wrong result is reported as an error, not timed.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "bench/measure/timed_seconds.h"
#include "comm/group_team.h"
#include "core/allocator.h"
#include "core/check.h"
#include "core/ops.h"
#include "core/tensor.h"

namespace {

using ddpb::Device;
using ddpb::DType;
using ddpb::Tensor;
using ddpb::comm::GroupTeam;

constexpr int64_t kMinBytes = int64_t{1} << 10;
constexpr int64_t kMaxBytes = int64_t{256} << 20;
// Generous: a 256 MiB allgather over loopback on a busy 2-core machine takes seconds.
constexpr std::chrono::milliseconds kTimeout{std::chrono::seconds(120)};

enum class Collective { AllReduce, Broadcast, AllGather };

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::AllReduce:
      return "allreduce";
    case Collective::Broadcast:
      return "broadcast";
    case Collective::AllGather:
      return "allgather";
  }
  return "?";
}

// nccl-tests' bus bandwidth factors.
double bus_factor(Collective c, int n) {
  switch (c) {
    case Collective::AllReduce:
      return 2.0 * (n - 1) / n;
    case Collective::AllGather:
      return double(n - 1) / n;
    case Collective::Broadcast:
      return 1.0;
  }
  return 0.0;
}

// The team of the benchmark that ran last. Consecutive benchmarks with the same backend and
// world size share it (registration is ranks-major for that), so the repeated calls Google
// Benchmark makes per benchmark do not rendezvous again. Dropped after a failure, since a
// group whose collective failed stays broken.
std::unique_ptr<GroupTeam>& cached_team() {
  static std::unique_ptr<GroupTeam> team;
  return team;
}

GroupTeam& team_for(const std::string& backend, int ranks) {
  std::unique_ptr<GroupTeam>& team = cached_team();
  if (team && (team->group(0).backend() != backend || team->size() != ranks)) team.reset();
  if (!team) team = std::make_unique<GroupTeam>(backend, ranks, kTimeout);
  return *team;
}

// This rank's tensors: `in` is reduced/broadcast in place or gathered into `out`.
struct RankBuffers {
  Tensor in, out;
};

ddpb::comm::WorkPtr issue(Collective c, ddpb::comm::ProcessGroup& pg, const RankBuffers& b) {
  switch (c) {
    case Collective::AllReduce:
      return pg.allreduce(b.in);
    case Collective::Broadcast:
      return pg.broadcast(b.in, /*root=*/0);
    case Collective::AllGather:
      return pg.allgather(b.out, b.in);
  }
  DDPB_FAIL() << "unknown collective";
  return nullptr;
}

void expect_value(const Tensor& t, int64_t index, float expected, Collective c, int rank) {
  const float got = t.flat_view(index, {1}).item();
  DDPB_CHECK(got == expected) << collective_name(c) << " gave " << got << " at element " << index
                              << " of " << t.describe() << " on rank " << rank << ", expected "
                              << expected;
}

// Inputs of rank+1; one collective; the result checked at the ends of every chunk.
void run_checked(Collective c, ddpb::comm::ProcessGroup& pg, const RankBuffers& b, int rank) {
  const int n = pg.size();
  ddpb::ops::fill(b.in, float(rank + 1));
  issue(c, pg, b)->wait();
  const int64_t count = b.in.numel();
  switch (c) {
    case Collective::AllReduce:
      for (int64_t i : {int64_t{0}, count / 2, count - 1}) {
        expect_value(b.in, i, float(n * (n + 1) / 2), c, rank);
      }
      ddpb::ops::zero(b.in);  // timed allreduces then keep summing zeros, never overflowing
      break;
    case Collective::Broadcast:
      for (int64_t i : {int64_t{0}, count - 1}) expect_value(b.in, i, 1.0f, c, rank);
      break;
    case Collective::AllGather:
      for (int k = 0; k < n; ++k) {
        expect_value(b.out, k * count, float(k + 1), c, rank);
        expect_value(b.out, k * count + count - 1, float(k + 1), c, rank);
      }
      break;
  }
}

void bm_collective(benchmark::State& state, const std::string& backend, Collective c) {
  const int n = static_cast<int>(state.range(0));
  const int64_t requested = state.range(1);
  // Per-rank f32 input count; the allgather input is one n-th of the reported size.
  const int64_t count = c == Collective::AllGather ? requested / (4 * n) : requested / 4;
  const int64_t size_bytes = c == Collective::AllGather ? count * 4 * n : count * 4;
  if (backend == "nccl") {
    const int gpus = ddpb::cuda_device_count();  // 0 on any driver error
    if (gpus == 0) {
      state.SkipWithError("no CUDA device");
      return;
    }
    if (gpus < n) {
      state.SkipWithError(
          ("needs " + std::to_string(n) + " GPUs, found " + std::to_string(gpus)).c_str());
      return;
    }
  }
  std::vector<RankBuffers> buffers(static_cast<size_t>(n));
  try {
    GroupTeam& team = team_for(backend, n);
    team.ranks().run_void([&](int r) {
      const Device dev = team.device(r);
      ddpb::DeviceGuard guard(dev);
      RankBuffers& b = buffers[static_cast<size_t>(r)];
      b.in = Tensor::empty({count}, DType::F32, dev);
      if (c == Collective::AllGather) b.out = Tensor::empty({count * n}, DType::F32, dev);
      run_checked(c, team.group(r), b, r);
      ddpb::current_stream(dev).synchronize();
    });
    for (auto _ : state) {
      const std::vector<double> seconds = team.ranks().run([&](int r) {
        const Device dev = team.device(r);
        ddpb::DeviceGuard guard(dev);
        ddpb::comm::ProcessGroup& pg = team.group(r);
        const RankBuffers& b = buffers[static_cast<size_t>(r)];
        return ddpb::bench::timed_seconds(dev, [&] { issue(c, pg, b)->wait(); });
      });
      state.SetIterationTime(*std::max_element(seconds.begin(), seconds.end()));
    }
  } catch (const std::exception& e) {
    cached_team().reset();
    state.SkipWithError((backend + " " + collective_name(c) + " failed: " + e.what()).c_str());
  }
  // Every collective has completed (Work::wait, or an event sync for nccl): release the
  // buffers and hand their memory back, so 256 MiB sizes do not pile up in the caches.
  buffers.clear();
  for (int r = 0; r < n; ++r)
    ddpb::device_allocator(ddpb::comm::rank_device(backend, r)).empty_cache();

  using benchmark::Counter;
  state.counters["ranks"] = n;
  state.counters["bytes"] = double(size_bytes);
  state.counters["algbw"] = Counter(double(size_bytes), Counter::kIsIterationInvariantRate);
  state.counters["busbw"] =
      Counter(double(size_bytes) * bus_factor(c, n), Counter::kIsIterationInvariantRate);
}

void register_backend(const std::string& backend, const std::vector<int>& world_sizes,
                      int64_t max_bytes) {
  // Ranks-major, so that one team serves all three collectives of a world size.
  for (int ranks : world_sizes) {
    for (Collective c : {Collective::AllReduce, Collective::Broadcast, Collective::AllGather}) {
      benchmark::RegisterBenchmark((backend + "/" + collective_name(c)).c_str(), bm_collective,
                                   backend, c)
          ->ArgNames({"ranks", "bytes"})
          ->RangeMultiplier(4)
          ->Ranges({{ranks, ranks}, {kMinBytes, max_bytes}})
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

// Takes --max_bytes=N out of argv (Google Benchmark rejects flags it does not know).
// Returns false on a malformed value.
bool take_max_bytes(int* argc, char** argv, int64_t* max_bytes) {
  constexpr const char* kFlag = "--max_bytes=";
  int out = 1;
  bool ok = true;
  for (int i = 1; i < *argc; ++i) {
    if (std::strncmp(argv[i], kFlag, std::strlen(kFlag)) == 0) {
      char* end = nullptr;
      const long long v = std::strtoll(argv[i] + std::strlen(kFlag), &end, 10);
      ok = ok && end != nullptr && *end == '\0' && v >= kMinBytes;
      *max_bytes = std::min<int64_t>(v, kMaxBytes);
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t max_bytes = kMaxBytes;
  if (!take_max_bytes(&argc, argv, &max_bytes)) {
    std::cerr << "collectives_bench: --max_bytes takes a byte count of at least " << kMinBytes
              << " (sizes above " << kMaxBytes << " are capped)\n";
    return 2;
  }
  // Registered here, not statically: the size range depends on --max_bytes, and nothing
  // depends on static-initialisation order.
  register_backend("gloo", {2, 4}, max_bytes);
#if defined(DDPB_HAVE_CUDA) && defined(DDPB_HAVE_NCCL)
  register_backend("nccl", {2, 4, 8}, max_bytes);
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("ranks",
                              "threads of this process, one ProcessGroup each over a "
                              "shared HashStore; gloo on cpu:r, nccl on cuda:r");
  benchmark::AddCustomContext("timing",
                              "max over ranks of issue + Work::wait() after a barrier; "
                              "nccl: CUDA events");
  benchmark::AddCustomContext("busbw",
                              "algbw x 2(n-1)/n allreduce, (n-1)/n allgather, "
                              "1 broadcast (nccl-tests)");
  benchmark::AddCustomContext("cuda_devices", std::to_string(ddpb::cuda_device_count()));
  benchmark::RunSpecifiedBenchmarks();
  cached_team().reset();  // before exit: the groups' threads must not outlive main
  benchmark::Shutdown();
  return 0;
}
