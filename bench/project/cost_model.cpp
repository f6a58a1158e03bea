#include "bench/project/cost_model.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace ddpb::bench {
namespace {

struct Preset {
  const char* name;
  const char* source;
  int node_size;      // devices per node; 1 for an inter-node preset used alone
  bool inter;         // a link between nodes (else within a node)
  bool nic_per_node;  // inter only: one NIC for the whole node (else one per device)
  Link link;
  const char* device;  // its GPUs, a name in bench/measure/mfu.h's datasheet table
};

// Note [Topology presets]
// Bandwidths are the links' signalling rates per direction after line coding; latencies are
// typical per-message software + wire latencies of NCCL's transports. Sources in
// docs/metrics.md ("Projection"). They are upper bounds: a measured run reaches 70-90% of
// them, which is why `measured` exists. Each names the GPU it is built for (Note [Compute
// rate]): PCIe 4 servers with A100 PCIe, PCIe 5 with H100 PCIe, NVSwitch nodes and the networks
// alone (one GPU per node, as in a DGX H100's one NIC per GPU) with H100 SXM.
const Preset kPresets[] = {
    {"pcie4",
     "PCIe 4.0 x16: 16 GT/s x 16 lanes, 128b/130b = 31.5 GB/s per direction",
     8,
     false,
     false,
     {5.0, 31.5},
     "A100 PCIe"},
    {"pcie5",
     "PCIe 5.0 x16: 32 GT/s x 16 lanes, 128b/130b = 63 GB/s per direction",
     8,
     false,
     false,
     {5.0, 63.0},
     "H100 PCIe"},
    {"nvlink",
     "H100/H200 SXM NVLink 4 through NVSwitch: 900 GB/s per GPU, 450 per direction",
     8,
     false,
     false,
     {3.0, 450.0},
     "H100 SXM"},
    {"ib-ndr",
     "InfiniBand NDR 400 Gb/s = 50 GB/s per direction, one NIC per GPU (DGX H100)",
     1,
     true,
     false,
     {5.0, 50.0},
     "H100 SXM"},
    {"roce-200",
     "RoCE 200 Gb/s = 25 GB/s per direction, one NIC per GPU",
     1,
     true,
     false,
     {8.0, 25.0},
     "H100 SXM"},
    {"25gbe",
     "25 Gb Ethernet (TCP) = 3.125 GB/s per direction, one NIC per node",
     1,
     true,
     true,
     {30.0, 3.125},
     "H100 SXM"},
};

const Preset* find_preset(const std::string& name) {
  for (const Preset& p : kPresets) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

const Preset& preset_or_throw(const std::string& name) {
  const Preset* p = find_preset(name);
  if (p) return *p;
  std::string names;
  for (const auto& n : topology_preset_names()) names += (names.empty() ? "" : ", ") + n;
  throw UsageError("unknown topology preset '" + name + "' (presets: " + names +
                   ", A+B such as nvlink+ib-ndr, measured, or a JSON file)");
}

int ceil_log2(int p) {
  int k = 0;
  while ((1 << k) < p) ++k;
  return k;
}

// Note [Topology ranges]: every value of a topology file is read strictly and checked against
// what a real link or machine can have (issue 25, E1 and E6): an integer that would wrap in an
// int (node_size 2147483648, or 4294967297 read as 1) and a bandwidth of 1e-320 or an alpha of
// 1e308, which printed inf and nan, are usage errors naming the key and its range.
constexpr int64_t kMaxNodeSize = int64_t{1} << 20;
constexpr int64_t kMaxComputeSlots = 4096;
constexpr double kMaxAlphaUs = 1e6;                                  // a second per message
constexpr double kMinBandwidthGBps = 1e-6, kMaxBandwidthGBps = 1e6;  // 1 kB/s to 1 PB/s
constexpr double kMaxContention = 1e3;

double ranged_number(const nlohmann::json& j, const char* key, double lo, double hi,
                     const std::string& where) {
  if (!j.contains(key) || !j[key].is_number())
    throw UsageError(where + ": missing number '" + key + "'");
  const double v = j[key].get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) {
    throw UsageError(fmt::format("{}: '{}' must be a number from {:g} to {:g}, got {:g}", where,
                                 key, lo, hi, v));
  }
  return v;
}

int ranged_int(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi,
               const std::string& where) {
  const auto& v = j.at(key);
  bool ok = false;
  if (v.is_number_unsigned()) {  // nlohmann reads every non-negative integer as unsigned
    ok = v.get<uint64_t>() <= static_cast<uint64_t>(hi) &&
         static_cast<int64_t>(v.get<uint64_t>()) >= lo;
  } else if (v.is_number_integer()) {
    ok = v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
  }
  if (!ok) {
    throw UsageError(fmt::format("{}: '{}' must be an integer from {} to {}, got {}", where, key,
                                 lo, hi, v.dump()));
  }
  return static_cast<int>(v.get<int64_t>());
}

Link link_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw UsageError(where + " must be an object {alpha_us, bandwidth_GBps}");
  return {ranged_number(j, "alpha_us", 0, kMaxAlphaUs, where),
          ranged_number(j, "bandwidth_GBps", kMinBandwidthGBps, kMaxBandwidthGBps, where)};
}

reports::LinkInfo link_record(const Link& l) {
  return {l.alpha_us, l.bandwidth_GBps};
}

std::optional<reports::LinkInfo> link_record(const std::optional<Link>& l) {
  if (!l) return std::nullopt;
  return link_record(*l);
}

constexpr double kMinPeakFlops = 1, kMaxPeakFlops = 1e20;

TopologyDevice device_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string())
    throw UsageError(where + " must be an object {name, peak_flops_per_s, source}");
  TopologyDevice d{j["name"].get<std::string>(), std::nullopt, std::nullopt};
  if (j.contains("peak_flops_per_s"))
    d.peak_flops_per_s = ranged_number(j, "peak_flops_per_s", kMinPeakFlops, kMaxPeakFlops, where);
  if (j.contains("source")) {
    if (!j["source"].is_string()) throw UsageError(where + ": 'source' must be a string");
    d.source = j["source"].get<std::string>();
  }
  return d;
}

}  // namespace

double Link::message_ms(double bytes) const {
  return alpha_us / 1e3 + bytes / (bandwidth_GBps * 1e6);
}

int Topology::nodes(int devices) const {
  return (devices + node_size - 1) / std::max(1, node_size);
}

double Topology::contention(int busy_devices) const {
  if (compute_slots < 2 || busy_devices < 2) return 1;
  const int k = std::min(busy_devices, compute_slots);
  return 1 + (compute_contention - 1) * (k - 1) / (compute_slots - 1);
}

std::optional<int> Topology::max_devices() const {
  if (inter) return std::nullopt;
  return node_size;
}

reports::TopologyInfo Topology::to_record() const {
  return {name,
          source,
          node_size,
          link_record(intra),
          link_record(inter),
          link_record(copy),
          link_record(reduce_add),
          compute_slots,
          comm_shares_compute,
          compute_contention,
          one_ring ? std::optional(true) : std::nullopt,
          device ? std::optional(reports::TopologyDeviceInfo{device->name, device->peak_flops_per_s,
                                                             device->source})
                 : std::nullopt,
          link_record(all_gather),
          link_record(reduce_scatter)};
}

std::vector<std::string> topology_preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  return names;
}

Topology topology_preset(const std::string& name) {
  const size_t plus = name.find('+');
  if (plus != std::string::npos) {
    const Preset& node = preset_or_throw(name.substr(0, plus));
    const Preset& net = preset_or_throw(name.substr(plus + 1));
    if (node.inter || !net.inter)
      throw UsageError("topology '" + name + "': write NODE+NETWORK, such as nvlink+ib-ndr");
    Topology t{name,           std::string(node.source) + "; " + net.source,
               node.node_size, node.link,
               net.link,       std::nullopt,
               std::nullopt,   0,
               false};
    t.device = TopologyDevice{node.device, std::nullopt, std::nullopt};
    if (net.nic_per_node) t.inter->bandwidth_GBps /= node.node_size;
    return t;
  }
  const Preset& p = preset_or_throw(name);
  Topology t{name,         p.source,     p.node_size, p.link, std::nullopt,
             std::nullopt, std::nullopt, 0,           false};
  if (p.inter) t.inter = p.link;  // one device per node: every device is on the network
  t.device = TopologyDevice{p.device, std::nullopt, std::nullopt};
  return t;
}

Topology topology_from_json(const nlohmann::json& j, const std::string& what) {
  if (!j.is_object()) throw UsageError(what + ": a topology must be a JSON object");
  Topology t;
  if (!j.contains("name") || !j["name"].is_string())
    throw UsageError(what + ": missing string 'name'");
  t.name = j["name"].get<std::string>();
  t.source = j.value("source", what);
  if (!j.contains("node_size")) throw UsageError(what + ": missing integer 'node_size'");
  t.node_size = ranged_int(j, "node_size", 1, kMaxNodeSize, what);
  if (!j.contains("intra")) throw UsageError(what + ": missing object 'intra'");
  t.intra = link_from_json(j["intra"], what + ": intra");
  if (j.contains("inter")) t.inter = link_from_json(j["inter"], what + ": inter");
  if (j.contains("copy")) t.copy = link_from_json(j["copy"], what + ": copy");
  if (j.contains("reduce_add"))
    t.reduce_add = link_from_json(j["reduce_add"], what + ": reduce_add");
  if (j.contains("all_gather"))
    t.all_gather = link_from_json(j["all_gather"], what + ": all_gather");
  if (j.contains("reduce_scatter"))
    t.reduce_scatter = link_from_json(j["reduce_scatter"], what + ": reduce_scatter");
  if (j.contains("compute_slots")) {
    t.compute_slots = ranged_int(j, "compute_slots", 0, kMaxComputeSlots, what);
  }
  if (j.contains("compute_contention")) {
    t.compute_contention = ranged_number(j, "compute_contention", 1, kMaxContention, what);
  }
  if (j.contains("one_ring")) {
    if (!j["one_ring"].is_boolean()) throw UsageError(what + ": 'one_ring' must be true or false");
    t.one_ring = j["one_ring"].get<bool>();
  }
  if (j.contains("comm_shares_compute")) {
    if (!j["comm_shares_compute"].is_boolean())
      throw UsageError(what + ": 'comm_shares_compute' must be true or false");
    t.comm_shares_compute = j["comm_shares_compute"].get<bool>();
  }
  if (j.contains("device")) t.device = device_from_json(j["device"], what + ": device");
  return t;
}

double ring_allreduce_ms(double bytes, int p, const Link& link) {
  if (p <= 1) return 0;
  return 2.0 * (p - 1) * link.alpha_us / 1e3 +
         2.0 * (p - 1) / p * bytes / (link.bandwidth_GBps * 1e6);
}

double tree_allreduce_ms(double bytes, int p, const Link& link) {
  if (p <= 1) return 0;
  return 2.0 * ceil_log2(p) * link.alpha_us / 1e3 + 2.0 * bytes / (link.bandwidth_GBps * 1e6);
}

double ring_reduce_scatter_ms(double bytes, int p, const Link& link) {
  if (p <= 1) return 0;
  return (p - 1) * link.alpha_us / 1e3 +
         static_cast<double>(p - 1) / p * bytes / (link.bandwidth_GBps * 1e6);
}

double ring_all_gather_ms(double bytes, int p, const Link& link) {
  return ring_reduce_scatter_ms(bytes, p, link);
}

namespace {

// Note [One ring across nodes]: every hop waits for the slowest, a node's whole link.
Link one_ring_link(const Topology& topo, int g, const Link& in_node) {
  return Link{std::max(in_node.alpha_us, topo.inter->alpha_us),
              std::min(in_node.bandwidth_GBps, topo.inter->bandwidth_GBps * g)};
}

double flat_allreduce_ms(double bytes, int p, const Link& link, AllReduceAlgo algo) {
  switch (algo) {
    case AllReduceAlgo::Ring:
      return ring_allreduce_ms(bytes, p, link);
    case AllReduceAlgo::Tree:
      return tree_allreduce_ms(bytes, p, link);
    case AllReduceAlgo::Best:
      break;
  }
  return std::min(ring_allreduce_ms(bytes, p, link), tree_allreduce_ms(bytes, p, link));
}

}  // namespace

double allreduce_ms(double bytes, int devices, const Topology& topo, AllReduceAlgo algo) {
  if (devices <= 1) return 0;
  const int nodes = topo.nodes(devices);
  if (nodes == 1) return flat_allreduce_ms(bytes, devices, topo.intra, algo);
  if (!topo.inter)
    throw UsageError(fmt::format("topology {} holds {} devices; {} need an inter-node link",
                                 topo.name, topo.node_size, devices));
  const int g = std::min(devices, topo.node_size);
  if (topo.one_ring) return ring_allreduce_ms(bytes, devices, one_ring_link(topo, g, topo.intra));
  return ring_reduce_scatter_ms(bytes, g, topo.intra) +
         flat_allreduce_ms(bytes / g, nodes, *topo.inter, algo) +
         ring_all_gather_ms(bytes, g, topo.intra);
}

namespace {

// The nodes `devices` span, refusing a topology without the inter-node link they need.
int nodes_for(int devices, const Topology& topo) {
  const int nodes = topo.nodes(devices);
  if (nodes > 1 && !topo.inter)
    throw UsageError(fmt::format("topology {} holds {} devices; {} need an inter-node link",
                                 topo.name, topo.node_size, devices));
  return nodes;
}

// A ring reduce-scatter or all-gather (the same steps, the other way round) whose hops within
// a node move at `in_node`.
double scatter_or_gather_ms(double bytes, int devices, const Topology& topo, const Link& in_node) {
  if (devices <= 1) return 0;
  const int nodes = nodes_for(devices, topo);
  if (nodes == 1) return ring_reduce_scatter_ms(bytes, devices, in_node);
  const int g = std::min(devices, topo.node_size);
  if (topo.one_ring) return ring_reduce_scatter_ms(bytes, devices, one_ring_link(topo, g, in_node));
  return ring_reduce_scatter_ms(bytes, g, in_node) +
         ring_reduce_scatter_ms(bytes / g, nodes, *topo.inter);
}

}  // namespace

double reduce_scatter_ms(double bytes, int devices, const Topology& topo) {
  return scatter_or_gather_ms(bytes, devices, topo, topo.reduce_scatter_link());
}

double all_gather_ms(double bytes, int devices, const Topology& topo) {
  return scatter_or_gather_ms(bytes, devices, topo, topo.all_gather_link());
}

double sharded_broadcast_ms(double bytes, int devices, const Topology& topo) {
  if (devices <= 1) return 0;
  const Link& link = nodes_for(devices, topo) > 1 ? *topo.inter : topo.intra;
  return devices *
         ((devices - 1) * link.alpha_us / 1e3 + bytes / devices / (link.bandwidth_GBps * 1e6));
}

double allreduce_busbw_GBps(double bytes, int p, double ms) {
  if (ms <= 0 || p <= 1) return 0;
  return bytes / (ms * 1e6) * 2.0 * (p - 1) / p;
}

}  // namespace ddpb::bench
