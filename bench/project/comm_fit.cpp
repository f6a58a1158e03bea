#include "bench/project/comm_fit.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>

#include "base/rank_team.h"
#include "bench/measure/timed_seconds.h"
#include "comm/group_team.h"
#include "core/check.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "impl_dp/coalesce.h"
#include "impl_dp/data_parallel.h"
#include "impl_dp/transport.h"

namespace ddpb::bench {
namespace {

using nlohmann::json;

// Weighted least squares of y = a·x1 + c·x2 with weights 1/y², a >= 0; returns {a, c}.
std::pair<double, double> fit_two(const std::vector<double>& x1, const std::vector<double>& x2,
                                  const std::vector<double>& y) {
  double s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double w = 1.0 / (y[i] * y[i]);
    s11 += w * x1[i] * x1[i], s12 += w * x1[i] * x2[i], s22 += w * x2[i] * x2[i];
    s1y += w * x1[i] * y[i], s2y += w * x2[i] * y[i];
  }
  const double det = s11 * s22 - s12 * s12;
  double a = det != 0 ? (s1y * s22 - s2y * s12) / det : 0;
  double c = det != 0 ? (s11 * s2y - s12 * s1y) / det : 0;
  if (a < 0 || det == 0) a = 0, c = s2y / s22;  // no latency term: bandwidth alone
  if (!(c > 0)) throw std::runtime_error("the timings do not fit a positive bandwidth");
  return {a, c};
}

Link link_from(std::pair<double, double> ac) {
  return Link{ac.first * 1e3, 1.0 / (ac.second * 1e6)};  // ms -> us; ms/byte -> GB/s
}

void check_sizes(const std::vector<FitPoint>& points) {
  double lo = 0, hi = 0;
  for (const auto& p : points) {
    if (!(p.ms > 0)) throw std::runtime_error("a timing of 0 ms cannot be fitted");
    lo = lo == 0 ? p.bytes : std::min(lo, p.bytes), hi = std::max(hi, p.bytes);
  }
  if (points.size() < 2 || lo == hi) throw std::runtime_error("a fit needs two message sizes");
}

template <typename T>
T median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

const std::vector<int64_t> kSizes = {4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20};
// Copies reach past the caches, as DataParallel's parameter copies do.
const std::vector<int64_t> kCopySizes = {64 << 10, 1 << 20, 16 << 20, 64 << 20};
constexpr int kWarmup = 2, kIters = 5;

// Each rank's buffers for one `op` of `bytes` (the whole buffer: what an AllReduce reduces,
// what an all-gather gathers, what a reduce-scatter scatters).
std::pair<Tensor, Tensor> collective_buffers(FitOp op, int64_t bytes, int ranks, Device d) {
  const int64_t n = bytes / 4;
  Tensor whole = Tensor::zeros({n}, DType::F32, d);
  if (op == FitOp::AllReduce) return {whole, whole};
  return {whole, Tensor::zeros({n / ranks}, DType::F32, d)};
}

std::vector<FitPoint> time_collective(const std::string& backend, int ranks, FitOp op) {
  comm::GroupTeam team(backend, ranks, std::chrono::seconds(60));
  std::vector<FitPoint> points;
  for (int64_t size : kSizes) {
    const int64_t bytes = size / (4 * ranks) * (4 * ranks);  // a whole element a rank
    std::vector<std::pair<Tensor, Tensor>> buf(static_cast<size_t>(ranks));
    team.ranks().run_void([&](int r) {
      buf[static_cast<size_t>(r)] = collective_buffers(op, bytes, ranks, team.device(r));
    });
    const auto run_op = [&](int r) {
      comm::ProcessGroup& g = team.group(r);
      const auto& [whole, part] = buf[static_cast<size_t>(r)];
      switch (op) {
        case FitOp::AllReduce:
          return g.allreduce(whole);
        case FitOp::AllGather:
          return g.allgather(whole, part);
        case FitOp::ReduceScatter:
          break;
      }
      return g.reduce_scatter(part, whole);
    };
    std::vector<double> ms;
    for (int i = 0; i < kWarmup + kIters; ++i) {
      const auto secs = team.ranks().run([&](int r) {
        DeviceGuard guard(team.device(r));
        return timed_seconds(team.device(r), [&] { run_op(r)->wait(); });
      });
      if (i >= kWarmup) ms.push_back(*std::max_element(secs.begin(), secs.end()) * 1e3);
    }
    points.push_back({ranks, static_cast<double>(bytes), median(ms)});
  }
  return points;
}

// DataParallel's own replicate and reduce_add (impl_dp/coalesce.h) from device 0 to one other
// device, timed on the host around the call and a synchronisation of both devices.
struct DpTransferPoints {
  std::vector<FitPoint> replicate, reduce_add;
};

DpTransferPoints time_dp_transfers(const std::string& device) {
  const bool cuda = device == "cuda";
  const Device d0 = cuda ? Device::cuda(0) : Device::cpu(0);
  const Device d1 = cuda ? (cuda_device_count() > 1 ? Device::cuda(1) : d0) : Device::cpu(1);
  const std::vector<Device> devices = {d0, d1};
  DeviceGuard guard(d0);
  auto transport = dp::make_transport(devices);
  const auto timed_ms = [&](const std::function<void()>& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    for (const Device& d : devices) current_stream(d).synchronize();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  DpTransferPoints out;
  // Parameters of at most 1 MiB each, as in the workloads, so that replicate and reduce_add
  // pack them into chunks (flatten, transfer, unflatten) the way a real model's go.
  constexpr int64_t kTensorBytes = 1 << 20;
  for (int64_t bytes : kCopySizes) {
    std::vector<std::vector<Tensor>> tensors(devices.size());
    for (int64_t left = bytes; left > 0; left -= kTensorBytes) {
      const int64_t n = std::min(left, kTensorBytes) / 4;
      for (size_t d = 0; d < devices.size(); ++d)
        tensors[d].push_back(Tensor::zeros({n}, DType::F32, devices[d]));
    }
    const auto groups = dp::coalesce_groups(tensors[0], dp::DpOptions{}.broadcast_bytes);
    std::vector<double> replicate, reduce;
    for (int i = 0; i < kWarmup + kIters; ++i) {
      const double a = timed_ms([&] { dp::broadcast_coalesced(*transport, tensors, groups, 2); });
      const double b = timed_ms([&] { dp::reduce_add_coalesced(*transport, tensors, groups, 2); });
      if (i >= kWarmup) replicate.push_back(a), reduce.push_back(b);
    }
    out.replicate.push_back({1, static_cast<double>(bytes), median(replicate)});
    out.reduce_add.push_back({1, static_cast<double>(bytes), median(reduce)});
  }
  return out;
}

// Note [Compute contention]
// Logical CPU devices share the machine: its cores (two vCPUs may be SMT siblings of one
// core), caches and memory bandwidth. Each device's compute is timed alone and then with every
// compute slot busy at once; the ratio is how much slower a rank computes on a full machine.
// Without it a projection takes N ranks on N cores to compute as fast as one (measured on a
// 2-vCPU EPYC: DDP mlp-small's backward 10.1 ms alone, 13.0 ms with two ranks).
double time_gemms_ms(int devices) {
  constexpr int64_t kSize = 256;
  constexpr int kGemms = 8;
  RankTeam team(devices);
  std::vector<std::array<Tensor, 3>> t(static_cast<size_t>(devices));
  team.run_void([&](int r) {
    const Device d = Device::cpu(r);
    for (auto& x : t[static_cast<size_t>(r)]) x = Tensor::zeros({kSize, kSize}, DType::F32, d);
  });
  std::vector<double> ms;
  for (int i = 0; i < kWarmup + kIters; ++i) {
    const auto secs = team.run([&](int r) {
      DeviceGuard guard(Device::cpu(r));
      // Named references, not a structured binding: Clang 14 (the fuzz build) cannot capture
      // one in the lambda.
      const auto& tensors = t[static_cast<size_t>(r)];
      const Tensor &a = tensors[0], &b = tensors[1], &c = tensors[2];
      return timed_seconds(Device::cpu(r), [&] {
        for (int k = 0; k < kGemms; ++k) ops::gemm(a, false, b, false, c);
      });
    });
    double mean = 0;
    for (double x : secs) mean += x / static_cast<double>(secs.size());
    if (i >= kWarmup) ms.push_back(mean * 1e3);
  }
  return median(ms);
}

json link_json(const Link& l) {
  return {{"alpha_us", l.alpha_us}, {"bandwidth_GBps", l.bandwidth_GBps}};
}

json points_json(const std::vector<FitPoint>& points) {
  json out = json::array();
  for (const auto& p : points)
    out.push_back({{"ranks", p.ranks}, {"bytes", p.bytes}, {"ms", p.ms}});
  return out;
}

}  // namespace

Link fit_ring_allreduce(const std::vector<FitPoint>& points) {
  check_sizes(points);
  std::vector<double> x1, x2, y;
  for (const auto& p : points) {
    x1.push_back(2.0 * (p.ranks - 1));
    x2.push_back(2.0 * (p.ranks - 1) / p.ranks * p.bytes);
    y.push_back(p.ms);
  }
  return link_from(fit_two(x1, x2, y));
}

Link fit_ring_reduce_scatter(const std::vector<FitPoint>& points) {
  check_sizes(points);
  std::vector<double> x1, x2, y;
  for (const auto& p : points) {
    x1.push_back(p.ranks - 1.0);
    x2.push_back((p.ranks - 1.0) / p.ranks * p.bytes);
    y.push_back(p.ms);
  }
  return link_from(fit_two(x1, x2, y));
}

Link fit_copy(const std::vector<FitPoint>& points) {
  check_sizes(points);
  std::vector<double> x1, x2, y;
  for (const auto& p : points) x1.push_back(1), x2.push_back(p.bytes), y.push_back(p.ms);
  return link_from(fit_two(x1, x2, y));
}

json CommFit::to_json() const {
  return {{"backend", backend},
          {"device", device},
          {"allreduce", link_json(allreduce)},
          {"all_gather", link_json(all_gather)},
          {"reduce_scatter", link_json(reduce_scatter)},
          {"copy", link_json(copy)},
          {"reduce_add", link_json(reduce_add)},
          {"compute_contention", compute_contention},
          {"allreduce_points", points_json(allreduce_points)},
          {"all_gather_points", points_json(all_gather_points)},
          {"reduce_scatter_points", points_json(reduce_scatter_points)},
          {"copy_points", points_json(copy_points)},
          {"reduce_add_points", points_json(reduce_add_points)}};
}

CommFit CommFit::from_json(const json& j, const std::string& what) {
  const auto link = [&](const char* key) {
    if (!j.is_object() || !j.contains(key) || !j[key].is_object() || !j[key].contains("alpha_us") ||
        !j[key].contains("bandwidth_GBps"))
      throw UsageError(what + ": comm_fit." + key + " needs alpha_us and bandwidth_GBps");
    return Link{j[key]["alpha_us"].get<double>(), j[key]["bandwidth_GBps"].get<double>()};
  };
  CommFit f;
  f.allreduce = link("allreduce");
  // A fit from before Note [Links by collective] priced both with the AllReduce's link.
  f.all_gather = j.contains("all_gather") ? link("all_gather") : f.allreduce;
  f.reduce_scatter = j.contains("reduce_scatter") ? link("reduce_scatter") : f.allreduce;
  f.copy = link("copy");
  f.reduce_add = link("reduce_add");
  f.compute_contention = j.value("compute_contention", 1.0);
  f.backend = j.value("backend", "");
  f.device = j.value("device", "cpu");
  return f;
}

CommFit measure_comm_fit(const std::string& backend, const std::string& device,
                         const std::vector<int>& ranks, int compute_slots,
                         const SweptPoints& swept) {
  CommFit f;
  f.backend = backend;
  f.device = device;
  // A sweep's points where it timed the collective at two sizes or more (real rank
  // processes), else this process's threads at `ranks`.
  const auto fit_points = [&](const std::vector<FitPoint>& given, FitOp op) {
    std::vector<FitPoint> points = given;
    for (int p : given.size() >= 2 ? std::vector<int>{} : ranks) {
      const auto timed = time_collective(backend, p, op);
      points.insert(points.end(), timed.begin(), timed.end());
    }
    return points;
  };
  f.allreduce_points = fit_points(swept.allreduce, FitOp::AllReduce);
  f.all_gather_points = fit_points(swept.all_gather, FitOp::AllGather);
  f.reduce_scatter_points = fit_points(swept.reduce_scatter, FitOp::ReduceScatter);
  DpTransferPoints dp = time_dp_transfers(device);
  f.copy_points = std::move(dp.replicate);
  f.reduce_add_points = std::move(dp.reduce_add);
  f.allreduce = fit_ring_allreduce(f.allreduce_points);
  f.all_gather = fit_ring_reduce_scatter(f.all_gather_points);
  f.reduce_scatter = fit_ring_reduce_scatter(f.reduce_scatter_points);
  f.copy = fit_copy(f.copy_points);
  f.reduce_add = fit_copy(f.reduce_add_points);
  if (device == "cpu" && compute_slots >= 2)
    f.compute_contention = std::max(1.0, time_gemms_ms(compute_slots) / time_gemms_ms(1));
  return f;
}

Topology measured_topology(const CommFit& fit, int compute_slots) {
  Topology t;
  t.name = "measured";
  t.source = "fitted on this machine: " + fit.backend +
             " AllReduce, all-gather and reduce-scatter, DataParallel's " + fit.device +
             " replicate and reduce_add (bench/project/comm_fit.h)";
  t.node_size = 1 << 20;  // one machine, as many ranks as asked for
  t.intra = fit.allreduce;
  t.all_gather = fit.all_gather;
  t.reduce_scatter = fit.reduce_scatter;
  t.copy = fit.copy;
  t.reduce_add = fit.reduce_add;
  t.compute_slots = compute_slots;
  t.comm_shares_compute = fit.backend == "gloo" && fit.device == "cpu";
  t.one_ring = fit.backend == "gloo";
  t.compute_contention = fit.compute_contention;
  return t;
}

namespace {

std::vector<FitPoint> points_of(const std::vector<reports::CollectiveResult>& results,
                                int64_t ranks, const std::string& op) {
  std::vector<FitPoint> points;
  for (const reports::CollectiveResult& r : results) {
    if (r.op == op && r.time_us > 0) {
      points.push_back(
          {static_cast<int>(ranks), static_cast<double>(r.size_bytes), r.time_us / 1e3});
    }
  }
  return points;
}

Link fit_level(const std::vector<FitPoint>& points, int64_t ranks, const std::string& what,
               const std::string& level) {
  DDPB_USAGE_CHECK(ranks >= 2) << "--inter " << what << ": " << level
                               << " sweep of one rank a group crossed no link";
  DDPB_USAGE_CHECK(points.size() >= 2)
      << "--inter " << what << ": the " << level << " sweep has " << points.size()
      << " AllReduce sizes; the fit needs two or more (ddpbench collectives -o allreduce)";
  return fit_ring_allreduce(points);
}

const reports::CollectivesLevel* level_named(const reports::CollectivesRecord& r,
                                             const std::string& name) {
  if (!r.levels) return nullptr;
  for (const reports::CollectivesLevel& l : *r.levels) {
    if (l.level == name) return &l;
  }
  return nullptr;
}

std::vector<FitPoint> allreduce_points_of(const std::vector<reports::CollectiveResult>& results,
                                          int64_t ranks) {
  return points_of(results, ranks, "allreduce");
}

}  // namespace

SweptPoints swept_points(const reports::CollectivesRecord& record) {
  const int64_t p = record.config.world_size;
  return {points_of(record.results, p, "allreduce"), points_of(record.results, p, "allgather"),
          points_of(record.results, p, "reduce_scatter")};
}

Topology with_inter_link(Topology t, const reports::CollectivesRecord& sweep,
                         const std::string& what, int node_size) {
  const reports::CollectivesLevel* inter = level_named(sweep, "inter");
  const reports::CollectivesLevel* intra = level_named(sweep, "intra");
  if (inter && intra) {
    // Note [Inter-node link from a sweep]: both links of a hierarchical sweep, per device.
    DDPB_USAGE_CHECK(node_size == 0 || node_size == intra->ranks)
        << "--node-size " << node_size << " but " << what << " was swept with nodes of "
        << intra->ranks << " ranks";
    t.node_size = static_cast<int>(intra->ranks);
    t.intra = fit_level(allreduce_points_of(intra->results, intra->ranks), intra->ranks, what,
                        "within-node");
    t.inter = fit_level(allreduce_points_of(inter->results, inter->ranks), inter->ranks, what,
                        "between-node");
  } else {
    DDPB_USAGE_CHECK(node_size > 0)
        << "--inter " << what << " was swept without --node-size: give --node-size";
    const Link node =
        fit_level(swept_points(sweep).allreduce, sweep.config.world_size, what, "flat");
    t.node_size = node_size;
    t.inter = Link{node.alpha_us, node.bandwidth_GBps / node_size};
  }
  t.one_ring = sweep.config.backend == "gloo";
  t.name += "+inter";
  t.source += fmt::format(
      "; nodes of {}, {} AllReduce fitted on {}: between nodes {:.1f} us, {:.4g} GB/s a device{}",
      t.node_size, sweep.config.backend, what, t.inter->alpha_us, t.inter->bandwidth_GBps,
      intra
          ? fmt::format("; within {:.1f} us, {:.4g} GB/s", t.intra.alpha_us, t.intra.bandwidth_GBps)
          : std::string());
  return t;
}

}  // namespace ddpb::bench
