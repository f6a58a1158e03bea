#include "comm/launcher_ranks.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <cstdio>
#include <cstring>

#include "core/check.h"

extern char** environ;

namespace ddpb::comm::launcher {

volatile sig_atomic_t g_stop_signal = 0;

namespace {
void on_stop_signal(int sig) {
  g_stop_signal = sig;
}
}  // namespace

StopSignals::StopSignals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &old_int_);
  ::sigaction(SIGTERM, &sa, &old_term_);
}

StopSignals::~StopSignals() {
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
}

std::string failure_message(const std::string& line) {
  for (const char* head : {"ddpbench: failed: ", "ddpbench: error: "}) {
    if (line.rfind(head, 0) == 0) return line.substr(std::strlen(head));
  }
  if (line.rfind("ddpbench: rank ", 0) == 0) {
    const size_t at = line.find(" failed at step ");
    const size_t colon = at == std::string::npos ? at : line.find(": ", at);
    if (colon != std::string::npos) return line.substr(colon + 2);
  }
  return "";
}

bool is_peer_loss(const std::string& message) {
  for (const char* sign :
       {"onnection closed", "onnection reset", "reset by peer", "roken pipe", "Timed out",
        "timed out", "did not complete within", "not every rank arrived", "end of file"}) {
    if (message.find(sign) != std::string::npos) return true;
  }
  return false;
}

std::string signal_name(int sig) {
  static const std::pair<int, const char*> kNames[] = {
      {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
      {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
      {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
      {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGXCPU, "SIGXCPU"},
      {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"}};
  for (const auto& [number, name] : kNames)
    if (number == sig) return name;
  return "";
}

// P28: a rank killed by kill -9 under mpirun read "mpirun exited with code 137": mpirun, as a
// shell, passes on 128 + the signal that killed the process it waited for, so a code above 128
// names the signal (when it is one), and a signalled process is named by its signal.
std::string describe_status(int status) {
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    const std::string name = code > 128 ? signal_name(code - 128) : "";
    return "exited with code " + std::to_string(code) +
           (name.empty() ? std::string()
                         : ": a process was killed by signal " + std::to_string(code - 128) + " (" +
                               name + ")");
  }
  if (WIFSIGNALED(status)) {
    const std::string name = signal_name(WTERMSIG(status));
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           (name.empty() ? std::string(strsignal(WTERMSIG(status))) : name) + ")";
  }
  return "ended with status " + std::to_string(status);
}

void emit_line(Child& c, const std::string& line, Clock::time_point now) {
  const std::string message = failure_message(line);
  if (!message.empty() && c.said_failed == Clock::time_point::max()) {
    c.said_failed = now;
    c.failure_line = message;
    c.peer_loss = is_peer_loss(message);
  }
  std::printf("[rank %d] %s\n", c.rank, line.c_str());
  std::fflush(stdout);
  c.tail.push_back(line);
  if (c.tail.size() > kTailLines) c.tail.pop_front();
}

pid_t spawn_with_output(SpawnSpec& child, const std::string& what, int* out_fd) {
  int fds[2];
  DDPB_CHECK(::pipe2(fds, O_CLOEXEC) == 0) << "pipe: " << std::strerror(errno);
  child.output_fd = fds[1];
  pid_t pid = -1;
  try {
    pid = spawn_process(child);  // Note [Spawning from threads]
  } catch (const SubprocessError& e) {
    ::close(fds[0]);
    ::close(fds[1]);
    DDPB_FAIL() << "cannot start " << what << ": " << e.what();
  }
  ::close(fds[1]);
  *out_fd = fds[0];
  return pid;
}

std::vector<std::string> environment_with(
    const std::vector<std::pair<std::string, std::string>>& vars) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& v : vars) replaced = replaced || v.first == name;
    if (!replaced) env.push_back(entry);
  }
  for (const auto& v : vars) env.push_back(v.first + "=" + v.second);
  return env;
}

}  // namespace ddpb::comm::launcher
