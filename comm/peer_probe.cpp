#include "comm/peer_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

namespace ddpb::comm {
namespace {

constexpr const char* kHostKey = "ddpbench/host/";

struct Registered {
  std::weak_ptr<Store> weak_store;  // never kept alive past the run by this registry
  std::shared_ptr<Store> store;     // probe_hosts' own reference while it runs
  RankEnv env;
  std::string host, address;
};

std::mutex g_mutex;
Registered g_registered;

struct PeerHost {
  std::string name;
  std::vector<int> ranks;
};

// Address -> host, from every rank's key; nullopt when the store does not answer.
std::optional<std::map<std::string, PeerHost>> read_hosts(const Registered& r) {
  std::map<std::string, PeerHost> hosts;
  try {
    for (int rank = 0; rank < r.env.world_size; ++rank) {
      const std::string text = r.store->get_string(kHostKey + std::to_string(rank));
      const size_t space = text.rfind(' ');
      if (space == std::string::npos) continue;
      PeerHost& h = hosts[text.substr(space + 1)];
      h.name = text.substr(0, space);
      h.ranks.push_back(rank);
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return hosts;
}

// Starts a non-blocking connect to address:port; -1 when it failed at once for a reason
// other than being refused (a refusal is an answer).
int start_knock(const std::string& address, int port, bool* answered) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, address.c_str(), &to.sin_addr) != 1) return -1;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0 || errno == ECONNREFUSED) {
    *answered = true;
  }
  return fd;
}

// The addresses among `addresses` that neither accept nor refuse a connection in `budget`.
std::vector<std::string> silent(const std::vector<std::string>& addresses, int port,
                                std::chrono::milliseconds budget) {
  std::vector<pollfd> fds;
  std::vector<bool> answered(addresses.size(), false);
  for (size_t i = 0; i < addresses.size(); ++i) {
    bool now = false;
    fds.push_back({start_knock(addresses[i], port, &now), POLLOUT, 0});
    answered[i] = now;
  }
  const auto until = std::chrono::steady_clock::now() + budget;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0 || ::poll(fds.data(), fds.size(), static_cast<int>(left.count())) <= 0)
      break;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fds[i].fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == 0 || err == ECONNREFUSED) answered[i] = true;
      ::close(fds[i].fd);
      fds[i].fd = -1;
    }
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].fd >= 0) ::close(fds[i].fd);
    if (!answered[i]) out.push_back(addresses[i]);
  }
  return out;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

}  // namespace

void register_host(std::shared_ptr<Store> store, const RankEnv& env, const std::string& host,
                   const std::string& address) {
  store->set_string(kHostKey + std::to_string(env.rank), host + " " + address);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_registered = {store, nullptr, env, host, address};
}

std::string probe_hosts(std::chrono::milliseconds budget) {
  Registered r;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    r = g_registered;
  }
  r.store = r.weak_store.lock();
  if (!r.store || r.env.world_size < 2) return "";
  r.store->set_timeout(budget);  // the run is failing: no other use of the store waits on it
  const auto hosts = read_hosts(r);
  if (!hosts) {
    return "; the store on " + r.env.master_addr + ":" + std::to_string(r.env.master_port) +
           " does not answer from host " + r.host + " either: this host is cut off from rank 0's";
  }
  std::vector<std::string> others;
  for (const auto& [address, h] : *hosts) {
    if (address != r.address) others.push_back(address);
  }
  std::string out;
  for (const std::string& address : silent(others, r.env.master_port, budget)) {
    const PeerHost& h = hosts->at(address);
    out += "; host " + h.name + " (" + address + ": " + rank_list(h.ranks) +
           ") does not answer from host " + r.host + ": its link is down or it is gone";
  }
  return out;
}

}  // namespace ddpb::comm
