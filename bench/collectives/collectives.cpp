#include "bench/collectives/collectives.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "bench/measure/metrics.h"
#include "bench/measure/stats.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/ops.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "reports/json_io.h"

namespace ddpb::bench {

namespace {

// Allreduce and broadcast run in place (in == out); allgather and reduce_scatter do not.
struct Buffers {
  Tensor in, out;
};

bool in_place(CollectiveOp op) {
  return op == CollectiveOp::AllReduce || op == CollectiveOp::Broadcast ||
         op == CollectiveOp::Reduce;
}

Buffers make_buffers(CollectiveOp op, int64_t count, int world, DType dtype, const Device& d) {
  if (in_place(op)) {
    Tensor t = Tensor::zeros({count}, dtype, d);
    return {t, t};
  }
  const int64_t chunk = count / world;
  if (op == CollectiveOp::AllGather)
    return {Tensor::zeros({chunk}, dtype, d), Tensor::zeros({count}, dtype, d)};
  if (op == CollectiveOp::ReduceScatter)
    return {Tensor::zeros({count}, dtype, d), Tensor::zeros({chunk}, dtype, d)};
  return {Tensor::zeros({count}, dtype, d),
          Tensor::zeros({count}, dtype, d)};  // alltoall, sendrecv
}

comm::WorkPtr issue(comm::ProcessGroup& pg, CollectiveOp op, const Buffers& b) {
  switch (op) {
    case CollectiveOp::AllReduce:
      return pg.allreduce(b.in);
    case CollectiveOp::AllGather:
      return pg.allgather(b.out, b.in);
    case CollectiveOp::ReduceScatter:
      return pg.reduce_scatter(b.out, b.in);
    case CollectiveOp::Broadcast:
      return pg.broadcast(b.in, 0);
    case CollectiveOp::Reduce:
      return pg.reduce(b.in, 0);
    case CollectiveOp::AllToAll:
      return pg.alltoall(b.out, b.in);
    case CollectiveOp::SendRecv:
      return pg.sendrecv(b.in, (pg.rank() + 1) % pg.size(), b.out,
                         (pg.rank() + pg.size() - 1) % pg.size());
  }
  return nullptr;
}

// Small integers, exact in every dtype's sums up to a few hundred ranks.
float input_value(int rank, int64_t i) {
  return static_cast<float>((rank + i) % 3);
}

void fill_inputs(const Buffers& b, int rank) {
  std::vector<float> v(static_cast<size_t>(b.in.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = input_value(rank, static_cast<int64_t>(i));
  const Tensor f32 = Tensor::from_floats(v, {b.in.numel()}, b.in.device());
  if (b.in.dtype() == DType::F32) {
    ops::copy(f32, b.in);
  } else {
    ops::cast(f32, b.in);
  }
}

float expected_value(CollectiveOp op, int rank, int world, int64_t i, int64_t chunk) {
  float sum = 0;
  switch (op) {
    case CollectiveOp::AllReduce:
      for (int r = 0; r < world; ++r) sum += input_value(r, i);
      return sum;
    case CollectiveOp::Broadcast:
      return input_value(0, i);
    case CollectiveOp::AllGather:
      return input_value(static_cast<int>(i / chunk), i % chunk);
    case CollectiveOp::ReduceScatter:
      for (int r = 0; r < world; ++r) sum += input_value(r, rank * chunk + i);
      return sum;
    case CollectiveOp::Reduce:  // the root's; the others' buffer is scratch (not checked)
      for (int r = 0; r < world; ++r) sum += input_value(r, i);
      return sum;
    case CollectiveOp::AllToAll:  // chunk j of the output: rank j's chunk for this rank
      return input_value(static_cast<int>(i / chunk), rank * chunk + i % chunk);
    case CollectiveOp::SendRecv:
      return input_value((rank + world - 1) % world, i);
  }
  return 0;
}

int64_t count_wrong(CollectiveOp op, const Buffers& b, int rank, int world, int64_t count) {
  if (op == CollectiveOp::Reduce && rank != 0) return 0;
  const std::vector<float> got = b.out.to_floats();
  const double tolerance = b.out.dtype() == DType::F32 ? 0.0 : 0.01;
  int64_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float want = expected_value(op, rank, world, static_cast<int64_t>(i), count / world);
    if (!(std::fabs(got[i] - want) <= tolerance * std::fabs(want))) ++wrong;
  }
  return wrong;
}

// What one rank measured at one size.
struct RankTimes {
  double pipelined_us = 0;
  std::vector<int64_t> arrival_ns;  // rank 0's clock
  std::vector<double> duration_us;
  int64_t wrong = 0;
};

double since_us(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

double pipelined_us(comm::ProcessGroup& pg, const Device& device, CollectiveOp op, const Buffers& b,
                    int64_t iters) {
  current_stream(device).synchronize();
  std::vector<comm::WorkPtr> works;
  works.reserve(static_cast<size_t>(iters));
  // In the caller's burst, a host backend's barrier returns to this thread as the library's
  // does to a bare loop: the ranks start together, not each when its thread wakes it.
  pg.barrier()->wait();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t k = 0; k < iters; ++k) works.push_back(issue(pg, op, b));
  // A group completes its collectives in issue order (comm/process_group.h): waiting for the
  // last one first waits once, where waiting in order would put this thread to sleep and wake
  // it per collective, a cost (about 10 us on 2 cores) that nccl-tests' single stream
  // synchronisation does not pay. The waits after it only collect the errors.
  works.back()->wait();
  for (const auto& w : works) w->wait();
  current_stream(device).synchronize();
  return since_us(t0) / static_cast<double>(iters);
}

// Note [Settling]: rounds of kSettleRound operations until rank 0 has spent kSettleNs in them;
// rank 0's clock decides for every rank (a sum over the ranks of its flag), so that all issue
// the same operations.
void settle(comm::ProcessGroup& pg, const Device& device, CollectiveOp op, int64_t count,
            const CollectivesOptions& o) {
  const Buffers b = make_buffers(op, count, pg.size(), o.dtype, device);
  comm::IssueBurst burst(pg);
  const int64_t start_ns = steady_now_ns();
  for (;;) {
    for (int k = 0; k < kSettleRound; ++k) issue(pg, op, b)->wait();
    const bool done = pg.rank() == 0 && steady_now_ns() - start_ns >= kSettleNs;
    Tensor flag = Tensor::from_floats({done ? 1.0f : 0.0f}, {1}, device);
    pg.allreduce(flag)->wait();
    if (flag.item() > 0) return;
  }
}

RankTimes measure(comm::ProcessGroup& pg, const Device& device, CollectiveOp op, int64_t count,
                  const CollectivesOptions& o, int64_t clock_offset_ns) {
  const Buffers b = make_buffers(op, count, pg.size(), o.dtype, device);
  // Warm-up, timed loop and probes alike, as a bare loop calls the library the same way
  // throughout (Note [Issue bursts]).
  comm::IssueBurst burst(pg);
  for (int64_t k = 0; k < o.warmup; ++k) issue(pg, op, b)->wait();
  RankTimes t;
  t.pipelined_us = pipelined_us(pg, device, op, b, o.iters);
  const int64_t probes = o.per_iteration || o.check ? o.iters : std::min(o.iters, kProbeIterations);
  for (int64_t k = 0; k < probes; ++k) {
    if (o.check) fill_inputs(b, pg.rank());
    current_stream(device).synchronize();
    t.arrival_ns.push_back(steady_now_ns() + clock_offset_ns);
    const auto t0 = std::chrono::steady_clock::now();
    issue(pg, op, b)->wait();
    current_stream(device).synchronize();
    t.duration_us.push_back(since_us(t0));
    if (o.check) t.wrong += count_wrong(op, b, pg.rank(), pg.size(), count);
  }
  return t;
}

nlohmann::json times_to_json(const RankTimes& t) {
  return {{"pipelined_us", t.pipelined_us},
          {"arrival_ns", t.arrival_ns},
          {"duration_us", t.duration_us},
          {"wrong", t.wrong}};
}

RankTimes times_from_json(const nlohmann::json& j) {
  return {j.at("pipelined_us").get<double>(), j.at("arrival_ns").get<std::vector<int64_t>>(),
          j.at("duration_us").get<std::vector<double>>(), j.at("wrong").get<int64_t>()};
}

// Rank 0's view of the sweep: every rank's times at every size, published through the store
// once, after the last size (Note [Settling]).
std::vector<std::vector<RankTimes>> gather_times(comm::Store& store, int rank, int world,
                                                 const std::vector<RankTimes>& mine) {
  nlohmann::json sizes = nlohmann::json::array();
  for (const RankTimes& t : mine) sizes.push_back(times_to_json(t));
  const std::string key = "ddpbench/collectives/times/";
  store.set_string(key + std::to_string(rank), reports::json_text(sizes));
  if (rank != 0) return {};
  std::vector<std::vector<RankTimes>> by_size(mine.size());
  for (int r = 0; r < world; ++r) {
    const nlohmann::json theirs = nlohmann::json::parse(store.get_string(key + std::to_string(r)));
    DDPB_CHECK(theirs.size() == mine.size()) << "collectives: rank " << r << " measured "
                                             << theirs.size() << " sizes, rank 0 " << mine.size();
    for (size_t i = 0; i < mine.size(); ++i) by_size[i].push_back(times_from_json(theirs[i]));
  }
  return by_size;
}

void add_arrivals(const std::vector<RankTimes>& ranks, reports::CollectiveResult& out) {
  const size_t probes = ranks[0].arrival_ns.size();
  std::vector<double> skews;
  std::map<int, int64_t> last_counts;
  for (size_t k = 0; k < probes; ++k) {
    int last = 0, first = 0;
    for (int r = 1; r < static_cast<int>(ranks.size()); ++r) {
      if (ranks[static_cast<size_t>(r)].arrival_ns[k] >
          ranks[static_cast<size_t>(last)].arrival_ns[k])
        last = r;
      if (ranks[static_cast<size_t>(r)].arrival_ns[k] <
          ranks[static_cast<size_t>(first)].arrival_ns[k])
        first = r;
    }
    skews.push_back(static_cast<double>(ranks[static_cast<size_t>(last)].arrival_ns[k] -
                                        ranks[static_cast<size_t>(first)].arrival_ns[k]) /
                    1e3);
    ++last_counts[last];
  }
  if (skews.empty()) return;
  out.arrival_skew_us = percentile(skews, 50);
  const auto [rank, count] = *most_counted(last_counts);
  out.last_rank = rank;
  out.last_rank_share = static_cast<double>(count) / static_cast<double>(probes);
}

reports::CollectiveResult combine(CollectiveOp op, int64_t count, DType dtype,
                                  const std::vector<RankTimes>& ranks,
                                  const CollectivesOptions& o) {
  const int world = static_cast<int>(ranks.size());
  reports::CollectiveResult r;
  r.op = std::string(enum_name(op));
  r.count = count;
  r.size_bytes = count * static_cast<int64_t>(dtype_size(dtype));
  r.root = op == CollectiveOp::Broadcast || op == CollectiveOp::Reduce ? 0 : -1;
  r.in_place = in_place(op);
  for (const RankTimes& t : ranks) r.time_us = std::max(r.time_us, t.pipelined_us);
  r.algbw_GBps = algbw_GBps(static_cast<double>(r.size_bytes), r.time_us / 1e3);
  r.busbw_GBps = r.algbw_GBps * busbw_factor(op, world);
  if (o.check) {
    int64_t wrong = 0;
    for (const RankTimes& t : ranks) wrong += t.wrong;
    r.wrong = wrong;
  }
  if (o.per_iteration) {
    std::vector<double> slowest(ranks[0].duration_us.size(), 0.0);
    for (const RankTimes& t : ranks) {
      for (size_t k = 0; k < slowest.size(); ++k)
        slowest[k] = std::max(slowest[k], t.duration_us[k]);
    }
    r.p50_us = percentile(slowest, 50);
    r.p99_us = percentile(slowest, 99);
  }
  add_arrivals(ranks, r);
  return r;
}

}  // namespace

std::vector<int64_t> sweep_sizes(const CollectivesOptions& o) {
  DDPB_USAGE_CHECK(o.min_bytes >= 1 && o.min_bytes <= o.max_bytes)
      << "collectives: -b " << o.min_bytes << " must be at least 1 and at most -e " << o.max_bytes;
  DDPB_USAGE_CHECK(o.step_bytes > 0 || o.step_factor > 1)
      << "collectives: -f must be greater than 1 (or give -i STEP)";
  std::vector<int64_t> sizes;
  for (int64_t s = o.min_bytes; s <= o.max_bytes;) {
    sizes.push_back(s);
    const int64_t next =
        o.step_bytes > 0 ? s + o.step_bytes : static_cast<int64_t>(std::ceil(s * o.step_factor));
    if (next <= s) break;
    s = next;
    DDPB_USAGE_CHECK(sizes.size() <= 4096)
        << "collectives: the sweep from -b to -e has more than 4096 sizes";
  }
  return sizes;
}

int64_t collective_count(CollectiveOp op, int64_t size_bytes, int world, DType dtype) {
  int64_t count = size_bytes / static_cast<int64_t>(dtype_size(dtype));
  if (op == CollectiveOp::AllGather || op == CollectiveOp::ReduceScatter) count -= count % world;
  return count;
}

std::vector<reports::CollectiveResult> run_collectives(comm::ProcessGroup& pg, comm::Store& store,
                                                       const Device& device,
                                                       const CollectivesOptions& o,
                                                       int64_t clock_offset_ns) {
  struct Point {
    CollectiveOp op;
    int64_t count;
  };
  std::vector<Point> points;
  for (const CollectiveOp op : o.ops) {
    for (const int64_t size : sweep_sizes(o)) {
      const int64_t count = collective_count(op, size, pg.size(), o.dtype);
      if (count > 0) points.push_back({op, count});
    }
  }
  if (points.empty()) return {};
  const CollectiveOp first = points.front().op;
  settle(
      pg, device, first,
      std::min(points.front().count, collective_count(first, kSettleMaxBytes, pg.size(), o.dtype)),
      o);
  std::vector<RankTimes> mine;
  for (const Point& p : points)
    mine.push_back(measure(pg, device, p.op, p.count, o, clock_offset_ns));
  const auto all = gather_times(store, pg.rank(), pg.size(), mine);
  std::vector<reports::CollectiveResult> results;
  for (size_t i = 0; i < all.size(); ++i)
    results.push_back(combine(points[i].op, points[i].count, o.dtype, all[i], o));
  return results;
}

std::vector<reports::CollectiveOpSummary> summarize_collectives(
    const std::vector<reports::CollectiveResult>& results, int world) {
  std::vector<reports::CollectiveOpSummary> out;
  for (const reports::CollectiveResult& r : results) {
    if (out.empty() || out.back().op != r.op) {
      reports::CollectiveOpSummary s;
      s.op = r.op;
      s.busbw = busbw_record(enum_from_name<CollectiveOp>(r.op).value(), world);
      out.push_back(s);
    }
    reports::CollectiveOpSummary& s = out.back();
    s.avg_busbw_GBps += r.busbw_GBps;
    if (r.wrong) s.wrong = s.wrong.value_or(0) + *r.wrong;
  }
  for (reports::CollectiveOpSummary& s : out) {
    std::map<int64_t, int64_t> last;
    int64_t sizes = 0;
    for (const reports::CollectiveResult& r : results) {
      if (r.op != s.op) continue;
      ++sizes;
      if (r.last_rank) ++last[*r.last_rank];
    }
    s.avg_busbw_GBps /= static_cast<double>(std::max<int64_t>(sizes, 1));
    if (const auto most = most_counted(last))
      s.last_rank = most->first, s.last_rank_sizes = most->second;
  }
  return out;
}

}  // namespace ddpb::bench
