#include "comm/peer_probe.h"

#include "comm/flight_recorder.h"
#include "comm/local_address.h"
#include "comm/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace ddpb::comm {
namespace {

constexpr const char* kHostKey = "ddpbench/host/";
constexpr const char* kFlightKey = "ddpbench/flight/";

struct Registered {
  std::weak_ptr<Store> weak_store;  // never kept alive past the run by this registry
  std::shared_ptr<Store> store;     // probe_hosts' own reference while it runs
  RankEnv env;
  std::string host, address;
  bool tcp_store = false;  // other hosts ship dumps only through a TCPStore
};

std::mutex g_mutex;
Registered g_registered;
std::vector<std::string> g_silent;  // the addresses probe_hosts found silent: nothing to await

struct PeerHost {
  std::string name;
  std::vector<int> ranks;
};

// Address -> host, from every rank's key. Throws StoreTimeout when the store does not answer,
// another error when it refuses (rank 0's process is gone, its host is not).
std::map<std::string, PeerHost> read_hosts(const Registered& r) {
  std::map<std::string, PeerHost> hosts;
  for (int rank = 0; rank < r.env.world_size; ++rank) {
    const std::string text = r.store->get_string(kHostKey + std::to_string(rank));
    const size_t space = text.rfind(' ');
    if (space == std::string::npos || space + 1 == text.size()) continue;
    PeerHost& h = hosts[text.substr(space + 1)];
    h.name = text.substr(0, space);
    h.ranks.push_back(rank);
  }
  return hosts;
}

// Starts a non-blocking connect to address:port. Returns the socket to wait on, or -1 when
// there is nothing to wait for: `*answered` then says whether the host refused at once (an
// answer) or the connect failed for another reason (no route, a firewall: none).
int start_knock(const std::string& address, int port, bool* answered) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, address.c_str(), &to.sin_addr) != 1) return -1;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0 || errno != EINPROGRESS) {
    *answered = errno == ECONNREFUSED || errno == 0;
    ::close(fd);
    return -1;
  }
  return fd;
}

// The addresses among `addresses` that neither accept nor refuse a connection in `budget`.
std::vector<std::string> silent(const std::vector<std::string>& addresses, int port,
                                std::chrono::milliseconds budget) {
  std::vector<pollfd> fds;
  std::vector<bool> answered(addresses.size(), false);
  size_t pending = 0;
  for (size_t i = 0; i < addresses.size(); ++i) {
    bool now = false;
    errno = 0;
    fds.push_back({start_knock(addresses[i], port, &now), POLLOUT, 0});
    answered[i] = now;
    pending += fds.back().fd >= 0;
  }
  const auto until = std::chrono::steady_clock::now() + budget;
  while (pending > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fds[i].fd, SOL_SOCKET, SO_ERROR, &err, &len);
      answered[i] = err == 0 || err == ECONNREFUSED;
      ::close(fds[i].fd);
      fds[i].fd = -1;
      --pending;
    }
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].fd >= 0) ::close(fds[i].fd);
    if (!answered[i]) out.push_back(addresses[i]);
  }
  return out;
}

// Whether `host` (MASTER_ADDR) names this host: loopback, or one of its interfaces' addresses.
bool on_this_host(const std::string& host) {
  const auto address = ipv4_of(host);
  if (!address || address->starts_with("127.")) return true;  // unresolvable: nothing to ship to
  for (const InterfaceAddress& i : interface_addresses()) {
    if (i.address == *address) return true;
  }
  return false;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

}  // namespace

void register_host(std::shared_ptr<Store> store, const RankEnv& env, const std::string& host,
                   const std::string& address, const std::string& job_identity, bool tcp_store) {
  store->set_string(kHostKey + std::to_string(env.rank), host + " " + address);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_registered = {store, nullptr, env, host, address, tcp_store};
  }
  if (!tcp_store) return;
  if (env.rank == 0) {
    // Stopped by its launcher (another rank of node 0 failed first), rank 0 still keeps the
    // store up for the other hosts' dumps, within the launcher's grace. Once a process.
    static std::once_flag hooked;
    std::call_once(hooked, [] {
      add_termination_hook([] { collect_flight_dumps(std::chrono::milliseconds(2000)); });
    });
    return;
  }
  // Note [Flight dumps across hosts]: only a rank whose dumps node 0 cannot read ships them:
  // one on a host where rank 0's store address is not local.
  if (on_this_host(env.master_addr)) return;
  set_flight_dump_shipper([rank = env.rank, job_identity](int, const std::string& dump) {
    try {
      // A connection of its own, briefly: the run's store may be gone, or busy in the failing
      // thread, and a rank whose rank 0 is gone must not wait long to exit.
      auto client = make_store_from_env(rank, std::chrono::milliseconds(500), job_identity);
      client->set_string(kFlightKey + std::to_string(rank), dump);
    } catch (const std::exception&) {
      // Rank 0's store is gone or out of reach: node 0 says this rank left no dump.
    }
  });
}

int collect_flight_dumps(std::chrono::milliseconds budget) {
  Registered r;
  std::vector<std::string> quiet;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    r = g_registered;
    quiet = g_silent;
  }
  r.store = r.weak_store.lock();
  if (!r.store || !r.tcp_store || r.env.rank != 0 || r.env.world_size < 2 ||
      flight_dump_dir().empty()) {
    return 0;
  }
  int written = 0;
  const auto timeout = r.store->timeout();
  r.store->set_timeout(budget);  // a rank that never registered costs the budget, not --timeout
  try {
    std::vector<int> remote;
    for (const auto& [address, h] : read_hosts(r)) {
      const bool answers = std::find(quiet.begin(), quiet.end(), address) == quiet.end();
      if (address != r.address && answers) {
        remote.insert(remote.end(), h.ranks.begin(), h.ranks.end());
      }
    }
    const auto until = std::chrono::steady_clock::now() + budget;
    std::vector<bool> done(remote.size(), false);
    for (size_t left = remote.size(); left > 0;) {
      for (size_t i = 0; i < remote.size(); ++i) {
        const std::string key = kFlightKey + std::to_string(remote[i]);
        if (done[i] || !r.store->check({key})) continue;
        written += !write_flight_dump(remote[i], r.store->get_string(key)).empty();
        done[i] = true;
        --left;
      }
      if (left == 0 || std::chrono::steady_clock::now() >= until) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (const std::exception&) {
  }
  r.store->set_timeout(timeout);
  return written;
}

std::string probe_hosts(std::chrono::milliseconds budget) {
  Registered r;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    r = g_registered;
  }
  r.store = r.weak_store.lock();
  if (!r.store || r.env.world_size < 2 || r.address.empty()) return "";
  const auto timeout = r.store->timeout();
  r.store->set_timeout(budget);
  std::map<std::string, PeerHost> hosts;
  bool store_failed = false;
  try {
    hosts = read_hosts(r);
  } catch (const std::exception&) {
    store_failed = true;
  }
  r.store->set_timeout(timeout);
  if (store_failed) {
    // Which of the two: knock on rank 0's host itself.
    const std::string store =
        "; the store on " + r.env.master_addr + ":" + std::to_string(r.env.master_port);
    const auto master = ipv4_of(r.env.master_addr);
    if (master && !silent({*master}, r.env.master_port, budget).empty()) {
      return store + " does not answer from host " + r.host +
             " either: this host seems cut off from rank 0's";
    }
    return store + " no longer serves: rank 0's process is gone";
  }
  std::vector<std::string> others;
  for (const auto& [address, h] : hosts) {
    if (address != r.address) others.push_back(address);
  }
  std::string out;
  const std::vector<std::string> quiet = silent(others, r.env.master_port, budget);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_silent = quiet;
  }
  for (const std::string& address : quiet) {
    const PeerHost& h = hosts.at(address);
    out += "; host " + h.name + " (" + address + ": " + rank_list(h.ranks) +
           ") does not answer a connection from host " + r.host + " within " +
           std::to_string(budget.count()) + " ms: its link may be down, or the host gone";
  }
  return out;
}

}  // namespace ddpb::comm
