// The step watchdog (bench/run/step_watchdog.h, Note [Step watchdog]): a run whose step makes no
// progress outside a collective for the timeout ends with one line naming the step and phase.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "bench/run/step_watchdog.h"
#include "core/progress.h"

namespace ddpb::bench {
namespace {

using namespace std::chrono_literals;

TEST(StepWatchdog, AStallOutsideACollectiveEndsTheProcessNamingStepAndPhase) {
  EXPECT_EXIT(
      {
        progress::note_step(7);
        progress::note_phase("forward");
        StepWatchdog watchdog(300ms, 1, [] { return false; });
        std::this_thread::sleep_for(5s);  // a library spinning without issuing ops
      },
      ::testing::ExitedWithCode(1),
      "rank 1 failed at step 7: no progress for 0\\.[3-9] s in phase forward outside any "
      "collective");
}

TEST(StepWatchdog, ProgressOrACollectiveInFlightKeepsItQuiet) {
  {
    StepWatchdog watchdog(200ms, std::nullopt, [] { return false; });
    for (int i = 0; i < 60; ++i) {  // 600 ms of steady progress
      progress::note_op();
      std::this_thread::sleep_for(10ms);
    }
  }
  StepWatchdog excused(200ms, std::nullopt, [] { return true; });
  std::this_thread::sleep_for(600ms);  // no progress, but a collective's own timeout judges
  SUCCEED();
}

}  // namespace
}  // namespace ddpb::bench
