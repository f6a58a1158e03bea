#include "bench/suite/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "base/subprocess.h"
#include "core/check.h"

namespace ddpb::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kGrace = std::chrono::seconds(10);  // SIGINT/SIGTERM, then SIGKILL

}  // namespace

ChildResult run_child(const ChildSpec& spec) {
  DDPB_CHECK(!spec.argv.empty()) << "run_child: empty command";
  const int log_fd = ::open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  DDPB_CHECK(log_fd >= 0) << "cannot write " << spec.log_path << ": " << std::strerror(errno);
  const auto start = Clock::now();
  SpawnSpec child;
  child.argv = spec.argv;
  child.cwd = spec.cwd;
  child.env = spec.env;
  child.output_fd = log_fd;
  child.stdin_from_dev_null = true;
  child.own_process_group = true;  // so that a DDP run and all its ranks are killed together
  pid_t pid = -1;
  try {
    pid = spawn_process(child);
  } catch (const SubprocessError& e) {
    // As a shell would: the reason in the run's log, exit 127.
    const std::string line = std::string("ddpbench suite: ") + e.what() + "\n";
    [[maybe_unused]] const ssize_t n = ::write(log_fd, line.data(), line.size());
    ::close(log_fd);
    ChildResult failed;
    failed.exit_code = 127;
    return failed;
  }
  ::close(log_fd);

  ChildResult result;
  Clock::time_point kill_at{};  // when the polite signal was sent, escalate after kGrace
  int status = 0;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      status = 1 << 8;
      break;
    }
    const auto now = Clock::now();
    const bool over =
        spec.timeout_s > 0 && std::chrono::duration<double>(now - start).count() > spec.timeout_s;
    const bool stop = spec.stop && spec.stop->load();
    if ((over || stop) && kill_at == Clock::time_point{}) {
      result.timed_out = over && !stop;
      result.stopped = stop;
      // SIGINT is what a terminal's Ctrl-C would have sent: ddpbench's launcher passes it on
      // to its ranks and exits 130.
      ::killpg(pid, stop ? SIGINT : SIGTERM);
      kill_at = now;
    } else if (kill_at != Clock::time_point{} && now - kill_at > kGrace) {
      ::killpg(pid, SIGKILL);
    }
    if (spec.tick) spec.tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  // Ranks of a DDP run live in the same group; none may outlive the run.
  ::killpg(pid, SIGKILL);
  result.exit_code = exit_code_of(status);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

std::string failure_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last, reason;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    last = line;
    if (line.find("ddpbench: error:") != std::string::npos ||
        line.find("ddpbench: failed:") != std::string::npos ||
        line.find("ddpbench launcher:") != std::string::npos) {
      if (reason.empty() || line.find("ddpbench launcher: flight") == std::string::npos)
        reason = line;
    }
  }
  std::string out = reason.empty() ? last : reason;
  out.erase(0, out.find_first_not_of(" \t"));  // a launcher's quoted tail is indented
  if (out.size() > 400) out = out.substr(0, 397) + "...";
  return out.empty() ? "(no output)" : out;
}

}  // namespace ddpb::bench
