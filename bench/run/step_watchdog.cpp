#include "bench/run/step_watchdog.h"

#include <unistd.h>

#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "comm/flight_recorder.h"
#include "core/nvtx.h"

namespace ddpb::bench {

StepWatchdog::StepWatchdog(std::chrono::milliseconds timeout, std::optional<int> rank,
                           std::function<bool()> excused)
    : timeout_(timeout), rank_(rank), excused_(std::move(excused)), thread_([this] { watch(); }) {}

StepWatchdog::~StepWatchdog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

void StepWatchdog::watch() {
  nvtx::name_thread("ddpb-watchdog");
  using Clock = std::chrono::steady_clock;
  // Looks often enough that a stall is reported within a tenth of the timeout of it.
  const auto poll =
      std::clamp(timeout_ / 10, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  progress::Mark last = progress::current();
  Clock::time_point since = Clock::now();
  std::unique_lock lock(mutex_);
  while (!stop_cv_.wait_for(lock, poll, [&] { return stop_; })) {
    const progress::Mark now = progress::current();
    if (now.count != last.count || excused_()) {
      last = now;
      since = Clock::now();
      continue;
    }
    const auto stalled = Clock::now() - since;
    if (stalled >= timeout_) fire(std::chrono::duration<double>(stalled).count(), now);
  }
}

void StepWatchdog::fire(double stalled_s, const progress::Mark& at) {
  const std::string head = rank_ ? "ddpbench: rank " + std::to_string(*rank_) + " failed at step " +
                                       std::to_string(at.step) + ": "
                                 : "ddpbench: failed: step " + std::to_string(at.step) + " made ";
  const std::string line =
      head + "no progress for " + fmt::format("{:.1f}", stalled_s) + " s in phase " +
      (at.phase.empty() ? std::string("(none yet)") : at.phase) +
      " outside any collective (the step watchdog of --timeout: compute or memory stalled, "
      "such as a library spinning on an allocation under a memory limit)\n";
  std::fflush(stdout);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  const std::string dumped = comm::dump_flight_recorder(line.substr(0, line.size() - 1));
  if (!dumped.empty())
    std::fprintf(stderr, "ddpbench: flight recorder dumped to %s\n", dumped.c_str());
  std::fflush(stderr);
  ::_exit(1);  // the stalled thread cannot be unwound
}

}  // namespace ddpb::bench
