// The CUDA GEMM's epilogue choice, tested where there is no GPU: cuBLASLt fuses the bias only,
// and every activation is left to our NaN-keeping kernel (Note [GEMM epilogues keep NaN]).
#include "core/cuda/gemm_epilogue.h"

#include <gtest/gtest.h>

namespace ddpb::gpu {
namespace {

using ops::Activation;

TEST(GemmEpilogue, CublasLtFusesTheBiasAndNeverAnActivation) {
  for (bool bias : {false, true}) {
    for (Activation act : {Activation::None, Activation::ReLU, Activation::GeLU}) {
      const EpiloguePlan plan = plan_epilogue(bias, act);
      EXPECT_EQ(plan.fused, bias ? FusedEpilogue::Bias : FusedEpilogue::None)
          << "bias " << bias << ", activation " << static_cast<int>(act);
      EXPECT_EQ(plan.separate, act) << "the activation must run as our own kernel";
    }
  }
}

TEST(GemmEpilogue, APlainProductAsksForNothing) {
  EXPECT_EQ(plan_epilogue(false, Activation::None),
            (EpiloguePlan{FusedEpilogue::None, Activation::None}));
}

}  // namespace
}  // namespace ddpb::gpu
