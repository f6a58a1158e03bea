#include "comm/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/core.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>

#include "base/subprocess.h"
#include "comm/flight_recorder.h"
#include "comm/launcher_ranks.h"
#include "comm/mpirun_launch.h"
#include "comm/tcp_store.h"
#include "core/check.h"

namespace ddpb::comm {
namespace {

using namespace launcher;  // NOLINT: the launchers' shared pieces

// The time of the current poll round: everything read in one round counts as simultaneous,
// since the order in which the round's pipes are read says nothing about what came first.
Clock::time_point g_round_time;

// Reads what is available; returns false at end of file.
bool pump(Child& c) {
  char buf[8192];
  ssize_t n = ::read(c.out_fd, buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) {
    if (!c.partial.empty()) emit_line(c, c.partial, g_round_time);
    c.partial.clear();
    return false;
  }
  c.partial.append(buf, static_cast<size_t>(n));
  size_t pos;
  while ((pos = c.partial.find('\n')) != std::string::npos) {
    emit_line(c, c.partial.substr(0, pos), g_round_time);
    c.partial.erase(0, pos + 1);
  }
  return true;
}

// The environment of rank `rank`: this process's, with the rendezvous variables set.
std::vector<std::string> rank_environment(const LaunchSpec& spec, int rank, int port,
                                          const std::string& token) {
  std::vector<std::pair<std::string, std::string>> vars{
      {"RANK", std::to_string(spec.first_rank() + rank)},
      {"LOCAL_RANK", std::to_string(rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(spec.local_ranks())},
      {"GROUP_RANK", std::to_string(spec.node_rank)},
      {"WORLD_SIZE", std::to_string(spec.world_size)},
      {"MASTER_ADDR", spec.master_addr},
      {"MASTER_PORT", std::to_string(port)},
      {"DDPBENCH_STORE_TOKEN", token},
      {"DDPBENCH_LAUNCHER", "ddpbench"}};
  if (!spec.flight_dir.empty()) vars.emplace_back("DDPBENCH_FLIGHT_DIR", spec.flight_dir);
  return environment_with(vars);
}

// The argv of a rank: this program, started as this process was (self_command), with the
// rank's arguments.
std::vector<std::string> rank_argv(const std::vector<std::string>& self, const LaunchSpec& spec) {
  std::vector<std::string> argv = self;
  argv.insert(argv.end(), spec.args.begin() + (spec.args.empty() ? 0 : 1), spec.args.end());
  return argv;
}

pid_t spawn(const std::vector<std::string>& self, const LaunchSpec& spec, int rank, int port,
            const std::string& token, int* out_fd) {
  const std::vector<std::string> env = rank_environment(spec, rank, port, token);
  SpawnSpec child;
  child.argv = rank_argv(self, spec);
  child.env = &env;
  return spawn_with_output(child, "rank " + std::to_string(rank), out_fd);
}

// Note [The first failure wins]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The rank whose failure caused the others'. A failure is a rank's own report (a "failed at
// step", "failed:" or "error:" line) or, for a rank that died without one, the end of its
// output; ranks that only died after being told to stop are casualties. A report of the rank's
// own trouble (a full disk, a bad input, a stalled step) outranks one that only echoes a peer's
// (a closed connection, a collective that timed out waiting), whenever each came: rank 0's "No
// space left on device" while writing its record is the cause, not rank 1's broken connection
// to it a moment earlier. Among the rest, the first in time wins; everything read in one poll
// round counts as simultaneous, and in a tie, or within a second, a rank that died abnormally
// (a signal we did not send, or an exit code other than 1 and 2, as a crash gives) is the
// cause: the others' reports are about losing it.
int name_the_cause(const std::vector<Child>& children,
                   std::chrono::steady_clock::time_point stop_sent) {
  using Clock = std::chrono::steady_clock;
  int own = -1;  // the first rank to report a failure of its own
  for (size_t k = 0; k < children.size(); ++k) {
    const Child& x = children[k];
    if (x.said_failed == Clock::time_point::max() || x.peer_loss) continue;
    if (own < 0 || x.said_failed < children[static_cast<size_t>(own)].said_failed)
      own = static_cast<int>(k);
  }
  auto abnormal = [&](const Child& x) {
    if (WIFSIGNALED(x.status)) return x.eof < stop_sent;  // not our SIGTERM/SIGKILL
    return WIFEXITED(x.status) && WEXITSTATUS(x.status) != 0 && WEXITSTATUS(x.status) != 1 &&
           WEXITSTATUS(x.status) != 2;
  };
  auto failed_at = [&](const Child& x) {
    bool died_badly = !(WIFEXITED(x.status) && WEXITSTATUS(x.status) == 0);
    Clock::time_point died =
        died_badly && (x.eof <= stop_sent || abnormal(x)) ? x.eof : Clock::time_point::max();
    return std::min(died, x.said_failed);
  };
  int best = -1;
  for (size_t k = 0; k < children.size(); ++k) {
    if (failed_at(children[k]) == Clock::time_point::max()) continue;
    if (best < 0 || failed_at(children[k]) < failed_at(children[static_cast<size_t>(best)]))
      best = static_cast<int>(k);
  }
  if (best < 0) best = 0;
  const Clock::time_point first = failed_at(children[static_cast<size_t>(best)]);
  for (size_t k = 0; k < children.size(); ++k) {
    const Child& x = children[k];
    if (abnormal(x) && x.eof != Clock::time_point::max() &&
        x.eof <= first + std::chrono::seconds(1) &&
        (own < 0 || x.eof <= children[static_cast<size_t>(own)].said_failed)) {
      return static_cast<int>(k);
    }
  }
  return own >= 0 ? own : best;
}

}  // namespace

int find_free_port(const std::string& addr) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  DDPB_CHECK(fd >= 0) << "socket: " << std::strerror(errno);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = 0;
  // A name resolves as the ranks' store clients resolve it (getaddrinfo), so that
  // `--master-addr localhost` means the same to every launcher (issue 25, E9).
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int gai = ::getaddrinfo(addr.c_str(), nullptr, &hints, &found);
  if (gai != 0 || found == nullptr) ::close(fd);
  DDPB_USAGE_CHECK(gai == 0 && found != nullptr)
      << "MASTER_ADDR '" << addr << "' is not an IPv4 address or a name that resolves to one ("
      << ::gai_strerror(gai) << ")";
  sa.sin_addr = reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr;
  ::freeaddrinfo(found);
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  socklen_t len = sizeof(sa);
  if (rc == 0) rc = ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  int err = errno;
  ::close(fd);
  DDPB_CHECK(rc == 0) << "cannot find a free port on " << addr << ": " << std::strerror(err);
  return ntohs(sa.sin_port);
}

std::string random_token() {
  std::ifstream in("/dev/urandom", std::ios::binary);
  unsigned char bytes[16];
  in.read(reinterpret_cast<char*>(bytes), sizeof(bytes));
  DDPB_CHECK(in.gcount() == sizeof(bytes)) << "cannot read /dev/urandom";
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

namespace {

// The launcher's watch over its ranks: one round reads their output, reaps the ones that
// ended, and on the first failure or a stop signal tells the rest to stop (SIGTERM, then
// SIGKILL after spec.grace).
class Supervisor {
 public:
  Supervisor(const LaunchSpec& spec, std::vector<Child>& children)
      : spec_(spec), children_(children), open_pipes_(children.size()), running_(children.size()) {}

  bool done() const { return open_pipes_ == 0 && running_ == 0; }

  void round() {
    read_output();
    const int failed = reap();
    // An interrupt first: a rank that fails in the same round (of the signal it also got) is
    // no cause (issue 48, P16).
    if (g_stop_signal != 0 && !terminating_) {
      // Ctrl-C or SIGTERM to the launcher: pass SIGTERM on to every rank, then SIGKILL.
      result_.exit_code = 128 + g_stop_signal;
      result_.interrupted = true;
      result_.failure = std::string("interrupted by ") + strsignal(g_stop_signal) +
                        ": every rank was told to stop";
      stop_all();
    }
    if (failed >= 0 && !terminating_) {
      // Stop the others at once: a collective they are in will never complete. Who is to
      // blame is decided once everyone has gone (see name_the_cause).
      failure_seen_ = true;
      stop_sent_ = g_round_time;
      stop_all();
    }
    if (!terminating_) end_a_long_stopped_rank();
    if (terminating_ && std::chrono::steady_clock::now() > kill_deadline_) {
      for (auto& other : children_) {
        if (!other.exited) ::kill(other.pid, SIGKILL);
      }
    }
  }

  LaunchResult result() {
    if (failure_seen_ && result_.exit_code == 0 && stalled_child_ >= 0) {
      const Child& c = children_[static_cast<size_t>(stalled_child_)];
      failed_child_ = stalled_child_;
      result_.failed_rank = c.rank;
      result_.exit_code = 1;
      result_.failure = "rank " + std::to_string(c.rank) +
                        " stayed stopped (SIGSTOP, or a debugger) for over " +
                        fmt::format("{:g}", spec_.timeout.count() / 1000.0) +
                        " s (--timeout), and " + describe_status(c.status);
      result_.own_failure = true;
    } else if (failure_seen_ && result_.exit_code == 0) {
      const int r = name_the_cause(children_, stop_sent_);
      const Child& c = children_[static_cast<size_t>(r)];
      failed_child_ = r;
      result_.failed_rank = c.rank;
      result_.exit_code = WIFEXITED(c.status) && WEXITSTATUS(c.status) == 2 ? 2 : 1;
      result_.failure = "rank " + std::to_string(c.rank) + " " + describe_status(c.status);
      if (!c.failure_line.empty()) result_.failure += ": " + c.failure_line;
      result_.own_failure = !c.failure_line.empty() && !c.peer_loss;
    }
    if (failed_child_ >= 0) {
      std::string lines;
      for (const auto& l : children_[static_cast<size_t>(failed_child_)].tail)
        lines += "\n    " + l;
      result_.failure += "; its last lines:" + (lines.empty() ? std::string(" (none)") : lines);
    }
    return result_;
  }

 private:
  void read_output() {
    std::vector<pollfd> pfds;
    std::vector<int> owners;
    for (size_t r = 0; r < children_.size(); ++r) {
      if (children_[r].out_fd >= 0) {
        pfds.push_back({children_[r].out_fd, POLLIN, 0});
        owners.push_back(static_cast<int>(r));
      }
    }
    ::poll(pfds.data(), pfds.size(), 100);
    g_round_time = std::chrono::steady_clock::now();
    for (size_t k = 0; k < pfds.size(); ++k) {
      if (!(pfds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Child& c = children_[static_cast<size_t>(owners[k])];
      if (!pump(c)) {
        c.eof = g_round_time;  // about when it exited
        ::close(c.out_fd);
        c.out_fd = -1;
        --open_pipes_;
      }
    }
  }

  // Reaps the ranks whose output has ended (so that `eof` orders the deaths); returns one
  // that failed in this round, or -1.
  int reap() {
    int failed = -1;
    for (size_t r = 0; r < children_.size(); ++r) {
      Child& c = children_[r];
      if (c.exited || c.out_fd >= 0) continue;
      if (::waitpid(c.pid, &c.status, WNOHANG) != c.pid) continue;
      c.exited = true;
      --running_;
      if (!(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0)) failed = static_cast<int>(r);
    }
    return failed;
  }

  // Issue 48, P9: a rank stopped (SIGSTOP, a debugger) never ends by itself, and on a node
  // where no other rank fails its launcher waited on it for ever, after the job had ended
  // elsewhere. Stopped past --timeout, its collectives have timed out on the other ranks: it
  // is the failure, and is ended (SIGKILL after the grace period: a stopped rank takes no
  // SIGTERM).
  void end_a_long_stopped_rank() {
    const Clock::time_point now = Clock::now();
    for (size_t r = 0; r < children_.size(); ++r) {
      Child& c = children_[r];
      if (c.exited || !is_stopped(c.pid)) {
        c.stopped_since = Clock::time_point::max();
        continue;
      }
      if (c.stopped_since == Clock::time_point::max()) c.stopped_since = now;
      if (now - c.stopped_since <= spec_.timeout) continue;
      stalled_child_ = static_cast<int>(r);
      failure_seen_ = true;
      stop_sent_ = g_round_time;
      stop_all();
      return;
    }
  }

  void stop_all() {
    terminating_ = true;
    kill_deadline_ = std::chrono::steady_clock::now() + spec_.grace;
    for (auto& other : children_) {
      if (!other.exited) ::kill(other.pid, SIGTERM);
    }
  }

  const LaunchSpec& spec_;
  std::vector<Child>& children_;
  size_t open_pipes_, running_;
  LaunchResult result_;
  int failed_child_ = -1;   // index into children_ of the rank to blame
  int stalled_child_ = -1;  // of a rank ended for staying stopped
  bool failure_seen_ = false, terminating_ = false;
  std::chrono::steady_clock::time_point stop_sent_ = std::chrono::steady_clock::time_point::max();
  std::chrono::steady_clock::time_point kill_deadline_{};
};

}  // namespace

namespace {

// The store token of this launch: DDPBENCH_STORE_TOKEN, required with several nodes (Note
// [Launcher nodes]); else a random one.
std::string launch_token(const LaunchSpec& spec) {
  const char* given = std::getenv("DDPBENCH_STORE_TOKEN");
  if (given != nullptr && *given != '\0') {
    check_store_token(given);
    return given;
  }
  DDPB_USAGE_CHECK(spec.nnodes == 1)
      << "--nnodes " << spec.nnodes
      << " needs DDPBENCH_STORE_TOKEN set to the same secret on every node";
  return random_token();
}

// Node 0's ranks serve the store on --master-port: a port already taken (another launcher that
// is node 0 of a job, or another program) would surface as a rank failing to listen and its
// peers timing out, so it is said up front (issue 25, M11).
void check_port_free(const LaunchSpec& spec) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  DDPB_CHECK(fd >= 0) << "socket: " << std::strerror(errno);
  const int yes = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));  // as the store's listener
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(spec.master_port));
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(spec.master_addr.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
    ::close(fd);
    return;  // find_free_port and the ranks name an address that does not resolve
  }
  sa.sin_addr = reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr;
  ::freeaddrinfo(found);
  const int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  const int err = errno;
  ::close(fd);
  DDPB_USAGE_CHECK(rc == 0 || err != EADDRINUSE)
      << "--master-port " << spec.master_port << " on " << spec.master_addr
      << " is taken: another launcher already holds it as node 0 of a job, or another program "
         "listens there";
}

void check_nodes(const LaunchSpec& spec) {
  DDPB_USAGE_CHECK(spec.world_size >= 1) << "--world-size must be positive";
  DDPB_USAGE_CHECK(spec.nnodes >= 1 && spec.world_size % spec.nnodes == 0)
      << "--world-size " << spec.world_size << " is not a multiple of --nnodes " << spec.nnodes;
  DDPB_USAGE_CHECK(spec.node_rank >= 0 && spec.node_rank < spec.nnodes)
      << "--node-rank " << spec.node_rank << " outside 0.." << spec.nnodes - 1;
  DDPB_USAGE_CHECK(spec.nnodes == 1 || spec.master_port > 0)
      << "--nnodes " << spec.nnodes << " needs --master-port (every node must know it)";
}

}  // namespace

std::string launch_banner(const LaunchSpec& spec) {
  check_nodes(spec);  // a banner that promises a launch comes after the flags are checked
  if (spec.nnodes > 1) {
    return fmt::format("ddpbench launcher: node {} of {}: starting {} of {} ranks, store at {}:{}",
                       spec.node_rank, spec.nnodes, spec.local_ranks(), spec.world_size,
                       spec.master_addr, spec.master_port);
  }
  return fmt::format(
      "ddpbench launcher: starting {} ranks{}", spec.world_size,
      spec.via_mpirun ? " through mpirun (--backend mpi needs an MPI launcher)" : "");
}

LaunchResult launch_local(const LaunchSpec& given) {
  check_nodes(given);
  if (given.node_rank == 0 && given.master_port > 0) check_port_free(given);
  const std::vector<std::string> self = self_command();
  LaunchSpec spec = given;
  const int port = spec.master_port > 0 ? spec.master_port : find_free_port(spec.master_addr);
  const std::string token = launch_token(spec);
  // File times come from the kernel's coarse clock, up to a tick (at most 10 ms) behind.
  const auto started =
      std::filesystem::file_time_type::clock::now() - std::chrono::milliseconds(50);
  if (!spec.flight_dir.empty()) check_flight_dir(spec.flight_dir);  // before any rank starts
  if (spec.flight_dir.empty()) {
    std::string note;
    spec.flight_dir = resolve_flight_dir(port, &note);
    if (!note.empty()) std::fprintf(stderr, "ddpbench launcher: %s\n", note.c_str());
  }
  g_stop_signal = 0;
  StopSignals stop_signals;
  if (spec.via_mpirun) {
    LaunchResult result = launch_mpirun(spec, port, token);
    result.master_port = port;
    result.flight_dir = spec.flight_dir;
    result.job = flight_job_id(token);
    result.started = started;
    return result;
  }
  std::vector<Child> children(static_cast<size_t>(spec.local_ranks()));
  for (int r = 0; r < spec.local_ranks(); ++r) {
    if (g_stop_signal != 0) {  // Ctrl-C while starting: start no more; the loop stops these
      children.resize(static_cast<size_t>(r));
      break;
    }
    auto& c = children[static_cast<size_t>(r)];
    c.rank = spec.first_rank() + r;
    c.pid = spawn(self, spec, r, port, token, &c.out_fd);
  }
  if (children.empty()) {
    LaunchResult result;
    result.master_port = port;
    result.exit_code = 128 + g_stop_signal;
    result.interrupted = true;
    result.failure =
        std::string("interrupted by ") + strsignal(g_stop_signal) + " before any rank started";
    return result;
  }
  Supervisor supervisor(spec, children);
  while (!supervisor.done()) supervisor.round();
  LaunchResult result = supervisor.result();
  result.master_port = port;
  result.flight_dir = spec.flight_dir;
  result.job = flight_job_id(token);
  result.started = started;
  return result;
}

}  // namespace ddpb::comm
