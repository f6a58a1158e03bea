#include "bench/suite/suite_hosts.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include "base/input_file.h"
#include "base/subprocess.h"
#include "comm/launcher.h"
#include "comm/local_address.h"
#include "comm/mpirun_launch.h"
#include "core/check.h"

extern char** environ;

namespace ddpb::bench {
namespace {

constexpr size_t kMaxHostsFileBytes = size_t{1} << 20;
constexpr int kMaxSlots = 1024;

// Hostname characters only, and no leading '-' (ssh would read "-oProxyCommand=..." as an option).
bool host_name_ok(const std::string& name) {
  if (name.empty() || name.size() > 253 || name.front() == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
  });
}

SuiteHost parse_host_line(const std::string& line, const std::string& where) {
  std::istringstream words(line);
  SuiteHost h;
  words >> h.name;
  DDPB_USAGE_CHECK(host_name_ok(h.name))
      << where << ": '" << h.name << "' is not a host name (letters, digits, '.', '-', '_')";
  bool slots_given = false;
  for (std::string w; words >> w;) {
    if (w.rfind("slots=", 0) == 0) {
      const std::string n = w.substr(6);
      DDPB_USAGE_CHECK(
          !slots_given && !n.empty() && n.size() <= 4 &&
          std::all_of(n.begin(), n.end(), [](unsigned char c) { return std::isdigit(c) != 0; }) &&
          std::stoi(n) >= 1 && std::stoi(n) <= kMaxSlots)
          << where << ": slots must be given once, from 1 to " << kMaxSlots << ", got '" << w
          << "'";
      h.slots = std::stoi(n);
      slots_given = true;
    } else {
      DDPB_USAGE_CHECK(h.address.empty() && host_name_ok(w))
          << where << ": expected NAME [ADDRESS] [slots=K], got '" << w << "'";
      h.address = w;
    }
  }
  const std::string named = h.address.empty() ? h.name : h.address;
  const auto address = comm::ipv4_of(named);
  DDPB_USAGE_CHECK(address) << where << ": '" << named << "' has no IPv4 address";
  h.address = *address;
  return h;
}

// The first host holds the results folder and node 0 of every run: it must be this machine.
void check_first_host_is_here(const SuiteHost& first, const std::string& what) {
  for (const comm::InterfaceAddress& a : comm::interface_addresses()) {
    if (a.address == first.address) return;
  }
  DDPB_USAGE_FAIL() << what << ": the first host, " << first.name << " (" << first.address
                    << "), is not this machine: run the suite on it (it holds the results "
                       "folder and node 0 of every run)";
}

// The launch command's words with {host} replaced, its program found on PATH.
std::vector<std::string> launch_words(const std::string& launch, const std::string& host) {
  std::vector<std::string> words;
  std::istringstream in(launch);
  for (std::string w; in >> w;) {
    for (size_t at; (at = w.find("{host}")) != std::string::npos;) w.replace(at, 6, host);
    words.push_back(w);
  }
  DDPB_USAGE_CHECK(!words.empty()) << "--launch is empty";
  if (words[0].find('/') == std::string::npos) {
    const std::string found = comm::find_on_path(words[0]);
    DDPB_USAGE_CHECK(!found.empty()) << "--launch: '" << words[0] << "' is not on PATH";
    words[0] = found;
  }
  return words;
}

std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// What a node's ranks need from the suite's environment and ssh does not carry: how to pick
// the interface (Note [Choosing this host's address]) and the math libraries' threads.
constexpr const char* kForwardedEnv[] = {"DDPBENCH_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME",
                                         "NCCL_SOCKET_IFNAME",     "OMP_NUM_THREADS",
                                         "OPENBLAS_NUM_THREADS",   "CUDA_VISIBLE_DEVICES"};

// The one shell line a node runs (Note [Runs across hosts]): the token from standard input.
std::string node_line(const std::string& cwd, const std::vector<std::string>& argv) {
  std::string line = "read -r DDPBENCH_STORE_TOKEN && export DDPBENCH_STORE_TOKEN";
  for (const char* name : kForwardedEnv) {
    if (const char* value = std::getenv(name))
      line += std::string(" && export ") + name + "=" + shell_quoted(value);
  }
  line += " && cd " + shell_quoted(std::filesystem::absolute(cwd).string()) + " && exec";
  for (const std::string& a : argv) line += " " + shell_quoted(a);
  return line;
}

std::vector<std::string> with_node_flags(std::vector<std::string> argv, int nnodes, int node,
                                         const std::string& address, int port) {
  argv.insert(argv.end(), {"--nnodes", std::to_string(nnodes), "--node-rank", std::to_string(node),
                           "--master-addr", address, "--master-port", std::to_string(port)});
  return argv;
}

struct Remote {
  pid_t pid = -1;
  NodeOutcome outcome;
  bool done = false;
};

// Closes a descriptor when it leaves scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Starts node `node` through the launch command, its output in `log`, the token on its stdin.
Remote start_remote(const SuiteHosts& hosts, int node, const std::vector<std::string>& argv,
                    const std::string& cwd, const std::string& token, const std::string& log) {
  Remote r;
  r.outcome.host = hosts.hosts[static_cast<size_t>(node)].name;
  r.outcome.log = log;
  SpawnSpec spec;
  spec.argv = launch_words(hosts.launch, r.outcome.host);
  spec.argv.push_back(node_line(cwd, argv));
  const Fd log_fd{::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  DDPB_CHECK(log_fd.fd >= 0) << "cannot write " << log << ": " << std::strerror(errno);
  int in[2];
  DDPB_CHECK(::pipe2(in, O_CLOEXEC) == 0) << "pipe: " << std::strerror(errno);
  const Fd read_end{in[0]}, write_end{in[1]};
  spec.output_fd = log_fd.fd;
  spec.stdin_fd = read_end.fd;
  spec.own_process_group = true;
  try {
    r.pid = spawn_process(spec);
    const std::string line = token + "\n";  // a pipe holds it whole: no reader needed yet
    [[maybe_unused]] const ssize_t n = ::write(write_end.fd, line.data(), line.size());
  } catch (const SubprocessError& e) {
    const std::string line = std::string("ddpbench suite: ") + e.what() + "\n";
    [[maybe_unused]] const ssize_t n = ::write(log_fd.fd, line.data(), line.size());
    r.outcome.exit_code = 127;
    r.done = true;
  }
  return r;
}

// Waits up to `grace` (2 s once `stop` is set) for the remote nodes, then stops those left
// (SIGTERM, then SIGKILL).
void finish_remotes(std::vector<Remote>& remotes, std::chrono::duration<double> grace,
                    const std::atomic<bool>* stop) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  bool termed = false;
  while (true) {
    if (stop && stop->load()) grace = std::min(grace, std::chrono::duration<double>(2.0));
    bool all = true;
    for (Remote& r : remotes) {
      if (r.done) continue;
      int status = 0;
      const pid_t got = ::waitpid(r.pid, &status, WNOHANG);
      if (got == r.pid || (got < 0 && errno != EINTR)) {
        r.done = true;
        r.outcome.exit_code = got == r.pid ? exit_code_of(status) : 1;
        ::killpg(r.pid, SIGKILL);  // anything it left in its group here
      } else {
        all = false;
      }
    }
    if (all) return;
    const auto waited = Clock::now() - start;
    if (!termed && waited > grace) {
      for (Remote& r : remotes) {
        if (!r.done) ::killpg(r.pid, SIGTERM);
      }
      termed = true;
    } else if (termed && waited > grace + std::chrono::seconds(5)) {
      for (Remote& r : remotes) {
        if (!r.done) ::killpg(r.pid, SIGKILL);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

int SuiteHosts::nodes_for(int world) const {
  if (hosts.empty() || world <= hosts.front().slots) return 1;
  const int slots = hosts.front().slots;
  // The fewest hosts that hold it with the same ranks on each.
  for (int nodes = (world + slots - 1) / slots; nodes <= static_cast<int>(hosts.size()); ++nodes) {
    if (world % nodes == 0) return nodes;
  }
  DDPB_USAGE_FAIL() << "world size " << world << " does not spread evenly over " << hosts.size()
                    << " hosts of " << slots
                    << " slots (Note [Runs across hosts]: each host a run spans holds as many "
                       "of its ranks)";
  return 0;
}

SuiteHosts read_suite_hosts(const std::string& path, const std::string& launch) {
  std::string text;
  try {
    text = read_input_file(path, kMaxHostsFileBytes);
  } catch (const InputFileError& e) {
    DDPB_USAGE_FAIL() << "--hosts: cannot read " << e.what();
  }
  SuiteHosts h;
  if (!launch.empty()) h.launch = launch;
  DDPB_USAGE_CHECK(h.launch.find("{host}") != std::string::npos)
      << "--launch must name {host}, got '" << h.launch << "'";
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    line = line.substr(0, line.find('#'));
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{} line {}", path, number);
    SuiteHost host = parse_host_line(line, where);
    for (const SuiteHost& other : h.hosts) {
      DDPB_USAGE_CHECK(other.name != host.name) << where << ": host " << host.name << " twice";
    }
    DDPB_USAGE_CHECK(h.hosts.empty() || h.hosts.front().slots == host.slots)
        << where << ": every host needs the same slots (" << h.hosts.front().slots
        << " on the first), got " << host.slots;
    h.hosts.push_back(std::move(host));
  }
  DDPB_USAGE_CHECK(!h.hosts.empty()) << "--hosts " << path << " names no host";
  check_first_host_is_here(h.hosts.front(), "--hosts " + path);
  launch_words(h.launch, h.hosts.front().name);  // its program is on PATH
  return h;
}

std::vector<reports::SuiteHostInfo> host_infos(const SuiteHosts& hosts) {
  std::vector<reports::SuiteHostInfo> out;
  for (const SuiteHost& h : hosts.hosts) out.push_back({h.name, h.address, h.slots});
  return out;
}

SuiteHosts hosts_from_record(const std::vector<reports::SuiteHostInfo>& infos,
                             const std::string& launch, const std::string& what) {
  SuiteHosts h;
  h.launch = launch;
  DDPB_USAGE_CHECK(!infos.empty() && h.launch.find("{host}") != std::string::npos)
      << what << ": \"hosts\" needs a host and \"launch\" {host}";
  for (const reports::SuiteHostInfo& i : infos) {
    DDPB_USAGE_CHECK(host_name_ok(i.name) && comm::ipv4_of(i.address) == i.address &&
                     i.slots == infos.front().slots && i.slots >= 1 && i.slots <= kMaxSlots)
        << what << ": host '" << i.name << "' is not a host of a suite across hosts";
    h.hosts.push_back({i.name, i.address, static_cast<int>(i.slots)});
  }
  check_first_host_is_here(h.hosts.front(), what);
  launch_words(h.launch, h.hosts.front().name);
  return h;
}

ChildResult run_across_hosts(ChildSpec node0, const SuiteHosts& hosts, int nnodes,
                             double collective_timeout_s, std::vector<NodeOutcome>* others) {
  const std::string address = hosts.hosts.front().address;
  const int port = comm::find_free_port(address);
  const std::string token = comm::random_token();
  const std::vector<std::string> argv = node0.argv;
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "DDPBENCH_STORE_TOKEN=", 21) != 0) env.emplace_back(*e);
  }
  env.push_back("DDPBENCH_STORE_TOKEN=" + token);
  std::vector<Remote> remotes;
  ChildResult result;
  try {
    for (int node = 1; node < nnodes; ++node) {
      const std::string log =
          node0.log_path.substr(0, node0.log_path.rfind(".log")) + fmt::format("-node{}.log", node);
      remotes.push_back(start_remote(
          hosts, node, with_node_flags(argv, nnodes, node, address, port), node0.cwd, token, log));
    }
    node0.argv = with_node_flags(argv, nnodes, 0, address, port);
    node0.env = &env;
    result = run_child(node0);
  } catch (...) {
    finish_remotes(remotes, std::chrono::duration<double>(0), nullptr);  // none outlives us
    throw;
  }
  // Once node 0 ended, the others follow within their collective timeout; stopped by Ctrl-C,
  // they are stopped too, after a moment to say why.
  finish_remotes(remotes, std::chrono::duration<double>(collective_timeout_s + 10), node0.stop);
  others->clear();
  for (const Remote& r : remotes) others->push_back(r.outcome);
  return result;
}

}  // namespace ddpb::bench
