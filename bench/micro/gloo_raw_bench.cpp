// Gloo raw vs ProcessGroup: Gloo's own ring allreduce, called directly, next to ddpbench's
// ProcessGroupGloo::allreduce on the very same buffers, to measure what the process group
// adds (issue, the hand-off to its communication thread, Work::wait()).
//
//   gloo_allreduce/raw/ranks:2/bytes:N  gloo::allreduce with AllreduceOptions (RING, f32 sum
//                                       with gloo::sum<float>), called on the rank's thread;
//   gloo_allreduce/pg/ranks:2/bytes:N   ProcessGroupGloo::allreduce(t)->wait() on that thread.
// N: 64 KiB, 1 MiB and 64 MiB (the figure of record; scripts/peer/gloo_ratio.sh compares it).
// ranks:1 isolates the fixed cost per call: with one rank Gloo moves no data, so raw is the
// cost of Gloo's own bookkeeping and pg adds issue, the hand-off to the group's
// communication thread and back (two condition-variable wake-ups), and the flight recorder.
// The pg rows also report the two hand-offs of every collective, from the Work's own
// timestamps: handoff_issue_us (issue -> start on the comm thread) and handoff_wake_us (end
// on the comm thread -> wait() returns), means per rank and collective.
//
// Both sides use the same Gloo set-up as comm/process_group_gloo.cpp: a TCP device bound to
// 127.0.0.1, a gloo::rendezvous::Context of the group's size with the group's timeout, and
// connectFullMesh over a store (the raw side meets through Gloo's own HashStore; the group
// through ddpbench's, as in the tests). Ranks are threads of this process driven by a
// RankTeam (base/rank_team.h): a barrier before each iteration, each rank times its
// call on the host's steady clock, the iteration time is the max over ranks (manual time).
// Each rank's buffer is one f32 tensor on cpu:rank shared by both sides; it is zeroed after
// one checked allreduce per benchmark, so the timed sums never overflow or go denormal.
#include <benchmark/benchmark.h>

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/measure/timed_seconds.h"
#include "comm/group_team.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/ops.h"
#include "core/tensor.h"

namespace {

using ddpb::Device;
using ddpb::DType;
using ddpb::Tensor;

constexpr std::chrono::milliseconds kTimeout{std::chrono::seconds(120)};

// The two sides' state for one world size: the process groups (in `groups`), one raw Gloo
// context per rank, and the shared buffers per size.
struct GlooTeam {
  explicit GlooTeam(int size)
      : groups("gloo", size, kTimeout),
        raw(static_cast<size_t>(size)),
        raw_tags(static_cast<size_t>(size), 0) {
    auto store = std::make_shared<gloo::rendezvous::HashStore>();
    groups.ranks().run_void([&](int r) {
      gloo::transport::tcp::attr attr;
      attr.hostname = "127.0.0.1";
      auto device = gloo::transport::tcp::CreateDevice(attr);
      auto context = std::make_shared<gloo::rendezvous::Context>(r, size);
      context->setTimeout(kTimeout);
      context->connectFullMesh(*store, device);
      raw[static_cast<size_t>(r)] = std::move(context);
    });
  }

  ~GlooTeam() {
    try {
      groups.ranks().run_void([&](int r) { raw[static_cast<size_t>(r)].reset(); });
    } catch (...) {
      // Dropped with the team.
    }
  }

  // The buffers of one size, one per rank on cpu:rank (created on first use).
  const std::vector<Tensor>& buffers(int64_t bytes) {
    std::vector<Tensor>& b = buffers_[bytes];
    if (b.empty()) {
      for (int r = 0; r < groups.size(); ++r) {
        b.push_back(Tensor::empty({bytes / 4}, DType::F32, groups.device(r)));
      }
    }
    return b;
  }

  ddpb::comm::GroupTeam groups;
  std::vector<std::shared_ptr<gloo::Context>> raw;  // [rank]
  std::vector<uint32_t> raw_tags;                   // [rank]: the next raw collective's tag

 private:
  std::map<int64_t, std::vector<Tensor>> buffers_;
};

std::unique_ptr<GlooTeam>& cached_team() {
  static std::unique_ptr<GlooTeam> team;
  return team;
}

GlooTeam& team_for(int ranks) {
  std::unique_ptr<GlooTeam>& team = cached_team();
  if (team && team->groups.size() != ranks) team.reset();
  if (!team) team = std::make_unique<GlooTeam>(ranks);
  return *team;
}

// Gloo's ring allreduce, exactly as a Gloo user calls it: f32 sum in place.
void raw_allreduce(const std::shared_ptr<gloo::Context>& context, const Tensor& t, uint32_t tag) {
  gloo::AllreduceOptions opts(context);
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  opts.setOutput(t.data<float>(), static_cast<size_t>(t.numel()));
  opts.setReduceFunction(
      static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
  opts.setTag(tag);
  opts.setTimeout(kTimeout);
  gloo::allreduce(opts);
}

enum class Side { Raw, ProcessGroup };

// The process group's two thread hand-offs in one collective, in seconds: from issue to its
// start on the communication thread (Work::start_ns), and from its end there (end_ns) to
// Work::wait() returning on the rank's thread. Zero on the raw side, which has none.
struct Handoffs {
  double issue = 0, wake = 0;
};

// One allreduce of `t` by rank r on the given side.
Handoffs allreduce(Side side, GlooTeam& team, int r, const Tensor& t) {
  if (side == Side::Raw) {
    raw_allreduce(team.raw[static_cast<size_t>(r)], t, team.raw_tags[static_cast<size_t>(r)]++);
    return {};
  }
  const int64_t issued = ddpb::steady_now_ns();
  ddpb::comm::WorkPtr work = team.groups.group(r).allreduce(t);
  work->wait();
  const int64_t returned = ddpb::steady_now_ns();
  return {double(work->start_ns - issued) * 1e-9, double(returned - work->end_ns) * 1e-9};
}

void bm_allreduce(benchmark::State& state, Side side) {
  const int n = static_cast<int>(state.range(0));
  const int64_t bytes = state.range(1);
  try {
    GlooTeam& team = team_for(n);
    const std::vector<Tensor>& buffers = team.buffers(bytes);
    team.groups.ranks().run_void([&](int r) {
      const Tensor& t = buffers[static_cast<size_t>(r)];
      ddpb::ops::fill(t, float(r + 1));
      allreduce(side, team, r, t);
      const float expected = float(n * (n + 1) / 2);
      for (int64_t i : {int64_t{0}, t.numel() - 1}) {
        const float got = t.data<float>()[i];
        DDPB_CHECK(got == expected)
            << "allreduce gave " << got << " at element " << i << " of " << t.describe()
            << " on rank " << r << ", expected " << expected;
      }
      ddpb::ops::zero(t);
    });
    std::vector<Handoffs> handoffs(static_cast<size_t>(n));  // [rank], this iteration's
    Handoffs total;                                          // summed over ranks and iterations
    for (auto _ : state) {
      const std::vector<double> seconds = team.groups.ranks().run([&](int r) {
        const Tensor& t = buffers[static_cast<size_t>(r)];
        return ddpb::bench::timed_seconds(
            t.device(), [&] { handoffs[static_cast<size_t>(r)] = allreduce(side, team, r, t); });
      });
      state.SetIterationTime(*std::max_element(seconds.begin(), seconds.end()));
      for (const Handoffs& h : handoffs) {
        total.issue += h.issue;
        total.wake += h.wake;
      }
    }
    if (side == Side::ProcessGroup && state.iterations() > 0) {
      // Means per rank and collective, in microseconds.
      const double calls = double(state.iterations()) * n;
      state.counters["handoff_issue_us"] = total.issue / calls * 1e6;
      state.counters["handoff_wake_us"] = total.wake / calls * 1e6;
    }
  } catch (const std::exception& e) {
    cached_team().reset();
    state.SkipWithError((std::string("gloo allreduce failed: ") + e.what()).c_str());
  }
  using benchmark::Counter;
  state.counters["ranks"] = n;
  state.counters["bytes"] = double(bytes);
  state.counters["algbw"] = Counter(double(bytes), Counter::kIsIterationInvariantRate);
  state.counters["busbw"] =
      Counter(double(bytes) * 2.0 * (n - 1) / n, Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  // Registered here, not statically, so nothing depends on static-initialisation order.
  const std::vector<int64_t> sizes = {int64_t{64} << 10, int64_t{1} << 20, int64_t{64} << 20};
  for (auto [name, side] : {std::pair{"gloo_allreduce/raw", Side::Raw},
                            std::pair{"gloo_allreduce/pg", Side::ProcessGroup}}) {
    benchmark::RegisterBenchmark(name, bm_allreduce, side)
        ->ArgNames({"ranks", "bytes"})
        ->ArgsProduct({{1, 2}, sizes})
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("ranks", "threads of this process on cpu:r, TCP over 127.0.0.1");
  benchmark::AddCustomContext("timing", "max over ranks of one allreduce after a barrier");
  benchmark::RunSpecifiedBenchmarks();
  cached_team().reset();  // before exit: the groups' threads must not outlive main
  benchmark::Shutdown();
  return 0;
}
