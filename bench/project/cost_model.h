// α–β cost models of collectives and the interconnect topologies they run on: the physics of
// `ddpbench project` (bench/project/projection.h). A link moves n bytes in α + n/β; the formulas
// and the preset numbers, with their sources, are in docs/metrics.md ("Projection").
//
// Every function is pure arithmetic on plain numbers, so the tests check them against the
// closed forms (tests/bench/project/test_cost_model.cpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/projection_record.h"

namespace ddpb::bench {

struct Link {
  double alpha_us = 0;        // per-message latency
  double bandwidth_GBps = 0;  // β, per direction, 1e9 bytes/s
  // The time to move `bytes` in one message: α + bytes/β, in ms.
  double message_ms(double bytes) const;
};

// The devices a topology's nodes hold (Note [Compute rate] in bench/project/compute_rate.h):
// a name in the datasheet table of bench/measure/mfu.h ("H100 SXM"), whose dense peak at the
// measured run's precision the projection looks up, or a peak given outright (a topology file's
// own device, with its source).
struct TopologyDevice {
  std::string name;
  std::optional<double> peak_flops_per_s;  // dense, per device; absent: the datasheet's
  std::optional<std::string> source;
};

// Note [Topology]
// A topology is nodes of `node_size` devices: the devices of a node talk over `intra`,
// nodes over `inter` (bandwidth per device: a node's NICs divided among its devices, as with
// one NIC per GPU). `copy` is the link a DataParallel device 0 copies over (a peer copy;
// when absent, `intra`), `reduce_add` the one its gradient sum runs at (when absent, `copy`).
// `compute_slots` > 0 says the devices share that many compute units (CPU cores, or logical ranks
// on fewer GPUs): N > slots devices run N/slots times slower; 0 means each device computes on its
// own. `comm_shares_compute` says collectives run on those same units (Gloo on CPU cores: its
// reductions and socket copies are CPU work), so once every unit is busy computing, communication
// cannot overlap it: both take turns. `device` is the device class computing on it; absent, the
// measured device itself computes (`measured`, or a file without one), at its measured times.
struct Topology {
  std::string name;
  std::string source;  // where the numbers come from
  int node_size = 1;
  Link intra;
  std::optional<Link> inter;
  std::optional<Link> copy;
  std::optional<Link> reduce_add;  // DP's reduce_add; when absent the copy link
  int compute_slots = 0;
  bool comm_shares_compute = false;
  // Note [One ring across nodes]: Gloo's allreduce is one ring over every rank (ranks in
  // order, so a node's devices are neighbours), and so are ddpbench's reduce-scatter and
  // allgather over Gloo (comm/process_group_gloo.cpp): the hops between nodes carry what every
  // hop does, 2(p-1)/p of the bytes for an AllReduce and (p-1)/p for the other two, each at
  // its node's whole network link (inter's per-device bandwidth times node_size). The hierarchical
  // model (reduce-scatter in the node, allreduce of 1/g across nodes, all-gather in the node) is
  // NCCL's and moves only 2(n-1)/n of the bytes through a node's link: for 2 nodes of 2 ranks, 1.5x
  // fewer than Gloo moves. True for a topology of Gloo ranks (the measured one on CPU, and any with
  // --inter fitted on Gloo).
  bool one_ring = false;
  // How much slower a device computes with every compute slot busy than alone (>= 1; Note
  // [Compute contention] in comm_fit.cpp); with k of the slots busy, 1 + (c-1)(k-1)/(slots-1).
  double compute_contention = 1;
  std::optional<TopologyDevice> device = std::nullopt;
  // Note [Links by collective]: the link a ring all-gather and a ring reduce-scatter move at
  // within a node, where each was fitted on its own (the measured topology: a backend's
  // all-gather and reduce-scatter need not cost what its AllReduce's halves do; Gloo's, run by
  // ddpbench's own ring, took 1.5-2x that here). Absent, `intra` prices them, as on the
  // presets, whose links are the hardware's.
  std::optional<Link> all_gather = std::nullopt, reduce_scatter = std::nullopt;
  const Link& all_gather_link() const { return all_gather ? *all_gather : intra; }
  const Link& reduce_scatter_link() const { return reduce_scatter ? *reduce_scatter : intra; }
  double contention(int busy_devices) const;

  int nodes(int devices) const;  // ceil(devices / node_size)
  const Link& copy_link() const { return copy ? *copy : intra; }
  const Link& reduce_add_link() const { return reduce_add ? *reduce_add : copy_link(); }
  // The most devices this topology can hold (node_size without an inter-node link).
  std::optional<int> max_devices() const;
  reports::TopologyInfo to_record() const;
  nlohmann::json to_json() const { return reports::record_to_json(to_record()); }
};

// The presets by name: pcie4 (8 A100 PCIe), pcie5 (8 H100 PCIe), nvlink (an 8-GPU H100/H200
// NVSwitch node), ib-ndr, roce-200, 25gbe (between nodes, one H100 SXM per node). "A+B" puts
// nodes of preset A, with A's devices, together over B's inter-node link ("nvlink+ib-ndr").
// Throws UsageError for an unknown name, listing the presets. `measured` is not a preset:
// bench/project/comm_fit.h fits it.
Topology topology_preset(const std::string& name);
std::vector<std::string> topology_preset_names();
// A topology from JSON (Topology::to_json's fields: name, node_size, intra{alpha_us,
// bandwidth_GBps}, optional inter, copy, compute_slots, source, device{name,
// peak_flops_per_s, source}). Throws UsageError naming the
// first missing or bad field; `what` names the source in the message.
Topology topology_from_json(const nlohmann::json& j, const std::string& what);

// Collectives of `bytes` over p ranks on one link (ms). p <= 1 costs nothing.
// Ring AllReduce (reduce-scatter then all-gather): 2(p-1)·α + 2(p-1)/p · n/β.
double ring_allreduce_ms(double bytes, int p, const Link& link);
// Double binary tree AllReduce (NCCL's tree; reduce up, broadcast down, pipelined so each
// direction moves n at full link rate): 2·ceil(log2 p)·α + 2·n/β.
double tree_allreduce_ms(double bytes, int p, const Link& link);
// Ring ReduceScatter and AllGather (n = the whole buffer): (p-1)·α + (p-1)/p · n/β.
double ring_reduce_scatter_ms(double bytes, int p, const Link& link);
double ring_all_gather_ms(double bytes, int p, const Link& link);

enum class AllReduceAlgo { Ring, Tree, Best };
// AllReduce over `devices` on `topo`. In one node: ring or tree on the intra link. Across
// nodes, hierarchical: reduce-scatter in the node, AllReduce of each device's 1/node_size
// share between nodes (on the inter link), all-gather in the node. Best: the faster of ring
// and tree at each level, as NCCL's tuner picks. Throws when the devices need an inter-node
// link the topology lacks.
double allreduce_ms(double bytes, int devices, const Topology& topo,
                    AllReduceAlgo algo = AllReduceAlgo::Best);

// ReduceScatter (ZeRO's gradients) and AllGather (its parameters) of a `bytes` buffer over
// `devices` on `topo`: a ring on the node's link for that collective (Note [Links by
// collective]) in one node; across nodes hierarchical, a ring
// in the node over the whole buffer, then one between nodes over each device's 1/node_size
// (the AllGather in the other order, at the same cost). Throws as allreduce_ms.
double reduce_scatter_ms(double bytes, int devices, const Topology& topo);
double all_gather_ms(double bytes, int devices, const Topology& topo);
// PyTorch's ZeroRedundancyOptimizer: every device broadcasts its 1/devices of `bytes` to the
// others, one owner after another, each a pipelined chain (p-1)·α + share/β on the slowest
// link the devices span: p(p-1)·α + bytes/β in all.
double sharded_broadcast_ms(double bytes, int devices, const Topology& topo);

// nccl-tests' bus bandwidth of an AllReduce that took `ms`: algbw · 2(p-1)/p.
double allreduce_busbw_GBps(double bytes, int p, double ms);

}  // namespace ddpb::bench
