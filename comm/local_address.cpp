#include "comm/local_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <optional>

#include "core/check.h"

namespace ddpb::comm {
namespace {

std::string dotted(const in_addr& a) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a, text, sizeof(text));
  return text;
}

std::optional<in_addr> resolve_ipv4(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
    return std::nullopt;
  }
  const in_addr a = reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr;
  ::freeaddrinfo(found);
  return a;
}

std::string interface_list() {
  std::string out;
  for (const InterfaceAddress& i : interface_addresses()) {
    out += (out.empty() ? "" : ", ") + i.name + " (" + i.address + ")";
  }
  return out.empty() ? "none with an IPv4 address" : out;
}

std::optional<LocalAddress> from_interface_variable() {
  for (const char* var : {"DDPBENCH_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}) {
    const char* value = std::getenv(var);
    if (value == nullptr || *value == '\0') continue;
    std::string name(value);
    std::string why = std::string(var) + "=" + value;
    if (const size_t comma = name.find(','); comma != std::string::npos) {
      name.resize(comma);
      why += " (ddpbench binds to one interface: the first)";
    }
    for (const InterfaceAddress& i : interface_addresses()) {
      if (i.name == name) return LocalAddress{i.address, why};
    }
    throw UsageError(std::string(var) + "='" + value + "': this host has no interface '" + name +
                     "' with an IPv4 address; it has " + interface_list());
  }
  return std::nullopt;
}

// The source address the kernel would use towards `peer` (Note [Choosing this host's address]).
std::optional<std::string> route_source(const in_addr& peer) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(9);  // any port: a UDP connect only looks up the route
  to.sin_addr = peer;
  sockaddr_in from{};
  socklen_t len = sizeof(from);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&from), &len) == 0;
  ::close(fd);
  if (!ok || from.sin_addr.s_addr == htonl(INADDR_ANY)) return std::nullopt;
  return dotted(from.sin_addr);
}

bool is_local(const std::string& address) {
  for (const InterfaceAddress& i : interface_addresses()) {
    if (i.address == address) return true;
  }
  return false;
}

}  // namespace

std::vector<InterfaceAddress> interface_addresses() {
  std::vector<InterfaceAddress> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0) continue;
    out.push_back(
        {i->ifa_name, dotted(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr)});
  }
  ::freeifaddrs(list);
  return out;
}

std::optional<std::string> ipv4_of(const std::string& host) {
  const auto a = resolve_ipv4(host);
  return a ? std::optional(dotted(*a)) : std::nullopt;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

LocalAddress choose_local_address(const std::string& master_addr, bool spans_hosts) {
  if (auto chosen = from_interface_variable()) return *chosen;
  if (const auto peer = resolve_ipv4(master_addr)) {
    const auto source = route_source(*peer);
    // Loopback reaches no other host: across hosts (file:// with MASTER_ADDR unset) ask the
    // hostname instead.
    if (source && !(spans_hosts && source->starts_with("127."))) {
      return {*source, "the route to MASTER_ADDR " + master_addr};
    }
  }
  const std::string name = host_name();
  if (const auto own = name.empty() ? std::nullopt : resolve_ipv4(name)) {
    if (is_local(dotted(*own))) return {dotted(*own), "the hostname " + name};
  }
  return {"127.0.0.1", "loopback: neither the route to MASTER_ADDR " + master_addr +
                           " nor the hostname '" + name + "' gave another address of this host"};
}

}  // namespace ddpb::comm
