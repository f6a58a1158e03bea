// The phases a training step is timed in, one vocabulary for every design (Note [One phase
// vocabulary]).
//
// Note [One phase vocabulary]
// Single-device, DP and DDP steps are timed in named phases, and the records, the verdict
// and the projection compare them by name. Each design uses a subset, in this order:
//   single  data, forward, backward, optimizer
//   DP      data, scatter, replicate, forward, gather, loss, backward, reduce, optimizer
//   DDP     data, buffer_broadcast, forward, sync_bn, backward_compute, comm_exposed,
//           optimizer
// "backward" is a design's whole backward; DDP splits its own into the compute
// (backward_compute) and the communication left after it (comm_exposed), and takes
// SyncBatchNorm's collectives out of forward and backward into sync_bn, so that the phases
// still add up to the step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ddpb {

enum class StepPhase : uint8_t {
  Data,
  Scatter,
  Replicate,
  BufferBroadcast,
  Forward,
  SyncBn,
  Gather,
  Loss,
  Backward,
  BackwardCompute,
  CommExposed,
  Reduce,
  Optimizer,
};
inline constexpr size_t kNumStepPhases = 13;

// The name records carry ("backward_compute").
constexpr const char* step_phase_name(StepPhase p) {
  constexpr const char* kNames[kNumStepPhases] = {
      "data", "scatter",  "replicate",        "buffer_broadcast", "forward", "sync_bn",  "gather",
      "loss", "backward", "backward_compute", "comm_exposed",     "reduce",  "optimizer"};
  return kNames[static_cast<size_t>(p)];
}

// One phase's time in one step.
struct PhaseTime {
  StepPhase phase;
  double ms = 0;
};

}  // namespace ddpb
