#include "core/functional.h"

#include "core/check.h"

namespace ddpb::fn {
namespace {

using autograd::make_result;
using autograd::Node;

Tensor empty_like(const Tensor& t) {
  return Tensor::empty(t.shape(), t.dtype(), t.device());
}

// Note [Autocast]
// Under --precision bf16 (ops::math_mode() == BF16) these functions follow PyTorch's autocast
// (torch.autocast with dtype=torch.bfloat16), so that a bf16 run stores and moves what a
// PyTorch user's does:
//  - linear reads bf16 and leaves bf16. Its input is cast to bf16 (a cast node, kept for
//    backward), and so is its f32 weight, the master copy, which the optimizer updates. The
//    GEMMs accumulate in f32. The weight's bf16 copy lives for one GEMM: backward casts it
//    again, so no second copy of the parameters waits for backward (PyTorch's saved bf16
//    weight does; under FSDP that is every unit's). The weight and bias gradients leave their
//    GEMM and row sum in f32, straight into the f32 gradient (PyTorch rounds them to bf16
//    first). The bias is added in f32 before the output is rounded.
//  - relu, gelu and reshape run in their input's dtype; add keeps bf16 + bf16 in bf16 and
//    promotes a sum with an f32 operand to f32, so the residual stream stays f32.
//  - layer_norm, attention and cross_entropy compute in f32 (autocast's f32 list, and its
//    promotion): a bf16 input enters through a cast; attention widens its bf16 qkv itself and
//    keeps the bf16 one for backward, as PyTorch keeps bf16 q, k and v. PyTorch runs attention
//    in bf16; our attention kernels are f32.
//  - conv2d keeps f32 tensors; its GEMMs use the bf16 math mode (core/ops.h, MathMode).
// A Var's gradient has the Var's dtype, so each cast's backward casts back. Parameters,
// their gradients, the gradient reductions and the optimizer state stay f32.
bool autocast_to_bf16() {
  return ops::math_mode() == ops::MathMode::BF16;
}

// t in `dtype`: t itself when it already is, else a converted copy.
Tensor as_dtype(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor out = Tensor::empty(t.shape(), dtype, t.device());
  ops::cast(t, out);
  return out;
}

class CastBackward final : public Node {
 public:
  DType input_dtype = DType::F32;
  const char* name() const override { return "CastBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {as_dtype(dy, input_dtype)}; }
};

// x in `dtype`: x itself when it already is, else a copy whose gradient is cast back.
Var cast_to(const Var& x, DType dtype) {
  if (x.data().dtype() == dtype) return x;
  auto node = std::make_shared<CastBackward>();
  node->input_dtype = x.data().dtype();
  return make_result(as_dtype(x.data(), dtype), node, {x});
}

class LinearBackward final : public Node {
 public:
  Tensor x, weight, y;  // y saved only for a fused ReLU
  bool has_bias = false;
  ops::Activation act = ops::Activation::None;
  // Note [Autocast]: under autocast x is the bf16 copy of the input and weight the f32
  // parameter, cast again here.
  const char* name() const override { return "LinearBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    Tensor dz = dy;
    if (act == ops::Activation::ReLU) {
      dz = empty_like(dy);
      ops::relu_backward(dy, y, dz);
    }
    std::vector<Tensor> grads(3);
    int64_t n = x.size(0), in = x.size(1), out = weight.size(0);
    if (needs_input_grad(0)) {
      grads[0] = Tensor::empty({n, in}, x.dtype(), x.device());
      ops::gemm(dz, false, as_dtype(weight, x.dtype()), false, grads[0]);
    }
    // Weight and bias gradients may go straight into their leaves' destinations (DDP's
    // buckets, Note [Gradient destinations]); both ops overwrite their output.
    if (needs_input_grad(1)) {
      grads[1] = autograd::gradient_buffer(1, {out, in}, DType::F32, x.device());
      ops::gemm(dz, true, x, false, grads[1]);
    }
    if (has_bias && needs_input_grad(2)) {
      grads[2] = autograd::gradient_buffer(2, {out}, DType::F32, x.device());
      ops::sum_rows(dz, grads[2]);
    }
    return grads;
  }
};

class ReluBackward final : public Node {
 public:
  Tensor y;
  const char* name() const override { return "ReluBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    Tensor dx = empty_like(dy);
    ops::relu_backward(dy, y, dx);
    return {dx};
  }
};

class GeluBackward final : public Node {
 public:
  Tensor x;
  const char* name() const override { return "GeluBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    Tensor dx = empty_like(dy);
    ops::gelu_backward(dy, x, dx);
    return {dx};
  }
};

class AddBackward final : public Node {
 public:
  DType a_dtype = DType::F32, b_dtype = DType::F32;
  const char* name() const override { return "AddBackward"; }
  // A promoted sum (Note [Autocast]) hands each input its gradient in its own dtype.
  std::vector<Tensor> apply(const Tensor& dy) override {
    return {as_dtype(dy, a_dtype), as_dtype(dy, b_dtype)};
  }
};

class ReshapeBackward final : public Node {
 public:
  Shape input_shape;
  const char* name() const override { return "ReshapeBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {dy.view(input_shape)}; }
};

class LayerNormBackward final : public Node {
 public:
  Tensor x, weight, mean, rstd;  // x viewed as [M, C]
  Shape input_shape;
  const char* name() const override { return "LayerNormBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    // dw and db may go straight into DDP's buckets (Note [Gradient destinations]).
    Tensor dx = empty_like(x);
    Tensor dw = autograd::gradient_buffer(1, weight.shape(), DType::F32, weight.device());
    Tensor db = autograd::gradient_buffer(2, weight.shape(), DType::F32, weight.device());
    ops::layernorm_backward(dy.view(x.shape()), x, weight, mean, rstd, dx, dw, db);
    return {dx.view(input_shape), dw, db};
  }
};

class EmbeddingBackward final : public Node {
 public:
  Tensor ids;
  Shape table_shape;
  const char* name() const override { return "EmbeddingBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    // Scatter-added into zeros; the zeros may be DDP's bucket slot (Note [Gradient
    // destinations]), which saves copying the whole table's gradient into it.
    Tensor dtable = autograd::gradient_buffer(0, table_shape, DType::F32, dy.device());
    ops::zero(dtable);
    ops::embedding_backward(dy, ids, dtable);
    return {dtable};
  }
};

// Note [Autocast]: attention computes in f32. A bf16 qkv is widened for it (exactly), and
// backward keeps the bf16 one, half the bytes, and widens it again; its gradient goes back
// in bf16.
class AttentionBackward final : public Node {
 public:
  Tensor qkv, att;  // qkv as the input came: f32, or bf16
  int n_head = 1;
  const char* name() const override { return "AttentionBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    const Tensor q = as_dtype(qkv, DType::F32);
    Tensor dqkv = empty_like(q);
    ops::attention_backward(dy, q, att, dqkv, n_head);
    return {as_dtype(dqkv, qkv.dtype())};
  }
};

// Keeps the output (which the next projection holds anyway) and lse [B,H,T] instead of the
// probabilities.
class FlashAttentionBackward final : public Node {
 public:
  Tensor qkv, out, lse;  // qkv as the input came: f32, or bf16
  int n_head = 1;
  const char* name() const override { return "FlashAttentionBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    const Tensor q = as_dtype(qkv, DType::F32);
    Tensor dqkv = empty_like(q);
    ops::flash_attention_backward(dy, q, out, lse, dqkv, n_head);
    return {as_dtype(dqkv, qkv.dtype())};
  }
};

class CrossEntropyBackward final : public Node {
 public:
  Tensor probs, targets;
  const char* name() const override { return "CrossEntropyBackward"; }
  std::vector<Tensor> apply(const Tensor& dloss) override {
    Tensor dlogits = empty_like(probs);
    ops::cross_entropy_backward(dloss, probs, targets, dlogits);
    return {dlogits};
  }
};

}  // namespace

Var linear(const Var& x, const Var& weight, const Var& bias, ops::Activation act) {
  DDPB_CHECK(act != ops::Activation::GeLU) << "linear fuses ReLU only; apply gelu() after it";
  DDPB_CHECK(x.data().dim() == 2) << "linear input must be [N, in], got " << x.data().describe();
  const Var input = cast_to(x, autocast_to_bf16() ? DType::BF16 : DType::F32);
  const Tensor& xt = input.data();
  Tensor y = Tensor::empty({xt.size(0), weight.data().size(0)}, xt.dtype(), xt.device());
  ops::gemm(xt, false, as_dtype(weight.data(), xt.dtype()), true, y, 1.0f, 0.0f,
            bias.defined() ? bias.data() : Tensor(), act);
  auto node = std::make_shared<LinearBackward>();
  node->x = xt;
  node->weight = weight.data();
  node->has_bias = bias.defined();
  node->act = act;
  if (act == ops::Activation::ReLU) node->y = y;
  return make_result(y, node, {input, weight, bias});
}

Var relu(const Var& x) {
  Tensor y = empty_like(x.data());
  ops::relu_forward(x.data(), y);
  auto node = std::make_shared<ReluBackward>();
  node->y = y;
  return make_result(y, node, {x});
}

Var gelu(const Var& x) {
  Tensor y = empty_like(x.data());
  ops::gelu_forward(x.data(), y);
  auto node = std::make_shared<GeluBackward>();
  node->x = x.data();
  return make_result(y, node, {x});
}

Var add(const Var& a, const Var& b) {
  DDPB_CHECK(a.shape() == b.shape())
      << "add: " << a.data().describe() << " + " << b.data().describe();
  const DType da = a.data().dtype(), db = b.data().dtype();
  Tensor y = Tensor::empty(a.shape(), da == db ? da : DType::F32, a.data().device());
  ops::add(a.data(), b.data(), y);
  auto node = std::make_shared<AddBackward>();
  node->a_dtype = da;
  node->b_dtype = db;
  return make_result(y, node, {a, b});
}

Var reshape(const Var& x, const Shape& shape) {
  auto node = std::make_shared<ReshapeBackward>();
  node->input_shape = x.shape();
  return make_result(x.data().view(shape), node, {x});
}

Var layer_norm(const Var& x_in, const Var& weight, const Var& bias, float eps) {
  const Var x = cast_to(x_in, DType::F32);  // Note [Autocast]
  const Tensor& xt = x.data();
  int64_t c = xt.size(-1), m = xt.numel() / c;
  Tensor x2 = xt.view({m, c});
  Tensor y = Tensor::empty({m, c}, DType::F32, xt.device());
  Tensor mean = Tensor::empty({m}, DType::F32, xt.device());
  Tensor rstd = Tensor::empty({m}, DType::F32, xt.device());
  ops::layernorm_forward(x2, weight.data(), bias.data(), y, mean, rstd, eps);
  auto node = std::make_shared<LayerNormBackward>();
  node->x = x2;
  node->weight = weight.data();
  node->mean = mean;
  node->rstd = rstd;
  node->input_shape = xt.shape();
  return make_result(y.view(xt.shape()), node, {x, weight, bias});
}

Var embedding(const Tensor& ids, const Var& table) {
  Tensor flat_ids = ids.view({ids.numel()});
  Tensor y = Tensor::empty({ids.numel(), table.data().size(1)}, DType::F32, table.data().device());
  ops::embedding_forward(flat_ids, table.data(), y);
  auto node = std::make_shared<EmbeddingBackward>();
  node->ids = flat_ids;
  node->table_shape = table.shape();
  return make_result(y, node, {table});
}

Var causal_attention(const Var& qkv, int n_head) {
  const Tensor q = as_dtype(qkv.data(), DType::F32);  // Note [Autocast]
  DDPB_CHECK(q.dim() == 3) << "attention input must be [B, T, 3C], got " << q.describe();
  int64_t b = q.size(0), t = q.size(1), c = q.size(2) / 3;
  Tensor y = Tensor::empty({b, t, c}, DType::F32, q.device());
  if (ops::attention_kind() == ops::AttentionKind::Flash) {
    Tensor lse = Tensor::empty({b, n_head, t}, DType::F32, q.device());
    ops::flash_attention_forward(q, y, lse, n_head);
    auto node = std::make_shared<FlashAttentionBackward>();
    node->qkv = qkv.data();
    node->out = y;
    node->lse = lse;
    node->n_head = n_head;
    return make_result(y, node, {qkv});
  }
  Tensor att = Tensor::empty({b, n_head, t, t}, DType::F32, q.device());
  ops::attention_forward(q, y, att, n_head);
  auto node = std::make_shared<AttentionBackward>();
  node->qkv = qkv.data();
  node->att = att;
  node->n_head = n_head;
  return make_result(y, node, {qkv});
}

Var cross_entropy(const Var& logits_in, const Tensor& targets) {
  const Var logits = cast_to(logits_in, DType::F32);  // Note [Autocast]
  const Tensor& l = logits.data();
  Tensor loss = Tensor::empty({1}, DType::F32, l.device());
  Tensor probs = empty_like(l);
  ops::cross_entropy_forward(l, targets.view({targets.numel()}), loss, probs);
  auto node = std::make_shared<CrossEntropyBackward>();
  node->probs = probs;
  node->targets = targets.view({targets.numel()});
  return make_result(loss, node, {logits});
}

}  // namespace ddpb::fn
