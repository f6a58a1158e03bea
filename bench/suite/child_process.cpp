#include "bench/suite/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "core/check.h"

namespace ddpb::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kGrace = std::chrono::seconds(10);  // SIGINT/SIGTERM, then SIGKILL

[[noreturn]] void exec_child(const ChildSpec& spec, int log_fd) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  // The suite may ignore or handle signals; the run starts from the defaults.
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::dup2(log_fd, STDOUT_FILENO);
  ::dup2(log_fd, STDERR_FILENO);
  int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
  if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) _exit(127);
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
  const std::string msg =
      "ddpbench suite: cannot execute " + spec.argv[0] + ": " + std::strerror(errno) + "\n";
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg.data(), msg.size());
  _exit(127);
}

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

ChildResult run_child(const ChildSpec& spec) {
  DDPB_CHECK(!spec.argv.empty()) << "run_child: empty command";
  const int log_fd = ::open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  DDPB_CHECK(log_fd >= 0) << "cannot write " << spec.log_path << ": " << std::strerror(errno);
  const auto start = Clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) exec_child(spec, log_fd);
  ::close(log_fd);
  DDPB_CHECK(pid > 0) << "fork failed: " << std::strerror(errno);
  ::setpgid(pid, pid);  // also here, so that killpg works before the child gets to it

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
  result.exit_code = decode_status(status);
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
  if (out.size() > 400) out = out.substr(0, 397) + "...";
  return out.empty() ? "(no output)" : out;
}

}  // namespace ddpb::bench
