// The step watchdog of a run (Note [Step watchdog] in core/progress.h): a thread that ends the
// process when the training step makes no progress for the timeout while no collective is in
// flight. It says so on one line, naming the step and the phase (a DDP rank in the form its
// launcher recognises: "ddpbench: rank R failed at step S: ..."), dumps the flight recorder
// and exits with 1.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/progress.h"

namespace ddpb::bench {

class StepWatchdog {
 public:
  // `excused()` says whether the stall is another timeout's to judge (a collective in flight).
  // `rank`: a DDP rank's; nullopt for single and DP (one process).
  StepWatchdog(std::chrono::milliseconds timeout, std::optional<int> rank,
               std::function<bool()> excused);
  ~StepWatchdog();
  StepWatchdog(const StepWatchdog&) = delete;
  StepWatchdog& operator=(const StepWatchdog&) = delete;

 private:
  void watch();
  [[noreturn]] void fire(double stalled_s, const progress::Mark& at);

  const std::chrono::milliseconds timeout_;
  const std::optional<int> rank_;
  const std::function<bool()> excused_;
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;   // guarded by mutex_
  std::thread thread_;  // last: starts after the members it reads
};

}  // namespace ddpb::bench
