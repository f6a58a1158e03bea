// Starting a child process from a multi-threaded program: the launcher's ranks and the suite's
// runs.
//
// Note [Spawning from threads]
// After fork() in a process with threads, the child holds copies of locks that other threads
// may have held (malloc's among them), so until exec it may make only async-signal-safe
// calls: no allocation, no strerror, no setenv. Everything the child needs (argv and envp as
// pointer arrays, the /dev/null path) is therefore built before fork. That exec failed is
// learned through a close-on-exec pipe: the child writes its errno there and exits 127, the
// pipe closes without a byte when exec succeeds, and the parent turns a byte into an error
// naming the program, so a missing executable fails in the parent, in words.
// A child may ask to die with its parent (PR_SET_PDEATHSIG); since the parent may have died
// before the request took effect, the child then checks that its parent is still the one
// that forked it.
//
// Free of the runtime (POSIX and the standard library), like all of base/.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace ddpb {

class SubprocessError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is the executable's path (no PATH search)
  const std::vector<std::string>* env = nullptr;  // "K=V" entries; nullptr: ours
  std::string cwd;                                // empty: ours
  int output_fd = -1;                             // the child's stdout and stderr; -1: ours
  bool stdin_from_dev_null = false;
  int stdin_fd = -1;  // the child's stdin (a pipe's read end); -1: ours, or /dev/null above
  // A process group of its own (set in the parent as well, so that killpg works at once).
  bool own_process_group = false;
  // SIGINT, SIGTERM and SIGPIPE back to their defaults: an ignored signal stays ignored
  // across exec, and a child must not inherit a parent's choice to ignore them.
  bool default_signals = true;
  int parent_death_signal = SIGTERM;  // sent to the child when we die; 0: none
};

// Starts the child (Note [Spawning from threads]); throws SubprocessError when fork fails
// or the program cannot be executed (the child is reaped then).
pid_t spawn_process(const SpawnSpec& spec);

// The command that starts this very program again, to which a caller appends the arguments:
// {the executable's absolute path}, or, for a program started through a dynamic loader
// (gpu_check.sh's bundled glibc: `ld-linux.so --library-path DIRS ddpbench ARGS`, where
// /proc/self/exe is the loader), {the loader, its options, the program}, so that a child
// starts the way this process did. Throws SubprocessError when /proc cannot say.
std::vector<std::string> self_command();

// A process as it was found: its pid and its start time (clock ticks after boot, field 22 of
// /proc/PID/stat), which a later process that reuses the pid does not share.
struct ProcessRef {
  pid_t pid = -1;
  unsigned long long start_ticks = 0;
  bool operator==(const ProcessRef&) const = default;
};

// The processes running this very executable (/proc/self/exe; a binary rebuilt since it
// started counts as itself) that descend from `ancestor` (the ranks that mpirun started,
// directly or through a daemon of its own). Reads /proc.
std::vector<ProcessRef> self_processes_below(pid_t ancestor);
// Whether `p` still runs: the same process (its start time), not a zombie.
bool still_running(const ProcessRef& p);
// Whether `pid` is stopped (SIGSTOP, SIGTSTP, or a debugger's trace stop), from /proc.
bool is_stopped(pid_t pid);

// A waitpid status as a shell reports it: the exit code, or 128 + the signal's number.
int exit_code_of(int wait_status);

}  // namespace ddpb
