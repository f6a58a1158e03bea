// What a GEMM's bias and activation become on CUDA: the part cuBLASLt fuses into the matmul
// and the part our own element-wise kernel applies afterwards. Host-only and free of CUDA
// headers, so that CPU builds test the choice (tests/core/test_gemm_epilogue.cpp).
//
// Note [GEMM epilogues keep NaN]
// cuBLASLt fuses only the bias. Its RELU epilogue is max(x, 0) with IEEE maxNum semantics,
// which returns the number and so maps NaN to 0; the project's NaN rule (CPU ops, our CUDA
// ReLU, CudaParity.NanPropagatesAsOnCpu) keeps NaN, and a GPU-only NaN-to-0 would hide a
// diverged mlp or embed run. Its GELU epilogue may use an approximate tanh, far from the
// parity tests' 1e-4 at negative inputs. So the activation always runs as
// launch_bias_activation (bias null), which keeps NaN and uses ops::gelu_forward's formula.
// The extra pass costs one read and write of the output (cuda_gemm_bench's "act pass").
#pragma once

#include "core/ops.h"

namespace ddpb::gpu {

// The cuBLASLt epilogue asked for: nothing, or the bias added to every row.
enum class FusedEpilogue { None, Bias };

struct EpiloguePlan {
  FusedEpilogue fused = FusedEpilogue::None;
  ops::Activation separate = ops::Activation::None;  // applied by our kernel after the GEMM
  bool operator==(const EpiloguePlan&) const = default;
};

constexpr EpiloguePlan plan_epilogue(bool has_bias, ops::Activation act) {
  return {has_bias ? FusedEpilogue::Bias : FusedEpilogue::None, act};
}

}  // namespace ddpb::gpu
