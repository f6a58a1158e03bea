// Row-major (batched) matrix multiply on cuBLASLt (CUDA builds only).
//
// One cuBLASLt handle per device, created on first use and shared by every thread (a
// cuBLASLt handle holds no stream, so sharing is safe). Scratch comes from the stream's own
// workspace (CudaStream::gemm_workspace), so GEMMs on two streams never share it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "core/device.h"
#include "core/dtype.h"
#include "core/ops.h"

namespace ddpb::gpu {

// Where and how a GEMM runs.
struct GemmContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  ops::MathMode math_mode = ops::MathMode::FP32;
};

// The current stream of `device`, its workspace and ops::math_mode().
GemmContext gemm_context(const Device& device);

// For each batch item i (row-major, pointers advanced by i * stride elements):
//   c_i [m,n] = act(alpha * op(a_i) @ op(b_i) + beta * c_i + bias)
// a_i: [m,k] ([k,m] if trans_a); b_i: [k,n] ([n,k] if trans_b); bias: [n] or null, added to
// every row (batch == 1 only). beta == 0 never reads c.
// a and b are both f32 or both bf16 (ab_dtype); c is f32, or bf16 with bf16 a and b; the bias
// is f32 either way. bf16 operands accumulate in f32 whatever ops::math_mode() says, and a
// bf16 c is rounded once, at the end (Note [bf16 GEMM outputs round once], cuda_gemm.cpp),
// through `staging` where our own pass has work to do.
struct Matmul {
  const void* a = nullptr;
  bool trans_a = false;
  const void* b = nullptr;
  bool trans_b = false;
  void* c = nullptr;
  DType ab_dtype = DType::F32;
  DType c_dtype = DType::F32;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
  const float* bias = nullptr;
  ops::Activation act = ops::Activation::None;
  int64_t batch = 1;
  int64_t stride_a = 0;
  int64_t stride_b = 0;
  int64_t stride_c = 0;
  // Allocates and returns matmul_staging_floats(*this) floats of device scratch. Called only
  // when the GEMM turns out to need them: a bf16 GEMM whose bias cuBLASLt fuses needs none.
  std::function<float*()> staging;
};

// The f32 staging a GEMM may need: batch * m * n for a bf16 c with a bias, an activation or
// k == 0, else 0. The caller allocates it (cuda_kernels.h: launchers do not allocate).
int64_t matmul_staging_floats(const Matmul& mm);

// Enqueues the GEMM on ctx.stream. The bias is fused as cuBLASLt's BIAS epilogue when
// cuBLASLt offers it for the problem; the activation always runs as our own kernel after the
// product (Note [GEMM epilogues keep NaN], core/cuda/gemm_epilogue.h).
void launch_matmul(const GemmContext& ctx, const Matmul& mm);

}  // namespace ddpb::gpu
