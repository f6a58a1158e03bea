// What the launchers (comm/launcher.cpp's own, comm/mpirun_launch.cpp's through mpirun)
// share: each rank's output and first failure, the stop signals, the ranks' environment.
// Internal to comm/.
#pragma once

#include <signal.h>

#include <chrono>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "base/subprocess.h"

namespace ddpb::comm::launcher {

using Clock = std::chrono::steady_clock;
constexpr size_t kTailLines = 20;

// The signal that asked the launcher to stop (SIGINT or SIGTERM), 0 if none. Set by the
// handler, read by the supervision loop, which forwards it to the ranks.
extern volatile sig_atomic_t g_stop_signal;

// Installs the handlers for the launcher's lifetime and restores the old ones after.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

struct Child {
  int rank = 0;  // global rank (Note [Launcher nodes])
  pid_t pid = -1;
  int out_fd = -1;  // read end of the child's stdout+stderr
  std::string partial;
  std::deque<std::string> tail;
  bool exited = false;
  int status = 0;
  Clock::time_point eof{Clock::time_point::max()};
  // When it first reported a failure ("ddpbench: rank R failed at step S: ...", "ddpbench:
  // failed: ...", "ddpbench: error: ..."), what it said, and whether that was only about losing
  // a peer (a broken connection, a collective that timed out waiting).
  Clock::time_point said_failed{Clock::time_point::max()};
  std::string failure_line;
  bool peer_loss = false;
  Clock::time_point stopped_since{Clock::time_point::max()};  // seen stopped from then on
};

// The message of a line in which a rank reports its own failure, or "" for any other line.
std::string failure_message(const std::string& line);
// Whether a failure is only the echo of another rank's (Note [The first failure wins]).
bool is_peer_loss(const std::string& message);
// A wait status in words: "exited with code 1", "was killed by signal 9 (SIGKILL)", and for a
// code above 128 the signal it stands for: "exited with code 137: a process was killed by
// signal 9 (SIGKILL)".
std::string describe_status(int status);
// "SIGKILL" for 9; "" for a signal without a POSIX name.
std::string signal_name(int sig);
// Prints "[rank R] line", keeps it in the rank's tail, and notes a failure it reports; `now`
// is the time of the poll round that read it.
void emit_line(Child& c, const std::string& line, Clock::time_point now);
// Starts `child` with its stdout and stderr into a new pipe whose read end goes to *out_fd;
// `what` names it in the error when it cannot start ("rank 1", "mpirun").
pid_t spawn_with_output(SpawnSpec& child, const std::string& what, int* out_fd);
// This process's environment with `vars` set (replacing any of the same name).
std::vector<std::string> environment_with(
    const std::vector<std::pair<std::string, std::string>>& vars);

}  // namespace ddpb::comm::launcher
