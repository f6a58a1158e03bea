// Runs one command of a suite as a child process: its own process group (so a hung DDP run
// and all its ranks can be killed together), output to a log file, a wall-clock limit, and a
// stop flag for Ctrl-C. The child dies with the suite (PR_SET_PDEATHSIG).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

namespace ddpb::bench {

struct ChildResult {
  int exit_code = 0;       // the child's exit code, or 128 + signal when a signal ended it
  bool timed_out = false;  // killed at the wall-clock limit
  bool stopped = false;    // ended because *stop became true
  double seconds = 0;
};

struct ChildSpec {
  std::vector<std::string> argv;  // argv[0] is the executable's path
  std::string cwd;
  std::string log_path;  // stdout and stderr, truncated first
  double timeout_s = 0;  // 0: no limit
  const std::atomic<bool>* stop = nullptr;
  std::function<void()> tick;  // called about 5 times a second while the child runs
  const std::vector<std::string>* env = nullptr;  // "K=V" entries; nullptr: ours
};

// Throws ddpb::Error when the child cannot be started (fork failure, unwritable log).
ChildResult run_child(const ChildSpec& spec);

// The last non-empty line of `path` that says why a run failed ("ddpbench: ..."), or else its
// last non-empty line; at most 400 characters.
std::string failure_line(const std::string& path);

}  // namespace ddpb::bench
