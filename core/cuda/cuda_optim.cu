// Fused optimizer steps: one kernel reads each parameter, gradient and state element once
// and writes the updated values in place (PyTorch's formulas, as documented in core/ops.h),
// for one tensor or for a whole list of them (Note [Multi-tensor apply]).
#include <cuda_runtime.h>

#include <array>
#include <cmath>
#include <span>
#include <vector>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/cuda_kernels.h"

namespace ddpb::gpu {
namespace {

// ============================== element updates ======================================
// One function per optimizer, called by the per-tensor and the multi-tensor kernels alike,
// so that both compute every element with the same operations in the same order.

struct SgdScalars {
  float lr, momentum, weight_decay;
  bool first_step;
};

// g = grad + wd * param; buf = first_step ? g : momentum * buf + g; param -= lr * buf.
// Without momentum the buffer is never touched.
template <bool kMomentum>
__device__ __forceinline__ void sgd_update(float* param, const float* grad, float* momentum_buf,
                                           int64_t i, const SgdScalars& a) {
  const float p = param[i];
  float update = grad[i] + a.weight_decay * p;
  if constexpr (kMomentum) {
    update = a.first_step ? update : a.momentum * momentum_buf[i] + update;
    momentum_buf[i] = update;
  }
  param[i] = p - a.lr * update;
}

// The scalars of one AdamW step, derived on the host by adamw_scalars.
struct AdamwScalars {
  float beta1, beta2, eps, decay, step_size, bias2_sqrt;
};

// param *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// param -= lr * (m / bias1) / (sqrt(v / bias2) + eps), arranged as PyTorch does:
// param -= step_size * m / (sqrt(v) / sqrt(bias2) + eps) with step_size = lr / bias1.
__device__ __forceinline__ void adamw_update(float* param, const float* grad, float* m, float* v,
                                             int64_t i, const AdamwScalars& a) {
  const float g = grad[i];
  const float mi = a.beta1 * m[i] + (1.0f - a.beta1) * g;
  const float vi = a.beta2 * v[i] + (1.0f - a.beta2) * g * g;
  m[i] = mi;
  v[i] = vi;
  param[i] = param[i] * a.decay - a.step_size * mi / (sqrtf(vi) / a.bias2_sqrt + a.eps);
}

AdamwScalars adamw_scalars(float lr, float beta1, float beta2, float eps, float weight_decay,
                           int64_t step) {
  DDPB_CHECK(step >= 1) << "adamw_step: step counts from 1, got " << step;
  // Bias corrections in double on the host: beta^step for large steps is where float loses.
  const double bias1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  const double bias2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step));
  return {beta1,
          beta2,
          eps,
          1.0f - lr * weight_decay,
          static_cast<float>(lr / bias1),
          static_cast<float>(std::sqrt(bias2))};
}

// ============================== per-tensor kernels ===================================

template <bool kMomentum>
__global__ void sgd_step_kernel(float* param, const float* grad, float* momentum_buf, int64_t n,
                                SgdScalars a) {
  for (int64_t i = global_thread_index(); i < n; i += global_thread_count()) {
    sgd_update<kMomentum>(param, grad, momentum_buf, i, a);
  }
}

__global__ void adamw_step_kernel(float* param, const float* grad, float* m, float* v, int64_t n,
                                  AdamwScalars a) {
  for (int64_t i = global_thread_index(); i < n; i += global_thread_count()) {
    adamw_update(param, grad, m, v, i, a);
  }
}

// ============================== multi-tensor apply ===================================
//
// Note [Multi-tensor apply]
// A step over gpt2-small's 148 parameters as one launch per parameter costs 148 launches,
// most of them for tensors far too small to fill the GPU (biases, layer-norm weights), so
// the step is bound by launch overhead, not by memory. As apex's multi_tensor_apply and
// PyTorch's _foreach optimizers do, the list launchers cut every tensor into chunks of
// kChunk elements and describe up to kMaxBlocks chunks of up to kMaxTensors tensors in a
// TensorTable passed by value as the kernel argument (no device memory, no copy to order,
// nothing for a captured --cuda-graph to keep alive: the launch holds its own copy):
// block b updates elements [c * kChunk, min(numel, (c + 1) * kChunk)) of tensor
// block_tensor[b], c = block_chunk[b]. A full table is launched and a new one begun (a
// tensor cut by a full table continues in slot 0 of the next), so a list of T tensors and
// E elements takes about E / (kChunk * kMaxBlocks) + T / kMaxTensors launches: 7 for
// gpt2-small's 148 parameters (124 M elements) instead of 148.
// Invariants: chunks never overlap and every element is in exactly one chunk, so the order
// of blocks does not matter; each element gets the per-tensor kernel's update function with
// the same scalars (sgd_update, adamw_update), so the results are bit-identical to the
// per-tensor launches; empty tensors take no slot. The table stays below the 4 KiB kernel
// parameter limit that every supported driver accepts (static_assert below).
constexpr int kMaxTensors = 36;
constexpr int kMaxBlocks = 320;
constexpr int64_t kChunk = 65536;
constexpr int kMultiTensorBlock = 512;

// kDepth pointers per tensor (param, grad, state...); a null column is never dereferenced.
template <int kDepth>
struct TensorTable {
  float* ptr[kDepth][kMaxTensors];
  int64_t numel[kMaxTensors];
  int32_t block_chunk[kMaxBlocks];
  uint8_t block_tensor[kMaxBlocks];
};
static_assert(sizeof(TensorTable<4>) + 64 <= 4096, "kernel arguments over 4 KiB");
static_assert(kMaxTensors <= 255, "block_tensor is a byte");

// The chunk of block blockIdx.x: ptrs[k] is column k's pointer of its tensor, [begin, end) the
// elements it updates.
template <int kDepth>
struct BlockChunk {
  float* ptrs[kDepth];
  int64_t begin, end;
  __device__ __forceinline__ explicit BlockChunk(const TensorTable<kDepth>& table) {
    const int t = table.block_tensor[blockIdx.x];
    for (int k = 0; k < kDepth; ++k) ptrs[k] = table.ptr[k][t];
    begin = static_cast<int64_t>(table.block_chunk[blockIdx.x]) * kChunk;
    end = min(table.numel[t], begin + kChunk);
  }
};

template <bool kMomentum>
__global__ void sgd_multi_kernel(TensorTable<3> table, SgdScalars a) {
  const BlockChunk<3> c(table);
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) {
    sgd_update<kMomentum>(c.ptrs[0], c.ptrs[1], c.ptrs[2], i, a);
  }
}

__global__ void adamw_multi_kernel(TensorTable<4> table, AdamwScalars a) {
  const BlockChunk<4> c(table);
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) {
    adamw_update(c.ptrs[0], c.ptrs[1], c.ptrs[2], c.ptrs[3], i, a);
  }
}

// Fills tables from the list (ptrs(t) gives tensor t's kDepth pointers, numel[t] its size)
// and calls launch(table, blocks) for each full or final one (Note [Multi-tensor apply]).
template <int kDepth, typename Pointers, typename Launch>
void for_each_table(size_t tensors, const Pointers& ptrs, const std::vector<int64_t>& numel,
                    const Launch& launch) {
  TensorTable<kDepth> table{};
  int slots = 0, blocks = 0;
  for (size_t t = 0; t < tensors; ++t) {
    const int64_t n = numel[t];
    DDPB_CHECK(n >= 0) << "multi-tensor step over " << n << " elements";
    if (n == 0) continue;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    DDPB_CHECK(chunks <= INT32_MAX) << "multi-tensor step over " << n << " elements";
    const std::array<float*, kDepth> p = ptrs(t);
    for (int k = 0; k < kDepth; ++k) table.ptr[k][slots] = p[k];
    table.numel[slots] = n;
    ++slots;
    for (int64_t c = 0; c < chunks; ++c) {
      table.block_tensor[blocks] = static_cast<uint8_t>(slots - 1);
      table.block_chunk[blocks] = static_cast<int32_t>(c);
      ++blocks;
      const bool last_chunk = c == chunks - 1;
      if (blocks < kMaxBlocks && !(last_chunk && slots == kMaxTensors)) continue;
      launch(table, blocks);
      blocks = 0;
      slots = 0;
      if (!last_chunk) {  // the tensor goes on in slot 0 of the next table
        for (int k = 0; k < kDepth; ++k) table.ptr[k][0] = p[k];
        table.numel[0] = n;
        slots = 1;
      }
    }
  }
  if (blocks > 0) launch(table, blocks);
}

}  // namespace

// ============================== launchers ============================================

void launch_sgd_step(float* param, const float* grad, float* momentum_buf, int64_t n, float lr,
                     float momentum, float weight_decay, bool first_step, cudaStream_t stream) {
  DDPB_CHECK(n >= 0) << "sgd_step over " << n << " elements";
  if (n == 0) return;
  const SgdScalars a{lr, momentum, weight_decay, first_step};
  if (momentum != 0.0f) {
    DDPB_CHECK(momentum_buf != nullptr)
        << "sgd_step with momentum " << momentum << " needs a momentum buffer";
    sgd_step_kernel<true>
        <<<elementwise_blocks(n), kElementwiseBlock, 0, stream>>>(param, grad, momentum_buf, n, a);
  } else {
    sgd_step_kernel<false>
        <<<elementwise_blocks(n), kElementwiseBlock, 0, stream>>>(param, grad, nullptr, n, a);
  }
  CUDA_LAUNCH_CHECK() << "sgd_step_kernel";
}

void launch_adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                       float beta1, float beta2, float eps, float weight_decay, int64_t step,
                       cudaStream_t stream) {
  DDPB_CHECK(n >= 0) << "adamw_step over " << n << " elements";
  const AdamwScalars a = adamw_scalars(lr, beta1, beta2, eps, weight_decay, step);
  if (n == 0) return;
  adamw_step_kernel<<<elementwise_blocks(n), kElementwiseBlock, 0, stream>>>(param, grad, m, v, n,
                                                                             a);
  CUDA_LAUNCH_CHECK() << "adamw_step_kernel";
}

void launch_sgd_step_multi(std::span<const SgdTensors> list, float lr, float momentum,
                           float weight_decay, bool first_step, cudaStream_t stream) {
  const bool with_momentum = momentum != 0.0f;
  std::vector<int64_t> numel(list.size());
  for (size_t t = 0; t < list.size(); ++t) {
    numel[t] = list[t].n;
    DDPB_CHECK(!with_momentum || list[t].momentum_buf != nullptr || list[t].n == 0)
        << "sgd_step with momentum " << momentum << " needs a momentum buffer (tensor " << t << ")";
  }
  const SgdScalars a{lr, momentum, weight_decay, first_step};
  auto ptrs = [&](size_t t) {
    const SgdTensors& e = list[t];
    return std::array<float*, 3>{e.param, const_cast<float*>(e.grad),
                                 with_momentum ? e.momentum_buf : nullptr};
  };
  for_each_table<3>(list.size(), ptrs, numel, [&](const TensorTable<3>& table, int blocks) {
    if (with_momentum) {
      sgd_multi_kernel<true><<<blocks, kMultiTensorBlock, 0, stream>>>(table, a);
    } else {
      sgd_multi_kernel<false><<<blocks, kMultiTensorBlock, 0, stream>>>(table, a);
    }
    CUDA_LAUNCH_CHECK() << "sgd_multi_kernel";
  });
}

void launch_adamw_step_multi(std::span<const AdamwTensors> list, float lr, float beta1, float beta2,
                             float eps, float weight_decay, int64_t step, cudaStream_t stream) {
  const AdamwScalars a = adamw_scalars(lr, beta1, beta2, eps, weight_decay, step);
  std::vector<int64_t> numel(list.size());
  for (size_t t = 0; t < list.size(); ++t) numel[t] = list[t].n;
  auto ptrs = [&](size_t t) {
    const AdamwTensors& e = list[t];
    return std::array<float*, 4>{e.param, const_cast<float*>(e.grad), e.m, e.v};
  };
  for_each_table<4>(list.size(), ptrs, numel, [&](const TensorTable<4>& table, int blocks) {
    adamw_multi_kernel<<<blocks, kMultiTensorBlock, 0, stream>>>(table, a);
    CUDA_LAUNCH_CHECK() << "adamw_multi_kernel";
  });
}

}  // namespace ddpb::gpu
