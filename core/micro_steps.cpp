#include "core/micro_steps.h"

#include "core/nvtx.h"
#include "core/ops.h"
#include "core/step_phase.h"

namespace ddpb {

std::vector<Tensor> run_micro_steps(int64_t count, const Device& device,
                                    const std::function<MicroBatch()>& next_batch,
                                    const LossFn& loss_fn,
                                    const std::function<void()>& in_first_forward,
                                    PhaseTimer& timer, const MicroStepFns& fns) {
  Tensor scale;
  if (count > 1) {  // Note [Micro-steps]: each micro-loss divided by K
    scale = Tensor::empty({1}, DType::F32, device);
    ops::fill(scale, 1.0f / static_cast<float>(count));
  }
  std::vector<Tensor> losses;
  for (int64_t j = 0; j < count; ++j) {
    const MicroBatch batch = next_batch();
    timer.begin(step_phase_name(StepPhase::Forward));
    if (j == 0 && in_first_forward) in_first_forward();
    autograd::Var loss;
    {
      nvtx::Range r("forward", nvtx::Category::Forward);
      loss = loss_fn(fns.forward(batch.x), batch.y);
    }
    timer.begin(step_phase_name(StepPhase::BackwardCompute));
    fns.backward(loss, scale, j, count);
    losses.push_back(loss.data());
  }
  return losses;
}

}  // namespace ddpb
