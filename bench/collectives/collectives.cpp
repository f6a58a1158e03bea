#include "bench/collectives/collectives.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
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

// Allreduce and broadcast run in place (in == out); allgather and reduce_scatter do not. The
// coalesced ops cut both buffers into kCoalescedParts equal parts (coalesced_parts).
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
  if (op == CollectiveOp::AllGather || op == CollectiveOp::AllGatherCoalesced)
    return {Tensor::zeros({chunk}, dtype, d), Tensor::zeros({count}, dtype, d)};
  if (op == CollectiveOp::ReduceScatter || op == CollectiveOp::ReduceScatterCoalesced)
    return {Tensor::zeros({count}, dtype, d), Tensor::zeros({chunk}, dtype, d)};
  return {Tensor::zeros({count}, dtype, d),
          Tensor::zeros({count}, dtype, d)};  // alltoall, sendrecv
}

// The coalesced ops' pairs: part k of the world-sized buffer and part k of the chunk-sized one.
struct Parts {
  std::vector<Tensor> whole, chunk;
};
Parts coalesced_parts(const Tensor& whole, const Tensor& chunk) {
  Parts p;
  const int64_t whole_part = whole.numel() / kCoalescedParts;
  const int64_t chunk_part = chunk.numel() / kCoalescedParts;
  for (int k = 0; k < kCoalescedParts; ++k) {
    p.whole.push_back(whole.flat_view(k * whole_part, {whole_part}));
    p.chunk.push_back(chunk.flat_view(k * chunk_part, {chunk_part}));
  }
  return p;
}

comm::WorkPtr issue(comm::ProcessGroup& pg, CollectiveOp op, const Buffers& b) {
  switch (op) {
    case CollectiveOp::AllGatherCoalesced: {
      const Parts p = coalesced_parts(b.out, b.in);
      return pg.allgather_into_tensor_coalesced(p.whole, p.chunk);
    }
    case CollectiveOp::ReduceScatterCoalesced: {
      const Parts p = coalesced_parts(b.in, b.out);
      return pg.reduce_scatter_tensor_coalesced(p.chunk, p.whole);
    }
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
    case CollectiveOp::AllGatherCoalesced: {  // part k: every rank's part k of its input
      const int64_t part = chunk * world / kCoalescedParts, piece = chunk / kCoalescedParts;
      const int64_t k = i / part, j = i % part;
      return input_value(static_cast<int>(j / piece), k * piece + j % piece);
    }
    case CollectiveOp::ReduceScatterCoalesced: {  // part k: this rank's piece of part k, summed
      const int64_t piece = chunk / kCoalescedParts, part = piece * world;
      const int64_t k = i / piece;
      for (int r = 0; r < world; ++r) sum += input_value(r, k * part + rank * piece + i % piece);
      return sum;
    }
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

// One exchange of Note [Clock offset for arrivals].
comm::ClockOffset clock_exchange(comm::ProcessGroup& pg, const Device& device) {
  const int64_t sent = steady_now_ns();
  Tensor flag = Tensor::from_floats({1.0f}, {1}, device);
  pg.allreduce(flag)->wait();
  current_stream(device).synchronize();
  // Rank 0's stamp, after every rank issued the allreduce: two int32 halves, as tensors carry
  // it to every device and backend.
  const int64_t t = steady_now_ns();
  const int32_t high = static_cast<int32_t>(t >> 31), low = static_cast<int32_t>(t & 0x7fffffff);
  Tensor stamp = Tensor::from_ints({high, low}, {2}, device);
  pg.broadcast(stamp, 0)->wait();
  const std::vector<int32_t> got = stamp.to_ints();  // synchronises with the stream
  const int64_t received = steady_now_ns();
  if (pg.rank() == 0) return {};
  const int64_t remote = (static_cast<int64_t>(got[0]) << 31) | got[1];
  return {remote - (sent + received) / 2, (received - sent + 1) / 2};
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

// Rank 0's view of the sweep: every rank's clock offset and its times at every size,
// published through the store once, after the last size (Note [Settling]).
struct Gathered {
  std::vector<comm::ClockOffset> clocks;      // by rank
  std::vector<std::vector<RankTimes>> sizes;  // by size, then rank
};

Gathered gather_times(comm::Store& store, int rank, int world, const comm::ClockOffset& clock,
                      const std::vector<RankTimes>& mine) {
  nlohmann::json sizes = nlohmann::json::array();
  for (const RankTimes& t : mine) sizes.push_back(times_to_json(t));
  const nlohmann::json payload = {{"offset_ns", clock.offset_ns},
                                  {"uncertainty_ns", clock.uncertainty_ns},
                                  {"sizes", std::move(sizes)}};
  const std::string key = "ddpbench/collectives/times/";
  store.set_string(key + std::to_string(rank), reports::json_text(payload));
  if (rank != 0) return {};
  Gathered g;
  g.sizes.resize(mine.size());
  for (int r = 0; r < world; ++r) {
    const nlohmann::json theirs = nlohmann::json::parse(store.get_string(key + std::to_string(r)));
    g.clocks.push_back(
        {theirs.at("offset_ns").get<int64_t>(), theirs.at("uncertainty_ns").get<int64_t>()});
    const nlohmann::json& their_sizes = theirs.at("sizes");
    DDPB_CHECK(their_sizes.size() == mine.size())
        << "collectives: rank " << r << " measured " << their_sizes.size() << " sizes, rank 0 "
        << mine.size();
    for (size_t i = 0; i < mine.size(); ++i) g.sizes[i].push_back(times_from_json(their_sizes[i]));
  }
  return g;
}

void add_arrivals(const std::vector<RankTimes>& ranks, const std::vector<comm::ClockOffset>& clocks,
                  reports::CollectiveResult& out) {
  if (ranks.size() < 2) return;  // one rank: no skew, no last rank
  std::vector<std::vector<int64_t>> arrivals;
  std::vector<int64_t> uncertainties;
  for (size_t r = 0; r < ranks.size(); ++r) {
    arrivals.push_back(ranks[r].arrival_ns);
    uncertainties.push_back(clocks[r].uncertainty_ns);
  }
  const Arrivals a = summarize_arrivals(arrivals, uncertainties);
  out.arrival_skew_us = a.skew_us;
  out.skew_uncertainty_us = a.skew_uncertainty_us;
  out.last_rank = a.last_rank;
  out.last_rank_share = a.last_rank_share;
}

reports::CollectiveResult combine(CollectiveOp op, int64_t count, DType dtype,
                                  const std::vector<RankTimes>& ranks,
                                  const std::vector<comm::ClockOffset>& clocks,
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
  r.busbw_GBps = r.algbw_GBps * collectives_busbw(op, world).factor;
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
  add_arrivals(ranks, clocks, r);
  return r;
}

// The index of the largest of `values` other than `skip` (-1: none).
int largest_except(const std::vector<int64_t>& values, int skip) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(values.size()); ++i) {
    if (i != skip &&
        (best < 0 || values[static_cast<size_t>(i)] > values[static_cast<size_t>(best)]))
      best = i;
  }
  return best;
}

}  // namespace

comm::ClockOffset refine_clock_offset(comm::ProcessGroup& pg, const Device& device,
                                      const comm::ClockOffset& rendezvous) {
  comm::IssueBurst burst(pg);  // as the probes run: the exchange's delays are theirs
  comm::ClockOffset best = pg.rank() == 0 ? comm::ClockOffset{} : rendezvous;
  for (int k = 0; k < kClockRounds; ++k) {
    const comm::ClockOffset c = clock_exchange(pg, device);
    if (pg.rank() != 0 && c.uncertainty_ns < best.uncertainty_ns) best = c;
  }
  return best;
}

std::string clock_identity() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot;
  std::getline(in, boot);
  if (boot.empty()) return "";
  std::error_code ec;  // no time namespaces (before Linux 5.6): nothing can shift the clock
  const std::filesystem::path ns = std::filesystem::read_symlink("/proc/self/ns/time", ec);
  return boot + "|" + (ec ? std::string() : ns.string());
}

bool shares_rank0_clock(comm::Store& store, int rank, const std::string& identity) {
  const std::string key = "ddpbench/collectives/clock_identity";
  if (rank == 0) {
    store.set_string(key, identity);
    return true;
  }
  return !identity.empty() && store.get_string(key) == identity;
}

bool beyond_uncertainty(double measured_us, double uncertainty_us) {
  return measured_us > uncertainty_us;
}

Arrivals summarize_arrivals(const std::vector<std::vector<int64_t>>& arrival_ns,
                            const std::vector<int64_t>& uncertainty_ns) {
  Arrivals out;
  const int world = static_cast<int>(arrival_ns.size());
  if (world < 2 || arrival_ns[0].empty()) return out;
  std::vector<int64_t> sorted_u = uncertainty_ns;
  std::sort(sorted_u.rbegin(), sorted_u.rend());
  out.skew_uncertainty_us = static_cast<double>(sorted_u[0] + sorted_u[1]) / 1e3;
  const size_t probes = arrival_ns[0].size();
  std::vector<double> skews;
  std::map<int, int64_t> last_counts;
  for (size_t k = 0; k < probes; ++k) {
    std::vector<int64_t> at;
    for (const auto& rank_arrivals : arrival_ns) at.push_back(rank_arrivals[k]);
    const int last = largest_except(at, -1), next = largest_except(at, last);
    const int64_t first = *std::min_element(at.begin(), at.end());
    skews.push_back(static_cast<double>(at[static_cast<size_t>(last)] - first) / 1e3);
    const int64_t lead = at[static_cast<size_t>(last)] - at[static_cast<size_t>(next)];
    const int64_t pair_u =
        uncertainty_ns[static_cast<size_t>(last)] + uncertainty_ns[static_cast<size_t>(next)];
    if (beyond_uncertainty(static_cast<double>(lead) / 1e3, static_cast<double>(pair_u) / 1e3))
      ++last_counts[last];
  }
  out.skew_us = percentile(skews, 50);
  if (const auto most = most_counted(last_counts)) {
    out.last_rank = most->first;
    out.last_rank_share = static_cast<double>(most->second) / static_cast<double>(probes);
  }
  return out;
}

reports::BusBw collectives_busbw(CollectiveOp op, int world) {
  reports::BusBw b = busbw_record(op, world);
  if (world <= 1) {
    b.factor = 0;
    b.formula += "; 0 at one rank";
  }
  return b;
}

std::vector<int64_t> sweep_sizes(const CollectivesOptions& o) {
  DDPB_USAGE_CHECK(o.min_bytes >= 1) << "collectives: -b " << o.min_bytes
                                     << " is below 1 byte: the sweep starts at 1 byte at least";
  DDPB_USAGE_CHECK(o.min_bytes <= o.max_bytes)
      << "collectives: -b " << o.min_bytes << " is above -e " << o.max_bytes
      << ": the sweep runs from -b up to -e (bytes)";
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
  // Every rank's chunk the same size, as nccl-tests rounds them (alltoall too: issue 48's P5).
  if (op == CollectiveOp::AllGather || op == CollectiveOp::ReduceScatter ||
      op == CollectiveOp::AllToAll)
    count -= count % world;
  if (op == CollectiveOp::AllGatherCoalesced || op == CollectiveOp::ReduceScatterCoalesced)
    count -= count % (world * kCoalescedParts);
  return count;
}

void check_every_op_measured(const CollectivesOptions& o, int world) {
  const std::vector<int64_t> sizes = sweep_sizes(o);
  const auto element = static_cast<int64_t>(dtype_size(o.dtype));
  for (const CollectiveOp op : o.ops) {
    const bool some = std::any_of(sizes.begin(), sizes.end(), [&](int64_t size) {
      return collective_count(op, size, world, o.dtype) > 0;
    });
    int64_t least = element;
    while (collective_count(op, least, world, o.dtype) == 0) least += element;
    std::string listed;
    for (size_t i = 0; i < sizes.size() && i < 4; ++i) {
      listed += (i ? ", " : "") + std::to_string(sizes[i]);
    }
    DDPB_USAGE_CHECK(some) << "collectives: no size of the sweep (" << listed
                           << (sizes.size() > 4 ? ", ..." : "") << " bytes) holds what "
                           << collectives_busbw(op, world).op << " of " << dtype_name(o.dtype)
                           << " moves at " << world << " ranks: it needs a size of at least "
                           << least << " bytes";
  }
}

std::vector<reports::CollectiveResult> run_collectives(comm::ProcessGroup& pg, comm::Store& store,
                                                       const Device& device,
                                                       const CollectivesOptions& o,
                                                       const comm::ClockOffset& rendezvous,
                                                       reports::CollectivesClock* clock) {
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
  // Through the store before settling, which a wait on the store would undo (Note [Settling]);
  // the exchanges after it, on busy ranks, as the probes will run.
  const bool one_clock = shares_rank0_clock(store, pg.rank(), clock_identity());
  const CollectiveOp first = points.front().op;
  settle(
      pg, device, first,
      std::min(points.front().count, collective_count(first, kSettleMaxBytes, pg.size(), o.dtype)),
      o);
  comm::ClockOffset offset = refine_clock_offset(pg, device, rendezvous);
  if (one_clock) offset = {};  // Note [Clock offset for arrivals]: exact on rank 0's host
  std::vector<RankTimes> mine;
  for (const Point& p : points)
    mine.push_back(measure(pg, device, p.op, p.count, o, offset.offset_ns));
  const Gathered all = gather_times(store, pg.rank(), pg.size(), offset, mine);
  std::vector<reports::CollectiveResult> results;
  for (size_t i = 0; i < all.sizes.size(); ++i)
    results.push_back(combine(points[i].op, points[i].count, o.dtype, all.sizes[i], all.clocks, o));
  if (clock && pg.rank() == 0) {
    *clock = {};
    for (const comm::ClockOffset& c : all.clocks) {
      clock->offset_us.push_back(static_cast<double>(c.offset_ns) / 1e3);
      clock->uncertainty_us.push_back(static_cast<double>(c.uncertainty_ns) / 1e3);
    }
  }
  return results;
}

std::vector<reports::CollectiveOpSummary> summarize_collectives(
    const std::vector<reports::CollectiveResult>& results, int world) {
  std::vector<reports::CollectiveOpSummary> out;
  for (const reports::CollectiveResult& r : results) {
    if (out.empty() || out.back().op != r.op) {
      reports::CollectiveOpSummary s;
      s.op = r.op;
      s.busbw = collectives_busbw(enum_from_name<CollectiveOp>(r.op).value(), world);
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
