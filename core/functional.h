// Differentiable ops on Vars: each runs the forward kernels from core/ops.h and records a
// Node whose apply() runs the backward kernels. Shapes follow PyTorch: Linear weight is
// [out, in] and y = x W^T + b.
#pragma once

#include "core/autograd.h"
#include "core/ops.h"

namespace ddpb::fn {

using autograd::Var;

// x [N, in], weight [out, in], bias [out] (or undefined) -> [N, out]. `act` may be None or
// ReLU (fused into the GEMM epilogue; its backward uses the saved output).
Var linear(const Var& x, const Var& weight, const Var& bias,
           ops::Activation act = ops::Activation::None);
Var relu(const Var& x);
Var gelu(const Var& x);  // tanh approximation
Var add(const Var& a, const Var& b);
// Same data, new shape (gradient reshaped back).
Var reshape(const Var& x, const Shape& shape);
// x [..., C] normalised over C.
Var layer_norm(const Var& x, const Var& weight, const Var& bias, float eps = 1e-5f);
// ids i32 (any shape, N elements), table [V, C] -> [N, C].
Var embedding(const Tensor& ids, const Var& table);
// qkv [B, T, 3C] -> [B, T, C], causal, scaled by 1/sqrt(C/n_head). ops::attention_kind()
// picks the materialised or the flash-style kernels.
Var causal_attention(const Var& qkv, int n_head);
// logits [N, V], targets i32 [N] -> scalar mean loss.
Var cross_entropy(const Var& logits, const Tensor& targets);

}  // namespace ddpb::fn
