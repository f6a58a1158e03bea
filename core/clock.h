// The host's steady clock in nanoseconds: the one time base of phase timers, Work start and
// end times, flight records, trace events and SyncBatchNorm records, so that they line up.
#pragma once

#include <chrono>
#include <cstdint>

namespace ddpb {

inline int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace ddpb
