// The micro-steps of one training step, as the designs whose ranks are processes run them
// (DDP, FSDP): each micro-batch's forward and backward, timed in the step's phases.
//
// Note [Micro-steps]
// ~~~~~~~~~~~~~~~~~~
// With --accumulate K a step is K micro-steps, each loss divided by K, so that K micro-steps
// equal one step on K times the batch. The forward runs in the forward phase (the first
// micro-step's also runs `in_first_forward`, where a fault injected into this rank's compute
// shows), the backward in backward_compute; what follows a backward differs by design (DDP
// synchronises only the last micro-step's gradients, FSDP every micro-step's), so the design's
// `backward` runs it, in whatever phase it opens. The losses come back unread: reading one
// would synchronise the device.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/autograd.h"
#include "core/device.h"
#include "core/phase_timer.h"
#include "core/tensor.h"

namespace ddpb {

// One micro-batch of a step: the input and its targets.
struct MicroBatch {
  Tensor x, y;
};
using LossFn = std::function<autograd::Var(const autograd::Var& logits, const Tensor& targets)>;

struct MicroStepFns {
  std::function<autograd::Var(const Tensor& x)> forward;
  // Micro-step `index` of `count`: backward of `loss` seeded with `scale` (undefined: 1), and
  // what the design does after it; it leaves the phase it ends in open, or closes it.
  std::function<void(const autograd::Var& loss, const Tensor& scale, int64_t index, int64_t count)>
      backward;
};

std::vector<Tensor> run_micro_steps(int64_t count, const Device& device,
                                    const std::function<MicroBatch()>& next_batch,
                                    const LossFn& loss_fn,
                                    const std::function<void()>& in_first_forward,
                                    PhaseTimer& timer, const MicroStepFns& fns);

}  // namespace ddpb
