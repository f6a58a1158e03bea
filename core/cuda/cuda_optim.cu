// Fused optimizer steps: one kernel reads each parameter, gradient and state element once
// and writes the updated values in place (PyTorch's formulas, as documented in core/ops.h).
#include <cuda_runtime.h>

#include <cmath>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/cuda_kernels.h"

namespace ddpb::gpu {
namespace {

// ============================== kernels ==============================================

// g = grad + wd * param; buf = first_step ? g : momentum * buf + g; param -= lr * buf.
// Without momentum the buffer is never touched.
template <bool kMomentum>
__global__ void sgd_step_kernel(float* param, const float* grad, float* momentum_buf, int64_t n,
                                float lr, float momentum, float weight_decay, bool first_step) {
  for (int64_t i = global_thread_index(); i < n; i += global_thread_count()) {
    const float p = param[i];
    float update = grad[i] + weight_decay * p;
    if constexpr (kMomentum) {
      update = first_step ? update : momentum * momentum_buf[i] + update;
      momentum_buf[i] = update;
    }
    param[i] = p - lr * update;
  }
}

// param *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// param -= lr * (m / bias1) / (sqrt(v / bias2) + eps), arranged as PyTorch does:
// param -= step_size * m / (sqrt(v) / sqrt(bias2) + eps) with step_size = lr / bias1.
__global__ void adamw_step_kernel(float* param, const float* grad, float* m, float* v, int64_t n,
                                  float beta1, float beta2, float eps, float decay, float step_size,
                                  float bias2_sqrt) {
  for (int64_t i = global_thread_index(); i < n; i += global_thread_count()) {
    const float g = grad[i];
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] = param[i] * decay - step_size * mi / (sqrtf(vi) / bias2_sqrt + eps);
  }
}

}  // namespace

// ============================== launchers ============================================

void launch_sgd_step(float* param, const float* grad, float* momentum_buf, int64_t n, float lr,
                     float momentum, float weight_decay, bool first_step, cudaStream_t stream) {
  DDPB_CHECK(n >= 0) << "sgd_step over " << n << " elements";
  if (n == 0) return;
  if (momentum != 0.0f) {
    DDPB_CHECK(momentum_buf != nullptr)
        << "sgd_step with momentum " << momentum << " needs a momentum buffer";
    sgd_step_kernel<true><<<elementwise_blocks(n), kElementwiseBlock, 0, stream>>>(
        param, grad, momentum_buf, n, lr, momentum, weight_decay, first_step);
  } else {
    sgd_step_kernel<false><<<elementwise_blocks(n), kElementwiseBlock, 0, stream>>>(
        param, grad, nullptr, n, lr, momentum, weight_decay, first_step);
  }
  CUDA_LAUNCH_CHECK() << "sgd_step_kernel";
}

void launch_adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                       float beta1, float beta2, float eps, float weight_decay, int64_t step,
                       cudaStream_t stream) {
  DDPB_CHECK(n >= 0) << "adamw_step over " << n << " elements";
  DDPB_CHECK(step >= 1) << "adamw_step: step counts from 1, got " << step;
  if (n == 0) return;
  // Bias corrections in double on the host: beta^step for large steps is where float loses.
  const double bias1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  const double bias2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step));
  const auto step_size = static_cast<float>(lr / bias1);
  const auto bias2_sqrt = static_cast<float>(std::sqrt(bias2));
  const float decay = 1.0f - lr * weight_decay;
  adamw_step_kernel<<<elementwise_blocks(n), kElementwiseBlock, 0, stream>>>(
      param, grad, m, v, n, beta1, beta2, eps, decay, step_size, bias2_sqrt);
  CUDA_LAUNCH_CHECK() << "adamw_step_kernel";
}

}  // namespace ddpb::gpu
