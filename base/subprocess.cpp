#include "base/subprocess.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

namespace ddpb {
namespace {

std::vector<char*> pointers_of(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// The child's errno into the parent's error pipe, then exit 127.
[[noreturn]] void give_up(int error_fd) {
  const int err = errno;
  [[maybe_unused]] const ssize_t n = ::write(error_fd, &err, sizeof(err));
  ::_exit(127);
}

// The child's side, async-signal-safe only: on any failure, errno into `error_fd`, exit 127.
[[noreturn]] void become_child(const SpawnSpec& spec, char* const* argv, char* const* envp,
                               pid_t parent, int error_fd) {
  if (spec.own_process_group) ::setpgid(0, 0);
  if (spec.parent_death_signal != 0) {
    ::prctl(PR_SET_PDEATHSIG, spec.parent_death_signal);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
  }
  if (spec.default_signals) {
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    ::signal(SIGXFSZ, SIG_DFL);
  }
  if (spec.output_fd >= 0) {
    if (::dup2(spec.output_fd, STDOUT_FILENO) < 0 || ::dup2(spec.output_fd, STDERR_FILENO) < 0)
      give_up(error_fd);
  }
  if (spec.stdin_fd >= 0) {
    if (::dup2(spec.stdin_fd, STDIN_FILENO) < 0) give_up(error_fd);
  } else if (spec.stdin_from_dev_null) {
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull < 0 || ::dup2(devnull, STDIN_FILENO) < 0) give_up(error_fd);
  }
  if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) give_up(error_fd);
  if (envp != nullptr) {
    ::execve(argv[0], argv, envp);
  } else {
    ::execv(argv[0], argv);
  }
  give_up(error_fd);
}

}  // namespace

pid_t spawn_process(const SpawnSpec& spec) {
  if (spec.argv.empty()) throw SubprocessError("spawn_process: empty command");
  const std::vector<char*> argv = pointers_of(spec.argv);
  std::vector<char*> envp;
  if (spec.env != nullptr) envp = pointers_of(*spec.env);
  int error_pipe[2];
  if (::pipe2(error_pipe, O_CLOEXEC) != 0) {
    throw SubprocessError("cannot start " + spec.argv[0] + ": pipe: " + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(error_pipe[0]);
    become_child(spec, argv.data(), spec.env ? envp.data() : nullptr, parent, error_pipe[1]);
  }
  const int fork_errno = errno;
  ::close(error_pipe[1]);
  if (pid < 0) {
    ::close(error_pipe[0]);
    throw SubprocessError("cannot start " + spec.argv[0] + ": fork: " + std::strerror(fork_errno));
  }
  if (spec.own_process_group) ::setpgid(pid, pid);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(error_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  ::close(error_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const std::string where = spec.cwd.empty() ? "" : " in " + spec.cwd;
    throw SubprocessError("cannot execute " + spec.argv[0] + where + ": " +
                          std::strerror(child_errno));
  }
  return pid;
}

namespace {

// The options of glibc's ld.so that take a value (`ld.so --help`); the first argument that
// is neither one of them nor an option is the program.
bool loader_option_takes_value(std::string_view option) {
  for (std::string_view o : {"--library-path", "--inhibit-rpath", "--audit", "--preload", "--argv0",
                             "--glibc-hwcaps-prepend", "--glibc-hwcaps-mask"}) {
    if (option == o) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> self_command() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    throw SubprocessError(std::string("cannot find this executable: ") + std::strerror(errno));
  const std::string exe(buf, static_cast<size_t>(n));
  if (!exe.substr(exe.rfind('/') + 1).starts_with("ld-linux")) return {exe};
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> cmdline;
  for (std::string arg; std::getline(in, arg, '\0');) cmdline.push_back(arg);
  std::vector<std::string> out{exe};
  for (size_t i = 1; i < cmdline.size(); ++i) {
    out.push_back(cmdline[i]);
    if (loader_option_takes_value(cmdline[i]) && i + 1 < cmdline.size()) {
      out.push_back(cmdline[++i]);
    } else if (!cmdline[i].starts_with("--")) {
      return out;  // the program
    }
  }
  throw SubprocessError("started through " + exe + ", but its command line names no program");
}

namespace {
// The fields of /proc/PID/stat after "pid (comm)" (comm may hold spaces and parentheses, so
// after the last ')'): [0] state, [1] ppid, ..., [19] starttime. Empty when it is gone.
std::vector<std::string> stat_fields(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::vector<std::string> fields;
  if (!std::getline(in, stat)) return fields;
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return fields;
  std::istringstream rest(stat.substr(close + 1));
  for (std::string f; rest >> f && fields.size() < 20;) fields.push_back(f);
  return fields;
}

pid_t parent_of(pid_t pid) {
  const auto f = stat_fields(pid);
  return f.size() > 1 ? static_cast<pid_t>(std::atoi(f[1].c_str())) : -1;
}

// The executable of `pid`; a binary replaced since it started reads "PATH (deleted)", which
// names the same program.
std::string exe_of(pid_t pid) {
  char buf[4096];
  const std::string link = "/proc/" + std::to_string(pid) + "/exe";
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf) - 1);
  std::string exe = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  constexpr std::string_view kDeleted = " (deleted)";
  if (exe.ends_with(kDeleted)) exe.resize(exe.size() - kDeleted.size());
  return exe;
}
}  // namespace

std::vector<ProcessRef> self_processes_below(pid_t ancestor) {
  std::vector<ProcessRef> found;
  const std::string self = exe_of(::getpid());
  if (self.empty()) return found;
  std::error_code error;  // /proc unreadable: nothing seen
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == ancestor || exe_of(pid) != self) continue;  // one readlink for most processes
    pid_t up = pid;
    for (int depth = 0; depth < 8 && up > 1 && up != ancestor; ++depth) up = parent_of(up);
    const auto f = stat_fields(pid);
    if (up == ancestor && f.size() == 20) found.push_back({pid, std::stoull(f[19])});
  }
  return found;
}

bool is_stopped(pid_t pid) {
  const auto f = stat_fields(pid);
  return !f.empty() && (f[0] == "T" || f[0] == "t");
}

bool still_running(const ProcessRef& p) {
  const auto f = stat_fields(p.pid);
  return f.size() == 20 && f[0] != "Z" && f[0] != "X" && std::stoull(f[19]) == p.start_ticks;
}

int exit_code_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

}  // namespace ddpb
