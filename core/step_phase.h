// The phases a training step is timed in, one vocabulary for every design (Note [One phase
// vocabulary]).
//
// Note [One phase vocabulary]
// Single-device, DP and DDP steps are timed in named phases, and the records, the verdict
// and the projection compare them by name. Each design uses a subset, in this order:
//   single  data, forward, backward, optimizer
//   DP      data, scatter, replicate, forward, gather, loss, backward, reduce, optimizer
//   DDP     data, buffer_broadcast, forward, sync_bn, backward_compute, comm_exposed,
//           optimizer; ZeRO (DDP's stages) then param_allgather, PyTorch's variant of it
//           param_broadcast
//   FSDP    data, buffer_broadcast, forward, param_allgather, sync_bn, backward_compute,
//           comm_exposed, optimizer
//   single with --cuda-graph: data, graph (the whole replayed step)
// "backward" is a design's whole backward; DDP and FSDP split their own into the compute
// (backward_compute) and the communication left after it (comm_exposed), and take
// SyncBatchNorm's collectives out of forward and backward into sync_bn, so that the phases
// still add up to the step; FSDP also takes the host's waits for its all-gathers inside
// forward and backward out of them into param_allgather.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
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
  Graph,
  ParamAllGather,
  ParamBroadcast,
};
inline constexpr size_t kNumStepPhases = 16;

// The name records carry ("backward_compute").
constexpr const char* step_phase_name(StepPhase p) {
  constexpr const char* kNames[kNumStepPhases] = {
      "data",      "scatter", "replicate",       "buffer_broadcast", "forward",      "sync_bn",
      "gather",    "loss",    "backward",        "backward_compute", "comm_exposed", "reduce",
      "optimizer", "graph",   "param_allgather", "param_broadcast"};
  return kNames[static_cast<size_t>(p)];
}

// Note [Phase kinds]
// What a phase spends its time on: the input pipeline (data), the model's arithmetic
// (compute: forward, loss, backward, the optimizer step and a replayed CUDA graph of them) or
// moving tensors between devices or ranks (communication: DP's scatter, replicate, gather and
// reduce; DDP's buffer broadcast, SyncBatchNorm and exposed AllReduce; ZeRO's parameter
// all-gather). The critical path adds
// two kinds that no phase has: waiting for another rank (wait) and host time outside every
// phase (host). Run records carry each phase's kind ("kind" beside "phase"), so that reports/
// and the projection group phases from the record alone; this is the one grouping.
enum class PhaseKind : uint8_t { Data, Compute, Communication, Wait, Host };

constexpr const char* phase_kind_name(PhaseKind k) {
  constexpr const char* kNames[] = {"data", "compute", "communication", "wait", "host"};
  return kNames[static_cast<size_t>(k)];
}

constexpr PhaseKind phase_kind(StepPhase p) {
  switch (p) {
    case StepPhase::Data:
      return PhaseKind::Data;
    case StepPhase::Forward:
    case StepPhase::Loss:
    case StepPhase::Backward:
    case StepPhase::BackwardCompute:
    case StepPhase::Optimizer:
    case StepPhase::Graph:
      return PhaseKind::Compute;
    default:
      return PhaseKind::Communication;
  }
}

// The phase a record names ("backward_compute"), or nullopt for a name outside the vocabulary.
constexpr std::optional<StepPhase> step_phase_named(std::string_view name) {
  for (size_t i = 0; i < kNumStepPhases; ++i) {
    if (name == step_phase_name(static_cast<StepPhase>(i))) return static_cast<StepPhase>(i);
  }
  return std::nullopt;
}

// The kind of the phase a record names; host time for a name outside the vocabulary.
constexpr PhaseKind phase_kind_of(std::string_view name) {
  const std::optional<StepPhase> p = step_phase_named(name);
  return p ? phase_kind(*p) : PhaseKind::Host;
}

// One phase's time in one step.
struct PhaseTime {
  StepPhase phase;
  double ms = 0;
};

}  // namespace ddpb
