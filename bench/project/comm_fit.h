// The `measured` topology of `ddpbench project`: α and β fitted on this machine. The
// collective link comes from a small AllReduce sweep over the process-group backend (Gloo
// over loopback on CPU, ranks as threads of this process, as the collectives micro-benchmark
// runs them); DataParallel's copy and reduce_add links from its own coalesced replicate and
// reduce_add between two devices. docs/metrics.md ("Projection") states the fits.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/project/cost_model.h"
#include "reports/collectives_record.h"

namespace ddpb::bench {

struct FitPoint {
  int ranks = 2;  // 1 for a copy
  double bytes = 0;
  double ms = 0;
};

enum class FitOp { AllReduce, AllGather, ReduceScatter };

// Least squares on relative error (each point weighs 1/ms², so small and large messages count
// alike) of the ring AllReduce model ms = 2(p-1)·α + 2(p-1)/p · n/β. α is kept >= 0. Throws
// when fewer than two sizes are given.
Link fit_ring_allreduce(const std::vector<FitPoint>& points);
// The same for a ring reduce-scatter or all-gather of the whole buffer n:
// ms = (p-1)·α + (p-1)/p · n/β (Note [Links by collective] in cost_model.h).
Link fit_ring_reduce_scatter(const std::vector<FitPoint>& points);
// The same for one copy: ms = α + n/β.
Link fit_copy(const std::vector<FitPoint>& points);

struct CommFit {
  std::string backend;
  std::string device;  // "cpu" or "cuda"
  Link allreduce;
  Link all_gather, reduce_scatter;  // Note [Links by collective]
  Link copy;                        // DP's replicate (a coalesced copy to another device)
  Link reduce_add;                  // DP's reduce_add (a copy back and a sum)
  double compute_contention = 1;    // Note [Compute contention]: CPU only
  std::vector<FitPoint> allreduce_points, all_gather_points, reduce_scatter_points;
  std::vector<FitPoint> copy_points, reduce_add_points;
  nlohmann::json to_json() const;
  // Throws UsageError on missing fields.
  static CommFit from_json(const nlohmann::json& j, const std::string& what);
};

// A collectives sweep's timings (real rank processes) of each collective the fit prices.
struct SweptPoints {
  std::vector<FitPoint> allreduce, all_gather, reduce_scatter;
};

// Times AllReduce, all-gather and reduce-scatter at `ranks` ranks over a few sizes (4 KiB to
// 16 MiB) and DP's replicate and reduce_add on `device` ("cpu" or "cuda", 64 KiB to 64 MiB),
// and fits each. About three seconds on CPU.
// On CPU with `compute_slots` >= 2 it also measures the compute contention. A collective
// `swept` holds at two sizes or more (the suite's `ddpbench collectives` sweep: real rank
// processes) is fitted on those instead of timed here.
CommFit measure_comm_fit(const std::string& backend, const std::string& device,
                         const std::vector<int>& ranks, int compute_slots,
                         const SweptPoints& swept = {});

// The measured topology: one node as large as needed, its devices sharing `compute_slots`
// compute units (CPU cores, or GPUs under logical ranks; 0 = one each).
Topology measured_topology(const CommFit& fit, int compute_slots);

// The AllReduce, all-gather and reduce-scatter rows of a collectives record as fit points at
// its world size.
SweptPoints swept_points(const reports::CollectivesRecord& record);

// Note [Inter-node link from a sweep]
// `project --inter FILE [--node-size K]`: the network between nodes, fitted on a collectives
// record measured across hosts, replaces `topology`'s inter-node link, and K devices make a
// node. The fit is the ring AllReduce's α and β, as for the measured link.
//  - A sweep with one rank a host (no --node-size when it ran): each rank had its host's
//    whole link, so each of a node's K devices gets β/K (Note [Topology]); K must be given.
//  - A hierarchical sweep (`collectives --node-size K`, Note [Hierarchical sweep]): its
//    between-node level ran K rings at once, so its β is already a device's, and its
//    within-node level gives the intra-node link too: the two-level topology, K from the
//    record (a different --node-size is a usage error).
// A Gloo sweep also makes the topology one ring (Note [One ring across nodes]). Throws
// UsageError for a level of one rank or with fewer than two AllReduce sizes.
Topology with_inter_link(Topology topology, const reports::CollectivesRecord& sweep,
                         const std::string& what, int node_size);

}  // namespace ddpb::bench
