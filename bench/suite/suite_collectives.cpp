#include "bench/suite/suite_collectives.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "base/subprocess.h"
#include "bench/run/designs.h"
#include "bench/suite/child_process.h"
#include "bench/suite/suite_hosts.h"
#include "reports/collectives_record.h"
#include "reports/json_io.h"

namespace ddpb::bench {

namespace fs = std::filesystem;

namespace {

// The largest bucket the suite's DDP runs use: the default 25 MB cap or a larger swept one.
int64_t largest_bucket_bytes(const SuiteSpec& spec) {
  double mb = 25;
  for (double m : spec.bucket_sweep_mb) mb = std::max(mb, m);
  return static_cast<int64_t>(std::ceil(mb * 1048576.0));
}

// Note [Links by collective]: a suite with a design that shards (ZeRO, FSDP; its sharding
// rounds or a mode) also sweeps the all-gather and reduce-scatter, so that its projection prices
// them at their own links.
bool suite_shards(const SuiteSpec& spec) {
  const auto shards = [](const std::string& mode) {
    const reports::DesignInfo& d = design_named(mode).info;
    return d.shards_parameters || d.shards_gradients || d.shards_optimizer_state;
  };
  return spec.sharding_rounds > 0 || std::any_of(spec.modes.begin(), spec.modes.end(), shards) ||
         std::any_of(spec.runs.begin(), spec.runs.end(),
                     [&](const ExplicitRun& e) { return shards(e.mode); });
}

reports::SuiteCollectives sweep(const SuiteSpec& spec, const std::string& dir, int world,
                                const std::string& backend, const std::atomic<bool>* stop) {
  reports::SuiteCollectives c;
  c.backend = backend;
  c.world_size = world;
  c.max_bytes = largest_bucket_bytes(spec);
  c.record = "collectives/" + backend + ".json";
  c.log = "logs/collectives-" + backend + ".log";
  std::vector<std::string> argv = self_command();
  argv.insert(argv.end(), {"collectives",
                           "-g",
                           std::to_string(world),
                           "--device",
                           std::string(enum_name(spec.device)),
                           "--backend",
                           backend,
                           "-o",
                           suite_shards(spec) ? "allreduce,allgather,reduce_scatter" : "allreduce",
                           "-b",
                           "4K",
                           "-e",
                           std::to_string(c.max_bytes),
                           "-f",
                           "4",
                           "-n",
                           "10",
                           "-w",
                           "2",
                           "-J",
                           *c.record});
  fs::create_directories(fs::path(dir) / "collectives");
  // Across hosts, as the runs of this world size are placed; with more than a rank a host,
  // hierarchical: within and between nodes apart (the two-level fit of add_projection).
  // MPI's launcher starts one host's ranks: its sweep stays here.
  const int nodes = backend == "mpi" ? 1 : spec.hosts.nodes_for(world);
  if (nodes > 1) {
    c.nnodes = nodes;
    c.node_size = world / nodes;
    if (*c.node_size > 1) argv.insert(argv.end(), {"--node-size", std::to_string(*c.node_size)});
    argv.insert(argv.end(), {"--timeout", fmt::format("{:.0f}", spec.timeout_s)});
  }
  const ChildSpec child{argv, dir, (fs::path(dir) / *c.log).string(), 2 * spec.timeout_s + 60,
                        stop, {}};
  std::vector<NodeOutcome> others;
  const ChildResult r = nodes > 1
                            ? run_across_hosts(child, spec.hosts, nodes, spec.timeout_s, &others)
                            : run_child(child);
  if (r.exit_code == 0 && fs::exists(fs::path(dir) / *c.record)) {
    const auto rec = reports::CollectivesRecord::from_json(
        reports::read_json((fs::path(dir) / *c.record).string()));
    c.status = "ok";
    if (!rec.ops.empty()) c.avg_busbw_GBps = rec.ops.front().avg_busbw_GBps;
  } else {
    c.status = "failed";
    c.error = failure_line((fs::path(dir) / *c.log).string()) +
              fmt::format(" (exit code {})", r.exit_code);
  }
  for (size_t k = 0; k < others.size(); ++k) {
    if (others[k].exit_code == 0) continue;
    c.status = "failed";
    c.error = (c.error ? *c.error + "; " : std::string()) +
              fmt::format("node {} on host {}: {} (exit code {})", k + 1, others[k].host,
                          failure_line(others[k].log), others[k].exit_code);
  }
  return c;
}

}  // namespace

std::vector<std::string> suite_ddp_backends(const SuiteSpec& spec) {
  std::vector<std::string> backends{spec.device == DeviceType::CUDA ? "nccl" : "gloo"};
  for (const ExplicitRun& e : spec.runs) {
    if (!design_named(e.mode).info.processes_per_rank || e.world_size < 2 || !e.backend) continue;
    const std::string b(enum_name(*e.backend));
    if (std::find(backends.begin(), backends.end(), b) == backends.end()) backends.push_back(b);
  }
  return backends;
}

void run_suite_collectives(reports::SuiteRecord& suite, const SuiteSpec& spec,
                           const std::string& dir, const std::atomic<bool>* stop) {
  if (suite.collectives) return;
  // The sweep measures the links the designs whose ranks are processes communicate over.
  const bool ddp = std::any_of(spec.modes.begin(), spec.modes.end(), [](const std::string& m) {
    return design_named(m).info.processes_per_rank;
  });
  const int world = spec.world_sizes.empty()
                        ? 1
                        : *std::max_element(spec.world_sizes.begin(), spec.world_sizes.end());
  if (!ddp || world < 2) return;
  suite.collectives.emplace();
  for (const std::string& backend : suite_ddp_backends(spec)) {
    fmt::print("ddpbench suite: collectives sweep over {} at {} ranks\n", backend, world);
    std::fflush(stdout);
    suite.collectives->push_back(sweep(spec, dir, world, backend, stop));
    const reports::SuiteCollectives& c = suite.collectives->back();
    if (c.status == "ok") {
      fmt::print("ddpbench suite: collectives: {} AllReduce, average busbw {:.3g} GB/s\n", backend,
                 c.avg_busbw_GBps.value_or(0));
    } else {
      fmt::print("ddpbench suite: collectives sweep failed: {}\n", c.error.value_or(""));
    }
  }
}

SweptPoints suite_swept_points(const reports::SuiteRecord& suite, const std::string& dir,
                               const std::string& backend) {
  SweptPoints points;
  if (!suite.collectives) return points;
  for (const reports::SuiteCollectives& c : *suite.collectives) {
    if (c.backend != backend || c.status != "ok" || !c.record || c.nnodes.value_or(1) > 1) continue;
    const auto rec = reports::CollectivesRecord::from_json(
        reports::read_json((fs::path(dir) / *c.record).string()));
    const SweptPoints swept = swept_points(rec);
    const auto add = [](std::vector<FitPoint>& to, const std::vector<FitPoint>& from) {
      to.insert(to.end(), from.begin(), from.end());
    };
    add(points.allreduce, swept.allreduce);
    add(points.all_gather, swept.all_gather);
    add(points.reduce_scatter, swept.reduce_scatter);
  }
  return points;
}

Topology suite_two_level(Topology measured, const reports::SuiteRecord& suite,
                         const std::string& dir, const std::string& backend) {
  if (!suite.collectives) return measured;
  for (const reports::SuiteCollectives& c : *suite.collectives) {
    if (c.backend != backend || c.status != "ok" || !c.record || c.nnodes.value_or(1) < 2) continue;
    const auto rec = reports::CollectivesRecord::from_json(
        reports::read_json((fs::path(dir) / *c.record).string()));
    return with_inter_link(std::move(measured), rec, *c.record,
                           static_cast<int>(c.node_size.value_or(1)));
  }
  return measured;
}

}  // namespace ddpb::bench
