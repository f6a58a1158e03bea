// A process-wide sign of life of the training step, read by the step watchdog
// (bench/run/step_watchdog.h).
//
// Note [Step watchdog]
// ~~~~~~~~~~~~~~~~~~~~
// Collectives have a timeout of their own (--timeout), but a rank can stall outside any
// collective: a library spinning on an allocation that never succeeds under `ulimit -v`, a
// lost device, a deadlock in compute. Its peers then wait in their next collective and time
// out, and the launcher blames a rank that is "behind" without saying why. So every op counts
// as progress (ops.cpp: one relaxed increment per op, where the stream-order sanitizer looks),
// and so does every phase a PhaseTimer begins, whose name is kept; a watchdog thread declares
// the step stalled when neither moved for --timeout while no collective was in flight (a
// collective in flight is the collectives' own timeout's to judge).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ddpb::progress {

// One unit of progress (an op issued); cheap enough for every op.
void note_op() noexcept;
// A phase began (PhaseTimer::begin): progress, and the phase a stall is reported in.
void note_phase(std::string_view phase);
// The training loop's step (1-based; 0 before the first).
void note_step(int64_t step);

struct Mark {
  uint64_t count = 0;          // ops and phases so far
  int64_t step = 0;            // the step in progress
  std::string phase;           // the last phase begun ("" before the first)
  int64_t phase_start_ns = 0;  // when it began (steady clock; 0 before the first)
};
Mark current();

}  // namespace ddpb::progress
