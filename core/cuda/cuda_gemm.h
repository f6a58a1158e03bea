// Row-major (batched) matrix multiply on cuBLASLt (CUDA builds only).
//
// One cuBLASLt handle per device, created on first use and shared by every thread (a
// cuBLASLt handle holds no stream, so sharing is safe). Scratch comes from the stream's own
// workspace (CudaStream::gemm_workspace), so GEMMs on two streams never share it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/device.h"
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
struct Matmul {
  const float* a = nullptr;
  bool trans_a = false;
  const float* b = nullptr;
  bool trans_b = false;
  float* c = nullptr;
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
};

// Enqueues the GEMM on ctx.stream. The bias is fused as cuBLASLt's BIAS epilogue when
// cuBLASLt offers it for the problem; the activation always runs as our own kernel after the
// product (Note [GEMM epilogues keep NaN], core/cuda/gemm_epilogue.h).
void launch_matmul(const GemmContext& ctx, const Matmul& mm);

}  // namespace ddpb::gpu
