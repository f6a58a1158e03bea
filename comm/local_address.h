// Which of this host's addresses a rank's own sockets bind to (Gloo's TCP device), chosen as
// PyTorch's Gloo backend does, with a route lookup in between.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ddpb::comm {

// Note [Choosing this host's address]
// Gloo's TCP device listens on one local address and tells its peers, through the store, to
// connect there. So the address must be this host's own and reachable from every other host.
// MASTER_ADDR is neither, except on rank 0's host (issue 45: the second host failed with
// "bind(2) ... Cannot assign requested address"). In order:
//  1. DDPBENCH_SOCKET_IFNAME, then GLOO_SOCKET_IFNAME (PyTorch's variable): that interface's
//     IPv4 address. A name that no interface has, or one without an IPv4 address, is a usage
//     error naming the interfaces there are. PyTorch accepts a comma list and opens a device
//     on each; ddpbench binds to one, the first, and says so.
//  2. The address this host would send from to reach MASTER_ADDR: a connected UDP socket
//     sends nothing, yet the kernel picks its source address by the routing table. On rank 0's
//     host, and on one host, that is MASTER_ADDR itself or loopback. Loopback is passed over
//     when the job is known to span hosts (file:// across hosts, MASTER_ADDR unset).
//  3. The hostname, when it resolves to an address of this host.
//  4. Loopback: one host only.
// Only Gloo binds to the choice; NCCL and MPI choose their own interfaces (NCCL_SOCKET_IFNAME,
// Open MPI's btl_tcp_if_include), and the choice there only names this host's address for
// Note [Unreachable hosts].
struct LocalAddress {
  std::string address;  // dotted IPv4
  std::string why;      // how it was chosen, for --verbose and the record
};

// Throws UsageError for an interface variable naming a missing interface. `spans_hosts`: the
// job's ranks are known to live on more than one host.
LocalAddress choose_local_address(const std::string& master_addr, bool spans_hosts = false);

// This host's interfaces with an IPv4 address: "name address" pairs, loopback included.
struct InterfaceAddress {
  std::string name;
  std::string address;
};
std::vector<InterfaceAddress> interface_addresses();

// `host` (a name or a dotted address) as a dotted IPv4 address, or nullopt.
std::optional<std::string> ipv4_of(const std::string& host);

// The host's name (gethostname), or "" when it has none.
std::string host_name();

}  // namespace ddpb::comm
