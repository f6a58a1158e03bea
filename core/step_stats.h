// What one training step of any design did: its loss and time, its phases, and the
// collectives it ran with their bytes and times (Note [Step stats]).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/step_phase.h"

namespace ddpb {

// Note [Step stats]
// ~~~~~~~~~~~~~~~~~
// Every design's step returns a StepStats (DataParallel's DpStepStats and DDP's DdpStepStats
// extend it with what only they have: per-device times, buckets). Its collectives are every
// transfer between devices or ranks the step made, each with its collective kind, bytes and
// times on the step's clock (milliseconds since clock_zero_ns, the host's steady clock):
//  - DDP: each bucket's collectives as the Reducer timed them (issued, started, completed),
//    the buffer broadcast's and SyncBatchNorm's (host-timed);
//  - DP: scatter, replicate, gather and reduce_add, which run one after another on device 0's
//    stream; their device times laid end to end from the step's start place them.
// Those that synchronise gradients (`gradient`) are the design's communication: the harness
// computes from them, the same way for every design, the communication time (the union of
// their busy intervals), the part exposed after compute_end_ms (when the backward compute
// ended), the overlap, each collective's bus bandwidth and its trace span
// (bench/run/step_outcome.h, bench/measure/comm_summary.h).
struct CollectiveTiming {
  std::string op;     // "allreduce", "reduce", "broadcast", "scatter", "gather", "allgather", ...
  std::string name;   // what the trace shows: "allreduce bucket 3", "replicate"
  std::string lane;   // the trace track: "comm bucket 3", "dp reduce"
  int64_t bytes = 0;  // nccl-tests' size: an allgather's output, any other's input
  double launch_ms = 0;    // issued by the host
  double start_ms = 0;     // started on the communication thread or stream
  double complete_ms = 0;  // finished
  bool gradient = false;   // part of the gradient synchronisation
  int64_t group = -1;      // the bucket (FSDP: the unit) it belongs to; -1: none
  int group_size = 0;      // ranks of the group it ran over (FSDP's shard groups); 0: all
};

struct StepStats {
  float loss = 0;
  double step_ms = 0;
  std::vector<PhaseTime> phases;  // those that ran, in order
  std::vector<CollectiveTiming> collectives;
  int64_t clock_zero_ns = 0;  // steady clock: the zero of the collectives' times
  double compute_end_ms = 0;  // when the backward compute ended, on that clock
};

}  // namespace ddpb
