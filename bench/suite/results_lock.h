// The lock a suite holds on its results folder for its whole life.
//
// Note [Results folder lock]
// Two suites on one folder (two `--resume DIR` at once) would run the same runs together,
// spoil each other's timings and record failures that are not. So a suite takes flock(2) on
// DIR/.ddpbench.lock before it writes anything there, exclusively and without waiting; the
// holder's PID is written into the file, and a second suite refuses (usage error) naming it.
// The kernel drops the lock when the holder exits, however it exits: a crashed suite leaves a
// stale file, never a stale lock. The descriptor is close-on-exec, so runs never hold it.
#pragma once

#include <string>

namespace ddpb::bench {

class ResultsLock {
 public:
  // Throws UsageError when another process holds the folder, or the lock cannot be taken.
  explicit ResultsLock(const std::string& dir);
  ~ResultsLock();
  ResultsLock(const ResultsLock&) = delete;
  ResultsLock& operator=(const ResultsLock&) = delete;

  static constexpr const char* kFileName = ".ddpbench.lock";

 private:
  int fd_ = -1;
};

}  // namespace ddpb::bench
