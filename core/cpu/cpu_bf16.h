// bf16 tensors on the CPU backend (Note [bf16 on the CPU]). Internal to core/cpu/.
//
// Note [bf16 on the CPU]
// Autocast (Note [Autocast], core/functional.cpp) stores GEMM outputs and some activations as
// bf16. The CPU computes them as a CUDA kernel does, not with whatever bf16 arithmetic the
// machine has (AVX512_BF16 is on some machines only, and a result must not depend on the
// machine): each bf16 input is widened to f32 exactly, the f32 kernel runs, and a bf16 output
// is rounded once, to nearest even, on store. Element-wise ops go in blocks of kBlock
// elements through buffers on the stack, so no scratch grows with the tensor; a GEMM widens
// its whole operands (the product needs them) into scratch kept per thread.
#pragma once

#include <algorithm>
#include <array>
#include <cstring>

#include "core/cpu/cpu_backend.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace ddpb::cpu {

inline bool any_bf16(std::initializer_list<const Tensor*> ts) {
  return std::any_of(ts.begin(), ts.end(),
                     [](const Tensor* t) { return t->defined() && t->dtype() == DType::BF16; });
}

// dst[0, n) = the f32 values of t[start, start + n).
inline void widen_to_f32(const Tensor& t, int64_t start, int64_t n, float* dst) {
  if (t.dtype() == DType::F32) {
    std::memcpy(dst, t.data<float>() + start, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  const uint16_t* p = t.data<uint16_t>() + start;
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(p[i]);
}

// t[start, start + n) = src rounded to t's dtype (a copy for f32).
inline void store_from_f32(const float* src, const Tensor& t, int64_t start, int64_t n) {
  if (t.dtype() == DType::F32) {
    std::memcpy(t.data<float>() + start, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  uint16_t* p = t.data<uint16_t>() + start;
  for (int64_t i = 0; i < n; ++i) p[i] = float_to_bf16(src[i]);
}

// out = fn(in...) element-wise, for tensors of f32 or bf16 in any mix, in stream order: fn
// gets f32 pointers to the inputs of one block, an f32 pointer for its output and the block's
// length. An f32 tensor is used in place; a bf16 one goes through a block buffer.
template <size_t N, typename Fn>
void map_f32_blocks(const std::array<Tensor, N>& in, const Tensor& out, Fn fn) {
  run_on_stream(out.device(), [=] {
    constexpr int64_t kBlock = 2048;
    const int64_t n = out.numel();
    for (int64_t start = 0; start < n; start += kBlock) {
      const int64_t len = std::min(kBlock, n - start);
      float in_buf[N][kBlock];
      float out_buf[kBlock];
      std::array<const float*, N> ins;
      for (size_t k = 0; k < N; ++k) {
        if (in[k].dtype() == DType::F32) {
          ins[k] = static_cast<const float*>(in[k].raw_data()) + start;
        } else {
          widen_to_f32(in[k], start, len, in_buf[k]);
          ins[k] = in_buf[k];
        }
      }
      float* o = out.dtype() == DType::F32 ? static_cast<float*>(out.raw_data()) + start : out_buf;
      fn(ins, o, len);
      if (out.dtype() != DType::F32) store_from_f32(o, out, start, len);
    }
  });
}

}  // namespace ddpb::cpu
