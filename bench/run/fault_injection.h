// --inject-fault KIND@rank=R,step=S: deliberate faults, to prove how ddpbench reacts.
//   crash      the rank exits abruptly (_exit, no clean-up) at the start of step S
//   hang       the rank stops issuing collectives from step S (sleeps until killed)
//   slow=MS    the rank sleeps MS milliseconds at the start of every step from S: a straggler
//   slow-backward=MS  the rank sleeps MS ms inside every backward from step S, after its first
//              gradient hook (the Reducer arranges it): a straggler inside backward
//   slow-data=MS  the rank's loader takes MS ms longer for every batch from step S
//   corrupt-grad  a NaN in one gradient of the rank at step S (the runner arranges it with
//              Reducer::corrupt_next_gradient; --check-finite catches it)
//   store-drop the rank's TCPStore connection is closed at step S; its next store request
//              reconnects once (or fails with a clear error)
#pragma once

#include <cstdint>
#include <string>

#include "comm/store.h"
#include "impl_ddp/reducer.h"

namespace ddpb::bench {

struct FaultSpec {
  enum class Kind {
    None,
    Crash,
    Hang,
    Slow,
    SlowBackward,
    SlowData,
    CorruptGrad,
    StoreDrop
  } kind = Kind::None;
  int rank = 0;
  int64_t step = 1;
  int64_t slow_ms = 0;
};

// Parses the flag's value; throws UsageError naming the problem.
FaultSpec parse_fault(const std::string& text);
// Applies the fault, if it targets this rank and step.
void maybe_inject_fault(const FaultSpec& fault, int rank, int64_t step);
// The DDP faults that act before a step, if they target this rank and step: corrupt-grad (the
// Reducer's next gradient), store-drop (a TCPStore's connection) and slow-backward (the
// Reducer's next backward).
// slow-data: how much longer this rank's loader takes for this step's batches (0: no fault).
double data_fault_delay_ms(const FaultSpec& fault, int rank, int64_t step);
void inject_ddp_step_fault(const FaultSpec& fault, int rank, int64_t step, ddp::Reducer& reducer,
                           comm::Store& store);
// store-drop alone, for a design without DDP's Reducer (FSDP).
void inject_store_fault(const FaultSpec& fault, int rank, int64_t step, comm::Store& store);

}  // namespace ddpb::bench
