#include "comm/mpirun_launch.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "base/subprocess.h"
#include "comm/launcher_ranks.h"
#include "core/check.h"

namespace ddpb::comm {
namespace {

using namespace launcher;  // NOLINT: the launchers' shared pieces

// "[1,3]<stdout>:text" (mpirun --tag-output): rank 3's "text". Returns the rank, or -1 for a
// line of mpirun's own.
int split_tagged_line(const std::string& line, std::string* text) {
  if (line.empty() || line[0] != '[') return -1;
  const size_t comma = line.find(',');
  const size_t close = line.find(']');
  if (comma == std::string::npos || close == std::string::npos || comma > close) return -1;
  int rank = 0;
  for (size_t i = comma + 1; i < close; ++i) {
    if (line[i] < '0' || line[i] > '9') return -1;
    rank = rank * 10 + (line[i] - '0');
  }
  for (const char* stream : {"<stdout>:", "<stderr>:"}) {
    if (line.compare(close + 1, std::strlen(stream), stream) == 0) {
      *text = line.substr(close + 1 + std::strlen(stream));
      return rank;
    }
  }
  return -1;
}

// mpirun's own account of the rank that ended the job: "Process name: [[39167,1],1]".
int rank_named_by_mpirun(const std::deque<std::string>& lines) {
  for (const std::string& line : lines) {
    const size_t at = line.find("Process name: [[");
    if (at == std::string::npos) continue;
    const size_t comma = line.find("],", at);
    if (comma == std::string::npos) continue;
    return std::atoi(line.c_str() + comma + 2);
  }
  return -1;
}

class MpirunJob {
 public:
  MpirunJob(const LaunchSpec& spec, pid_t pid, int out_fd)
      : spec_(spec), pid_(pid), out_fd_(out_fd), ranks_(static_cast<size_t>(spec.world_size)) {
    for (int r = 0; r < spec.world_size; ++r) ranks_[static_cast<size_t>(r)].rank = r;
  }

  // Reads mpirun's output until it ends, passing stop signals on, and stops an mpirun that
  // starts no rank within start_limit(); returns its wait status.
  int supervise() {
    bool stopping = false;
    Clock::time_point kill_at = Clock::time_point::max();
    const Clock::time_point start_deadline = Clock::now() + start_limit();
    while (out_fd_ >= 0) {
      pollfd pfd{out_fd_, POLLIN, 0};
      ::poll(&pfd, 1, 100);
      if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) read_output();
      find_ranks();
      if (!stopping && !rank_started_ && Clock::now() > start_deadline) {
        never_started_ = true;
        stopping = true;
        ::kill(pid_, SIGTERM);
        kill_at = Clock::now() + spec_.grace;
      }
      if (g_stop_signal != 0 && !stopping) {
        stopping = true;
        ::kill(pid_, SIGTERM);
        kill_at = Clock::now() + spec_.grace;
      }
      if (Clock::now() > kill_at) ::kill(pid_, SIGKILL);
    }
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    wait_for_ranks_to_end();
    return status;
  }

  LaunchResult result(int status) const {
    LaunchResult r;
    const bool exited_0 = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (exited_0 && rank_started_) return r;
    if (g_stop_signal != 0) {
      r.exit_code = 128 + g_stop_signal;
      r.interrupted = true;
      r.failure = std::string("interrupted by ") + strsignal(g_stop_signal) +
                  ": mpirun was told to stop every rank";
      return r;
    }
    if (never_started_ || !rank_started_) return no_rank_started(status);
    r.failed_rank = blamed_rank();
    const int code = exit_code_of(status);
    r.exit_code = code == 2 ? 2 : 1;
    const std::deque<std::string>* tail = &mpirun_tail_;
    r.failure = "mpirun " + describe_status(status);
    if (r.failed_rank >= 0) {
      const Child& c = ranks_[static_cast<size_t>(r.failed_rank)];
      r.failure =
          "rank " + std::to_string(c.rank) + " failed (mpirun " + describe_status(status) + ")";
      if (!c.failure_line.empty()) r.failure += ": " + c.failure_line;
      r.own_failure = !c.failure_line.empty() && !c.peer_loss;
      if (!c.tail.empty()) tail = &c.tail;
    }
    std::string lines;
    for (const auto& l : *tail) lines += "\n    " + l;
    r.failure += "; its last lines:" + (lines.empty() ? std::string(" (none)") : lines);
    return r;
  }

 private:
  // How long mpirun may take to start a rank: --timeout, but never under kMinStartWait (a
  // --timeout of a second is a collective's limit, not mpirun's start-up on a loaded host).
  static constexpr std::chrono::milliseconds kMinStartWait{10'000};
  std::chrono::milliseconds start_limit() const { return std::max(spec_.timeout, kMinStartWait); }

  // The ranks, looked for below mpirun until all are seen, or for 30 s after the first (they
  // cannot be found once mpirun is gone: they then belong to init). A scan reads /proc, so it
  // stops there rather than run through the job.
  void find_ranks() {
    const Clock::time_point now = Clock::now();
    if (static_cast<int>(rank_pids_.size()) >= spec_.world_size || now > scan_until_) return;
    for (const ProcessRef& p : self_processes_below(pid_)) {
      if (std::find(rank_pids_.begin(), rank_pids_.end(), p) == rank_pids_.end())
        rank_pids_.push_back(p);
    }
    if (!rank_pids_.empty() && !rank_started_) {
      rank_started_ = true;
      scan_until_ = now + std::chrono::seconds(30);
    }
  }

  // Issue 48, P32: a killed mpirun's ranks end by their parent-death signal (Note [Ranks die
  // with their launcher]) a second or two later; the launcher returns only once they have:
  // SIGTERM to those left when mpirun ended (one that mpirun started through a daemon has
  // no such signal), SIGKILL to those left after the grace period.
  void wait_for_ranks_to_end() const {
    for (const ProcessRef& p : rank_pids_) {
      if (still_running(p)) ::kill(p.pid, SIGTERM);
    }
    const Clock::time_point kill_at = Clock::now() + spec_.grace;
    for (;;) {
      const bool any = std::any_of(rank_pids_.begin(), rank_pids_.end(), still_running);
      if (!any) return;
      if (Clock::now() > kill_at + std::chrono::seconds(2)) return;  // unkillable: say nothing
      if (Clock::now() > kill_at) {
        for (const ProcessRef& p : rank_pids_) {
          if (still_running(p)) ::kill(p.pid, SIGKILL);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // Issue 48, P15: an mpirun that never started a rank was waited on for ever, and one that
  // exited 0 without any gave exit 2 and no word.
  LaunchResult no_rank_started(int status) const {
    LaunchResult r;
    r.exit_code = 1;
    r.failure = never_started_
                    ? "mpirun started none of the " + std::to_string(spec_.world_size) +
                          " ranks within " + std::to_string(start_limit().count() / 1000) +
                          " s (--timeout, at least " +
                          std::to_string(kMinStartWait.count() / 1000) + " s), and was stopped"
                    : "mpirun " + describe_status(status) + " without starting any of the " +
                          std::to_string(spec_.world_size) + " ranks";
    std::string lines;
    for (const auto& l : mpirun_tail_) lines += "\n    " + l;
    r.failure += "; its last lines:" + (lines.empty() ? std::string(" (none)") : lines);
    return r;
  }

  void read_output() {
    char buf[8192];
    const ssize_t n = ::read(out_fd_, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    const Clock::time_point now = Clock::now();
    if (n <= 0) {
      if (!partial_.empty()) route(partial_, now);
      ::close(out_fd_);
      out_fd_ = -1;
      return;
    }
    partial_.append(buf, static_cast<size_t>(n));
    size_t pos;
    while ((pos = partial_.find('\n')) != std::string::npos) {
      route(partial_.substr(0, pos), now);
      partial_.erase(0, pos + 1);
    }
  }

  void route(const std::string& line, Clock::time_point now) {
    std::string text;
    const int rank = split_tagged_line(line, &text);
    if (rank >= 0 && rank < spec_.world_size) {
      rank_started_ = true;
      emit_line(ranks_[static_cast<size_t>(rank)], text, now);
      return;
    }
    std::printf("[mpirun] %s\n", line.c_str());
    std::fflush(stdout);
    mpirun_tail_.push_back(line);
    if (mpirun_tail_.size() > 4 * kTailLines) mpirun_tail_.pop_front();
  }

  // Note [The first failure wins], with what mpirun lets us see: no per-rank exit status,
  // so the first rank to report a failure of its own, else the first to report any, else the
  // one mpirun names.
  int blamed_rank() const {
    const Child* own = nullptr;
    const Child* any = nullptr;
    for (const Child& c : ranks_) {
      if (c.said_failed == Clock::time_point::max()) continue;
      if (!c.peer_loss && (own == nullptr || c.said_failed < own->said_failed)) own = &c;
      if (any == nullptr || c.said_failed < any->said_failed) any = &c;
    }
    if (own != nullptr) return own->rank;
    const int named = rank_named_by_mpirun(mpirun_tail_);
    if (named >= 0 && named < spec_.world_size) return named;
    return any != nullptr ? any->rank : -1;
  }

  const LaunchSpec& spec_;
  pid_t pid_;
  int out_fd_;
  std::string partial_;
  std::vector<Child> ranks_;
  std::deque<std::string> mpirun_tail_;
  std::vector<ProcessRef> rank_pids_;
  Clock::time_point scan_until_ = Clock::time_point::max();
  bool rank_started_ = false;   // a rank wrote a line, or runs below mpirun
  bool never_started_ = false;  // none did within spec_.timeout: stopped
};

}  // namespace

std::string find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, end - start);
    const std::string candidate = dir + "/" + program;
    if (end > start && ::access(candidate.c_str(), X_OK) == 0) {
      // Open MPI takes its install prefix from the folder mpirun ran from: /bin, a link to
      // usr/bin where /usr is merged, gave "/" and an abort (issue 48, P33). So the folder's
      // real path; the program's own name stays (alternatives links choose by it).
      char* real = ::realpath(dir.c_str(), nullptr);
      const std::string found = real != nullptr ? std::string(real) + "/" + program : candidate;
      std::free(real);
      return found;
    }
    start = end + 1;
  }
  return "";
}

LaunchResult launch_mpirun(const LaunchSpec& spec, int port, const std::string& token) {
  DDPB_USAGE_CHECK(spec.nnodes == 1)
      << "--backend mpi over several nodes: start the ranks with mpirun or srun on every node "
         "(scripts/cluster/mpirun_ddp.sh)";
  const std::string mpirun = find_on_path("mpirun");
  DDPB_USAGE_CHECK(!mpirun.empty())
      << "--backend mpi needs mpirun to start its ranks, and none is on PATH (Debian: "
         "openmpi-bin)";
  std::vector<std::pair<std::string, std::string>> vars{{"MASTER_ADDR", spec.master_addr},
                                                        {"MASTER_PORT", std::to_string(port)},
                                                        {"DDPBENCH_STORE_TOKEN", token},
                                                        {"DDPBENCH_FLIGHT_DIR", spec.flight_dir}};
  // Which interface each rank binds to (Note [Choosing this host's address]), passed on as set:
  // mpirun starts ranks with its own environment on other hosts.
  for (const char* name : {"DDPBENCH_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') {
      vars.emplace_back(name, value);
    }
  }
  // Open MPI refuses to run as root unless told twice; a container's root is the usual case.
  if (::geteuid() == 0) {
    vars.emplace_back("OMPI_ALLOW_RUN_AS_ROOT", "1");
    vars.emplace_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
  }
  const std::vector<std::string> env = environment_with(vars);
  SpawnSpec child;
  child.argv = {mpirun, "-np", std::to_string(spec.world_size), "--oversubscribe", "--tag-output"};
  for (const auto& v : vars) child.argv.insert(child.argv.end(), {"-x", v.first});
  for (const std::string& arg : self_command()) child.argv.push_back(arg);
  child.argv.insert(child.argv.end(), spec.args.begin() + (spec.args.empty() ? 0 : 1),
                    spec.args.end());
  child.env = &env;
  int out_fd = -1;
  const pid_t pid = spawn_with_output(child, "mpirun", &out_fd);
  MpirunJob job(spec, pid, out_fd);
  return job.result(job.supervise());
}

}  // namespace ddpb::comm
