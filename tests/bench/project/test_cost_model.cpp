// The projection's physics against closed forms (bench/project/cost_model.h, comm_fit.h) and
// the DDP bucket pipeline on hand-built timelines (bench/project/projection.h).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <variant>

#include "bench/project/comm_fit.h"
#include "bench/project/cost_model.h"
#include "bench/project/projection.h"
#include "core/check.h"
#include "tests/bench/project/toy_basis.h"

namespace ddpb::bench {
namespace {

// 10 us and 10 GB/s: a byte costs 1e-7 ms.
const Link kLink{10.0, 10.0};

TEST(CostModel, RingAllReduceIsTheClosedForm) {
  for (int p : {2, 3, 8, 64}) {
    for (double n : {0.0, 4096.0, 1e8}) {
      const double beta_bytes_per_ms = 10.0 * 1e6;
      const double expected = 2.0 * (p - 1) / p * n / beta_bytes_per_ms + 2.0 * (p - 1) * 0.010;
      EXPECT_NEAR(ring_allreduce_ms(n, p, kLink), expected, 1e-12) << p << " ranks, " << n;
    }
  }
  EXPECT_EQ(ring_allreduce_ms(1e9, 1, kLink), 0);
  // 100 MB over 4 ranks at 10 GB/s: 1.5 x 10 ms of data + 6 x 10 us.
  EXPECT_NEAR(ring_allreduce_ms(1e8, 4, kLink), 15.06, 1e-9);
}

TEST(CostModel, TreeAllReduceHasLogLatency) {
  // 2·ceil(log2 p)·α + 2·n/β.
  EXPECT_NEAR(tree_allreduce_ms(0, 8, kLink), 2 * 3 * 0.010, 1e-12);
  EXPECT_NEAR(tree_allreduce_ms(0, 9, kLink), 2 * 4 * 0.010, 1e-12);
  EXPECT_NEAR(tree_allreduce_ms(1e7, 2, kLink), 2 * 0.010 + 2.0, 1e-12);
  // Small messages on many ranks: the tree wins; large messages: the ring.
  EXPECT_LT(tree_allreduce_ms(1024, 512, kLink), ring_allreduce_ms(1024, 512, kLink));
  EXPECT_GT(tree_allreduce_ms(1e9, 8, kLink), ring_allreduce_ms(1e9, 8, kLink));
}

TEST(CostModel, ReduceScatterAndAllGatherAreHalfARing) {
  for (int p : {2, 5, 16}) {
    EXPECT_NEAR(ring_reduce_scatter_ms(1e6, p, kLink) + ring_all_gather_ms(1e6, p, kLink),
                ring_allreduce_ms(1e6, p, kLink), 1e-12);
  }
}

// ZeRO's collectives on a topology: a ring in one node; across nodes a ring in the node over
// the whole buffer and one between nodes over each device's 1/node_size. PyTorch's ZeRO-1
// broadcasts every owner's share in turn: p(p-1)·α + n/β on the slowest link.
TEST(CostModel, ShardedCollectivesOnATopology) {
  const Topology t = topology_preset("nvlink+ib-ndr");
  const double n = 1e8;
  EXPECT_EQ(reduce_scatter_ms(n, 1, t), 0);
  EXPECT_NEAR(reduce_scatter_ms(n, 8, t), ring_reduce_scatter_ms(n, 8, t.intra), 1e-12);
  EXPECT_NEAR(all_gather_ms(n, 8, t), ring_all_gather_ms(n, 8, t.intra), 1e-12);
  EXPECT_NEAR(reduce_scatter_ms(n, 64, t),
              ring_reduce_scatter_ms(n, 8, t.intra) + ring_reduce_scatter_ms(n / 8, 8, *t.inter),
              1e-12);
  EXPECT_NEAR(sharded_broadcast_ms(n, 4, t),
              4 * 3 * t.intra.alpha_us / 1e3 + n / (t.intra.bandwidth_GBps * 1e6), 1e-12);
  EXPECT_NEAR(sharded_broadcast_ms(n, 16, t),
              16 * 15 * t.inter->alpha_us / 1e3 + n / (t.inter->bandwidth_GBps * 1e6), 1e-9);
  EXPECT_THROW(reduce_scatter_ms(n, 16, topology_preset("nvlink")), UsageError);
}

// Note [Links by collective]: a topology whose all-gather and reduce-scatter were fitted on
// their own prices each at its link within a node, and only there; the AllReduce keeps intra.
TEST(CostModel, AllGatherAndReduceScatterMoveAtTheirOwnLinksWhereFitted) {
  Topology t = topology_preset("nvlink+ib-ndr");
  t.all_gather = Link{5.0, 100.0};
  t.reduce_scatter = Link{20.0, 50.0};
  const double n = 1e8;
  EXPECT_NEAR(all_gather_ms(n, 8, t), ring_all_gather_ms(n, 8, *t.all_gather), 1e-12);
  EXPECT_NEAR(reduce_scatter_ms(n, 8, t), ring_reduce_scatter_ms(n, 8, *t.reduce_scatter), 1e-12);
  EXPECT_GT(reduce_scatter_ms(n, 8, t), all_gather_ms(n, 8, t));
  EXPECT_NEAR(
      reduce_scatter_ms(n, 64, t),
      ring_reduce_scatter_ms(n, 8, *t.reduce_scatter) + ring_reduce_scatter_ms(n / 8, 8, *t.inter),
      1e-12);
  EXPECT_NEAR(allreduce_ms(n, 8, t, AllReduceAlgo::Ring), ring_allreduce_ms(n, 8, t.intra), 1e-12);
  const Topology back = topology_from_json(t.to_json(), "t.json");
  ASSERT_TRUE(back.all_gather && back.reduce_scatter);
  EXPECT_DOUBLE_EQ(back.reduce_scatter->bandwidth_GBps, 50.0);
  EXPECT_DOUBLE_EQ(back.all_gather->alpha_us, 5.0);
  EXPECT_FALSE(topology_preset("nvlink").all_gather) << "a preset's link is the hardware's";
}

TEST(CostModel, HierarchicalAllReduceCrossesNodesWithItsShare) {
  Topology t = topology_preset("nvlink+ib-ndr");
  ASSERT_EQ(t.node_size, 8);
  ASSERT_TRUE(t.inter.has_value());
  const double n = 1e8;
  // One node: the flat best of ring and tree on NVLink.
  EXPECT_NEAR(allreduce_ms(n, 8, t),
              std::min(ring_allreduce_ms(n, 8, t.intra), tree_allreduce_ms(n, 8, t.intra)), 1e-12);
  // 64 devices = 8 nodes: reduce-scatter in the node, 1/8 of the bytes between nodes, gather.
  const double expected = ring_reduce_scatter_ms(n, 8, t.intra) +
                          ring_allreduce_ms(n / 8, 8, *t.inter) + ring_all_gather_ms(n, 8, t.intra);
  EXPECT_NEAR(allreduce_ms(n, 64, t, AllReduceAlgo::Ring), expected, 1e-12);
  // A single-node preset cannot hold more than its node.
  EXPECT_THROW(allreduce_ms(n, 16, topology_preset("nvlink")), UsageError);
}

// Note [One ring across nodes]: Gloo's one ring over every rank moves 2(p-1)/p of the bytes
// through a node's whole link; for 2 nodes of 2 that is 1.5x the hierarchical model's bytes.
TEST(CostModel, OneRingAcrossNodesRunsAtTheNodesWholeLink) {
  Topology t;
  t.name = "emulated";
  t.node_size = 2;
  t.intra = Link{1.0, 100.0};
  t.inter = Link{20.0, 0.5};  // per device: the node's link is 1 GB/s
  const double n = 1e8;
  const Link node_link{20.0, 1.0};
  EXPECT_DOUBLE_EQ(t.inter->bandwidth_GBps * t.node_size, node_link.bandwidth_GBps);
  const double hierarchical = allreduce_ms(n, 4, t, AllReduceAlgo::Ring);
  t.one_ring = true;
  EXPECT_NEAR(allreduce_ms(n, 4, t), ring_allreduce_ms(n, 4, node_link), 1e-12);
  EXPECT_NEAR(allreduce_ms(n, 4, t) / hierarchical, 1.5, 0.02);  // intra hops add a little
  // One node has no network hop: the ring is the node's own.
  Topology hierarchy = t;
  hierarchy.one_ring = false;
  EXPECT_NEAR(allreduce_ms(n, 2, t), allreduce_ms(n, 2, hierarchy), 1e-12);
  EXPECT_TRUE(topology_from_json(t.to_json(), "t.json").one_ring);
  // ZeRO's reduce-scatter and allgather over Gloo are one ring too: (p-1)/p of the bytes a hop.
  EXPECT_NEAR(reduce_scatter_ms(n, 4, t), ring_reduce_scatter_ms(n, 4, node_link), 1e-12);
  EXPECT_NEAR(all_gather_ms(n, 4, t), ring_reduce_scatter_ms(n, 4, node_link), 1e-12);
  EXPECT_NEAR(reduce_scatter_ms(n, 4, t) / reduce_scatter_ms(n, 4, hierarchy), 1.5, 0.02);
}

// Note [Inter-node link from a sweep]: a sweep across hosts, one rank each, gives the network
// between nodes; each of a node's K devices gets 1/K of it.
TEST(CommFit, AnInterNodeLinkIsFittedOnASweepAcrossHosts) {
  reports::CollectivesRecord sweep;
  sweep.config.world_size = 2;
  sweep.config.backend = "gloo";
  for (double n : {262144.0, 1048576.0, 4194304.0, 16777216.0}) {
    reports::CollectiveResult r;
    r.op = "allreduce";
    r.size_bytes = static_cast<int64_t>(n);
    r.time_us = 1e3 * ring_allreduce_ms(n, 2, Link{50.0, 0.025});  // 200 Mbit/s
    sweep.results.push_back(r);
    r.op = "allgather";  // other ops are not the AllReduce's points
    r.time_us = 1;
    sweep.results.push_back(r);
  }
  const Topology t = with_inter_link(topology_preset("pcie4"), sweep, "sweep.json", 4);
  EXPECT_EQ(t.node_size, 4);
  EXPECT_NEAR(t.inter->alpha_us, 50.0, 1e-6);
  EXPECT_NEAR(t.inter->bandwidth_GBps, 0.025 / 4, 1e-9);
  EXPECT_TRUE(t.one_ring);
  EXPECT_NE(t.source.find("sweep.json"), std::string::npos) << t.source;
  sweep.config.world_size = 1;
  EXPECT_THROW(with_inter_link(topology_preset("pcie4"), sweep, "one.json", 4), UsageError);
  sweep.config.world_size = 2;
  sweep.results.resize(2);  // one AllReduce size
  EXPECT_THROW(with_inter_link(topology_preset("pcie4"), sweep, "short.json", 4), UsageError);
}

// A hierarchical sweep (collectives --node-size) gives both links, each already a device's.
TEST(CommFit, AHierarchicalSweepGivesBothLinksOfATwoLevelTopology) {
  const auto level = [](const std::string& name, int64_t ranks, int64_t groups, const Link& l) {
    reports::CollectivesLevel out{name, ranks, groups, {}, {}};
    for (double n : {262144.0, 4194304.0, 16777216.0}) {
      reports::CollectiveResult r;
      r.op = "allreduce";
      r.size_bytes = static_cast<int64_t>(n);
      r.time_us = 1e3 * ring_allreduce_ms(n, static_cast<int>(ranks), l);
      out.results.push_back(r);
    }
    return out;
  };
  reports::CollectivesRecord sweep;
  sweep.config.world_size = 8;
  sweep.config.backend = "nccl";
  sweep.levels = {level("intra", 4, 2, Link{5.0, 100.0}), level("inter", 2, 4, Link{30.0, 6.25})};
  const Topology t = with_inter_link(topology_preset("pcie4"), sweep, "levels.json", 0);
  EXPECT_EQ(t.node_size, 4);
  EXPECT_NEAR(t.intra.alpha_us, 5.0, 1e-6);
  EXPECT_NEAR(t.intra.bandwidth_GBps, 100.0, 1e-6);
  EXPECT_NEAR(t.inter->alpha_us, 30.0, 1e-6);
  EXPECT_NEAR(t.inter->bandwidth_GBps, 6.25, 1e-6);  // not divided again: 4 rings shared it
  EXPECT_FALSE(t.one_ring);                          // NCCL's is the hierarchy
  EXPECT_THROW(with_inter_link(topology_preset("pcie4"), sweep, "levels.json", 8), UsageError);
  sweep.levels.reset();  // a flat sweep needs --node-size
  EXPECT_THROW(with_inter_link(topology_preset("pcie4"), sweep, "flat.json", 0), UsageError);
}

TEST(CostModel, PresetsAndTheirErrors) {
  for (const auto& name : topology_preset_names()) {
    const Topology t = topology_preset(name);
    EXPECT_GT(t.intra.bandwidth_GBps, 0) << name;
    EXPECT_FALSE(t.source.empty()) << name;
  }
  EXPECT_DOUBLE_EQ(topology_preset("nvlink").intra.bandwidth_GBps, 450);
  EXPECT_DOUBLE_EQ(topology_preset("ib-ndr").intra.bandwidth_GBps, 50);
  // One 25 GbE NIC per node, shared by its 8 devices.
  EXPECT_DOUBLE_EQ(topology_preset("pcie4+25gbe").inter->bandwidth_GBps, 3.125 / 8);
  EXPECT_THROW(topology_preset("infiniband"), UsageError);
  EXPECT_THROW(topology_preset("ib-ndr+nvlink"), UsageError);
}

TEST(CostModel, TopologyFileRoundTripsAndNamesMissingFields) {
  const Topology t = topology_preset("pcie5+roce-200");
  const Topology back = topology_from_json(t.to_json(), "t.json");
  EXPECT_EQ(back.node_size, 8);
  EXPECT_DOUBLE_EQ(back.inter->bandwidth_GBps, 25);
  nlohmann::json j = t.to_json();
  j["intra"].erase("bandwidth_GBps");
  try {
    topology_from_json(j, "t.json");
    FAIL() << "accepted a link without bandwidth";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("bandwidth_GBps"), std::string::npos) << e.what();
  }
  EXPECT_THROW(topology_from_json({{"name", "x"}, {"intra", j["inter"]}}, "t.json"), UsageError);
  EXPECT_THROW(topology_from_json(nlohmann::json::array(), "t.json"), UsageError);
}

// Note [Topology ranges] (issue 25, E1 and E6): values that wrapped or printed inf and nan.
TEST(CostModel, TopologyValuesOutsideWhatALinkCanHaveAreRefused) {
  const nlohmann::json base = topology_preset("pcie5+roce-200").to_json();
  auto expect_refused = [&](const nlohmann::json& j, const std::string& needle) {
    try {
      topology_from_json(j, "t.json");
      ADD_FAILURE() << "accepted " << j.dump();
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  for (const nlohmann::json size : {nlohmann::json(2147483648LL), nlohmann::json(4294967297LL),
                                    nlohmann::json(-1), nlohmann::json(0), nlohmann::json(8.5)}) {
    nlohmann::json j = base;
    j["node_size"] = size;
    expect_refused(j, "'node_size' must be an integer from 1 to 1048576, got " + size.dump());
  }
  nlohmann::json slow = base;
  slow["intra"]["bandwidth_GBps"] = 1e-320;
  expect_refused(slow, "t.json: intra: 'bandwidth_GBps' must be a number from 1e-06 to 1e+06");
  nlohmann::json far = base;
  far["inter"]["alpha_us"] = 1e308;
  expect_refused(far, "t.json: inter: 'alpha_us' must be a number from 0 to 1e+06");
  nlohmann::json slots = base;
  slots["compute_slots"] = 4294967297LL;
  expect_refused(slots, "'compute_slots' must be an integer from 0 to 4096");
  EXPECT_EQ(topology_from_json(base, "t.json").node_size, 8) << "the preset itself is in range";
}

TEST(CommFit, RecoversAlphaAndBetaFromExactTimings) {
  std::vector<FitPoint> ring, copies;
  for (int p : {2, 3}) {
    for (double n : {4096.0, 65536.0, 1048576.0, 16777216.0})
      ring.push_back({p, n, ring_allreduce_ms(n, p, kLink)});
  }
  for (double n : {4096.0, 1048576.0, 16777216.0}) copies.push_back({1, n, kLink.message_ms(n)});
  std::vector<FitPoint> scatters;
  for (int p : {2, 3})
    for (double n : {4096.0, 1048576.0, 16777216.0})
      scatters.push_back({p, n, ring_reduce_scatter_ms(n, p, kLink)});
  for (const Link& l :
       {fit_ring_allreduce(ring), fit_copy(copies), fit_ring_reduce_scatter(scatters)}) {
    EXPECT_NEAR(l.alpha_us, 10.0, 1e-6);
    EXPECT_NEAR(l.bandwidth_GBps, 10.0, 1e-6);
  }
  EXPECT_THROW(fit_copy({{1, 4096, 1.0}}), std::runtime_error);
}

TEST(BucketPipeline, HandBuiltTimelines) {
  // Backward ends at 10 ms. Bucket 0 ready at 2, 3 ms long: done at 5, hidden. Bucket 1 ready
  // at 4 waits for the stream until 5, runs to 9: hidden. Bucket 2 ready at 10 runs to 14:
  // 4 ms exposed.
  const std::vector<BucketTiming> b = {{2, 0}, {4, 0}, {10, 0}};
  PipelineResult r = simulate_bucket_pipeline(b, {3, 4, 4}, 10);
  EXPECT_DOUBLE_EQ(r.comm_ms, 11);
  EXPECT_DOUBLE_EQ(r.end_ms, 14);
  EXPECT_DOUBLE_EQ(r.exposed_ms, 4);
  // A long first collective delays everything behind it: 2 + 9 = 11, then 4 and 4 → 19.
  r = simulate_bucket_pipeline(b, {9, 4, 4}, 10);
  EXPECT_DOUBLE_EQ(r.end_ms, 19);
  EXPECT_DOUBLE_EQ(r.exposed_ms, 9);
  // Buckets launch in index order: bucket 1 ready early still waits for bucket 0's launch.
  r = simulate_bucket_pipeline({{6, 0}, {1, 0}}, {1, 1}, 10);
  EXPECT_DOUBLE_EQ(r.end_ms, 8);
  EXPECT_DOUBLE_EQ(r.exposed_ms, 0);
  // No communication at all.
  r = simulate_bucket_pipeline({{3, 0}}, {0}, 10);
  EXPECT_DOUBLE_EQ(r.exposed_ms, 0);
}

using testing::ddp_at;
using testing::dp_at;

ProjectionBasis basis() {
  return testing::toy_basis();
}

// pcie4's links with the measured devices' own compute (no device class: Note [Compute rate]),
// so the step is the measured phases plus the modelled communication.
Topology pcie4_links() {
  Topology t = topology_preset("pcie4");
  t.device.reset();
  return t;
}

TEST(Projection, DdpStepIsComputePlusExposedPipeline) {
  const ProjectionBasis b = basis();
  Topology t = pcie4_links();
  const DesignPoint one = ddp_at(b, t, 1, {});
  EXPECT_DOUBLE_EQ(one.step_ms, 13);
  EXPECT_DOUBLE_EQ(one.comm_ms, 0);
  EXPECT_DOUBLE_EQ(one.efficiency, 1);
  const DesignPoint four = ddp_at(b, t, 4, {});
  const double c = allreduce_ms(25e6, 4, t);
  const PipelineResult pipe = simulate_bucket_pipeline(
      std::get<AllReduceInputs>(b.designs[testing::kDdp].inputs).buckets, {c, c}, 8);
  EXPECT_DOUBLE_EQ(four.exposed_ms, pipe.exposed_ms);
  EXPECT_DOUBLE_EQ(four.step_ms, 13 + pipe.exposed_ms);
  EXPECT_DOUBLE_EQ(four.efficiency, 13 / four.step_ms);
  EXPECT_DOUBLE_EQ(four.busbw_GBps, allreduce_busbw_GBps(50e6, 4, 2 * c));
  // Twice the batch doubles compute and ready times, not the bytes; the last bucket, ready
  // when backward ends, stays exposed whatever the batch.
  const DesignPoint big = ddp_at(b, t, 4, {64, 0});
  EXPECT_DOUBLE_EQ(big.step_ms, 2 * 12 + 1 + c);  // the optimizer does not grow with the batch
  EXPECT_DOUBLE_EQ(big.exposed_ms, c);
  // Devices sharing 2 compute slots: 4 devices compute twice as slowly.
  t.compute_slots = 2;
  EXPECT_DOUBLE_EQ(ddp_at(b, t, 4, {}).step_ms - ddp_at(b, t, 4, {}).exposed_ms, 26);
  // And 1.25x slower again when the slots slow each other down (Note [Compute contention]).
  t.compute_contention = 1.25;
  EXPECT_DOUBLE_EQ(ddp_at(b, t, 4, {}).step_ms - ddp_at(b, t, 4, {}).exposed_ms,
                   12 * 2 * 1.25 + 1 * 2 * 1.25);
  EXPECT_DOUBLE_EQ(ddp_at(b, t, 1, {}).step_ms, 13) << "one device has the machine alone";
}

TEST(CostModel, ContentionGrowsWithTheBusySlots) {
  Topology t = topology_preset("pcie4");
  t.compute_slots = 5;
  t.compute_contention = 2;
  EXPECT_DOUBLE_EQ(t.contention(1), 1);
  EXPECT_DOUBLE_EQ(t.contention(3), 1.5);
  EXPECT_DOUBLE_EQ(t.contention(5), 2);
  EXPECT_DOUBLE_EQ(t.contention(50), 2);
  t.compute_slots = 0;
  EXPECT_DOUBLE_EQ(t.contention(8), 1) << "devices with their own compute do not contend";
}

TEST(Projection, DpTrafficGrowsWithDevicesAndStopsAtTheNode) {
  const ProjectionBasis b = basis();
  const Topology t = pcie4_links();
  const auto two = dp_at(b, t, 2, {});
  const auto eight = dp_at(b, t, 8, {});
  ASSERT_TRUE(two && eight);
  const double per_device = 32 * 1e3 + 50e6 + 2 * 32 * 40 + 50e6;
  EXPECT_NEAR(two->comm_ms, 5 * 0.005 + per_device / 31.5e6, 1e-9);
  EXPECT_NEAR(eight->comm_ms, 7 * two->comm_ms, 1e-9);
  EXPECT_FALSE(dp_at(b, t, 9, {}).has_value());
  const auto w = project_workload(b, t, {2, 8}, {}, {});
  EXPECT_EQ(w.points.size(), 4u);  // 1, 2, 4, 8
  const auto* ddp = reports::find_named(w.limits, "ddp");
  const auto* dp = reports::find_named(w.limits, "dp");
  ASSERT_TRUE(ddp && dp);
  EXPECT_TRUE(ddp->max_devices_at_90pct.has_value());
  EXPECT_FALSE(ddp->max_devices.has_value()) << "the AllReduce model runs across nodes";
  EXPECT_EQ(dp->max_devices, 8);
  EXPECT_FALSE(dp->max_devices_at_90pct.has_value());
}

// Note [Gradient models]: a design that does not overlap backward, its gradients meeting in an
// AllReduce, launches every bucket when backward ends, so all its communication is exposed.
TEST(Projection, AnAllReduceDesignThatDoesNotOverlapWaitsForAllItsCommunication) {
  ProjectionBasis b = basis();
  b.designs[testing::kDdp].design.overlaps_backward = false;
  const Topology t = pcie4_links();
  const DesignPoint four = ddp_at(b, t, 4, {});
  const double c = allreduce_ms(25e6, 4, t);
  EXPECT_DOUBLE_EQ(four.exposed_ms, 2 * c);
  EXPECT_DOUBLE_EQ(four.step_ms, 13 + 2 * c);
  EXPECT_DOUBLE_EQ(four.comm_ms, 2 * c);
  // Negative control: overlapping, the first bucket's AllReduce hides under backward.
  EXPECT_LT(ddp_at(basis(), t, 4, {}).exposed_ms, four.exposed_ms);
}
}  // namespace
}  // namespace ddpb::bench
