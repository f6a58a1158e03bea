// bf16 autocast on the CPU (Note [Autocast], core/functional.cpp; Note [bf16 on the CPU],
// core/cpu/cpu_bf16.h): the ops that take bf16 compute in f32 and round once on store, and the
// functions store what PyTorch's autocast stores. The CPU backend emulates bf16 exactly as a
// CUDA kernel computes it, so these tests check the logic that runs on GPUs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/functional.h"
#include "core/ops.h"
#include "test_util.h"

namespace ddpb {
namespace {

using autograd::Var;

struct Bf16Mode {
  Bf16Mode() { ops::set_math_mode(ops::MathMode::BF16); }
  ~Bf16Mode() { ops::set_math_mode(ops::MathMode::FP32); }
};

Tensor to_dtype(const Tensor& t, DType dtype) {
  Tensor out = Tensor::empty(t.shape(), dtype, t.device());
  ops::cast(t, out);
  return out;
}

// The f32 tensor of t's values rounded to bf16.
Tensor rounded(const Tensor& t) {
  return to_dtype(to_dtype(t, DType::BF16), DType::F32);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.numel() == b.numel() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// A bf16 GEMM is the f32 GEMM of its operands' values, rounded once at the end: after alpha,
// beta * c, the bias and the activation. A bf16 product may also leave in f32, unrounded.
TEST(Autocast, Bf16GemmIsTheF32ProductOfItsValuesRoundedOnce) {
  const int64_t m = 19, n = 23, k = 37;
  for (bool trans_a : {false, true}) {
    for (bool trans_b : {false, true}) {
      for (auto act : {ops::Activation::None, ops::Activation::ReLU, ops::Activation::GeLU}) {
        const Tensor a =
            to_dtype(testing::random_tensor(trans_a ? Shape{k, m} : Shape{m, k}, 1), DType::BF16);
        const Tensor b =
            to_dtype(testing::random_tensor(trans_b ? Shape{n, k} : Shape{k, n}, 2), DType::BF16);
        const Tensor bias = testing::random_tensor({n}, 3);
        const Tensor c0 = to_dtype(testing::random_tensor({m, n}, 4), DType::BF16);
        for (float beta : {0.0f, 1.0f}) {
          Tensor c = c0.clone();
          ops::gemm(a, trans_a, b, trans_b, c, 0.5f, beta, bias, act);
          Tensor ref = to_dtype(c0, DType::F32);
          ops::gemm(to_dtype(a, DType::F32), trans_a, to_dtype(b, DType::F32), trans_b, ref, 0.5f,
                    beta, bias, act);
          EXPECT_TRUE(same_bits(c, to_dtype(ref, DType::BF16)))
              << "trans " << trans_a << trans_b << " beta " << beta;
          Tensor c_f32 = Tensor::empty({m, n}, DType::F32, Device::cpu());
          ops::gemm(a, trans_a, b, trans_b, c_f32, 0.5f, 0.0f, bias, act);
          Tensor ref_f32 = Tensor::empty({m, n}, DType::F32, Device::cpu());
          ops::gemm(to_dtype(a, DType::F32), trans_a, to_dtype(b, DType::F32), trans_b, ref_f32,
                    0.5f, 0.0f, bias, act);
          EXPECT_TRUE(same_bits(c_f32, ref_f32)) << "bf16 operands, f32 output";
        }
      }
    }
  }
}

// Element-wise ops in bf16: f32 arithmetic on the widened values, one rounding on store,
// across the CPU's blocks (5000 elements: two full blocks and a tail).
TEST(Autocast, ElementWiseOpsComputeInF32AndRoundOnce) {
  const Shape shape{5000};
  const Tensor x = rounded(testing::random_tensor(shape, 5));
  const Tensor y = rounded(testing::random_tensor(shape, 6));
  const Tensor xb = to_dtype(x, DType::BF16), yb = to_dtype(y, DType::BF16);
  auto bf16_out = [&] { return Tensor::empty(shape, DType::BF16, Device::cpu()); };
  auto f32_out = [&] { return Tensor::empty(shape, DType::F32, Device::cpu()); };

  Tensor sum = bf16_out(), ref = f32_out();
  ops::add(xb, yb, sum);
  ops::add(x, y, ref);
  EXPECT_TRUE(same_bits(sum, to_dtype(ref, DType::BF16))) << "bf16 + bf16";
  Tensor promoted = f32_out();
  ops::add(testing::random_tensor(shape, 7), yb, promoted);
  ops::add(testing::random_tensor(shape, 7), y, ref);
  EXPECT_TRUE(same_bits(promoted, ref)) << "f32 + bf16 leaves in f32, unrounded";

  using Unary = void (*)(const Tensor&, const Tensor&);
  for (Unary op : {Unary(&ops::relu_forward), Unary(&ops::gelu_forward)}) {
    Tensor got = bf16_out(), want = f32_out();
    op(xb, got);
    op(x, want);
    EXPECT_TRUE(same_bits(got, to_dtype(want, DType::BF16)));
  }
  using Binary = void (*)(const Tensor&, const Tensor&, const Tensor&);
  for (Binary op : {Binary(&ops::relu_backward), Binary(&ops::gelu_backward)}) {
    Tensor got = bf16_out(), want = f32_out();
    op(yb, xb, got);
    op(y, x, want);
    EXPECT_TRUE(same_bits(got, to_dtype(want, DType::BF16)));
  }
  Tensor rows = Tensor::empty({50}, DType::F32, Device::cpu());
  Tensor rows_ref = Tensor::empty({50}, DType::F32, Device::cpu());
  ops::sum_rows(xb.view({100, 50}), rows);
  ops::sum_rows(x.view({100, 50}), rows_ref);
  EXPECT_TRUE(same_bits(rows, rows_ref)) << "a bf16 row sum is the f32 sum of its values";
}

TEST(Autocast, OpsRefuseDtypesOutsideTheirContract) {
  const Tensor f = testing::random_tensor({4, 4}, 8);
  const Tensor h = to_dtype(f, DType::BF16);
  auto f32 = [] { return Tensor::empty({4, 4}, DType::F32, Device::cpu()); };
  auto bf16 = [] { return Tensor::empty({4, 4}, DType::BF16, Device::cpu()); };
  EXPECT_THROW(ops::gemm(f, false, f, false, bf16()), Error) << "f32 operands, bf16 output";
  EXPECT_THROW(ops::gemm(f, false, h, false, f32()), Error) << "operands of two dtypes";
  EXPECT_THROW(ops::gemm(h, false, h, false, f32(), 1.0f, 0.0f,
                         Tensor::empty({4}, DType::BF16, Device::cpu())),
               Error)
      << "a bf16 bias";
  EXPECT_THROW(ops::add(f, h, bf16()), Error) << "a promoted sum leaves in f32";
  EXPECT_THROW(ops::relu_forward(h, f32()), Error) << "one dtype per element-wise op";
  EXPECT_THROW(ops::gelu_backward(h, f, bf16()), Error);
  EXPECT_THROW(ops::softmax_forward(h, bf16()), Error) << "softmax is f32 only";
  EXPECT_NO_THROW(ops::gemm(h, false, h, false, f32()));
}

// The float64 value of a bf16-rounded float.
double rb(double v) {
  return bf16_to_float(float_to_bf16(static_cast<float>(v)));
}

struct Mlp {
  Var w1, b1, w2, b2;
  Tensor x, targets;
};

Mlp make_mlp() {
  Mlp m;
  m.w1 = Var(testing::random_tensor({5, 6}, 11, 0.5f), true);
  m.b1 = Var(testing::random_tensor({5}, 12, 0.5f), true);
  m.w2 = Var(testing::random_tensor({3, 5}, 13, 0.5f), true);
  m.b2 = Var(testing::random_tensor({3}, 14, 0.5f), true);
  m.x = testing::random_tensor({4, 6}, 15);
  m.targets = Tensor::from_ints({0, 2, 1, 2}, {4});
  return m;
}

// Forward and backward of linear(relu) -> linear -> cross_entropy; returns the loss.
Var mlp_loss(const Mlp& m) {
  Var h = fn::linear(Var(m.x), m.w1, m.b1, ops::Activation::ReLU);
  Var logits = fn::linear(h, m.w2, m.b2);
  Var loss = fn::cross_entropy(logits, m.targets);
  loss.backward();
  return loss;
}

// The gradients PyTorch's autocast semantics give, computed by hand in float64 with a bf16
// rounding wherever Note [Autocast] puts one: the inputs and weights of each linear, each
// linear's output (after its bias and ReLU), the logits' gradient as it enters the bf16 logits
// and the hidden layer's gradient as the second GEMM leaves it. Weight and bias gradients
// are not rounded.
struct Reference {
  double loss = 0;
  std::vector<double> dw1, db1, dw2, db2;
};

Reference hand_reference(const Mlp& m) {
  const auto x = m.x.to_floats(), w1 = m.w1.data().to_floats(), b1 = m.b1.data().to_floats();
  const auto w2 = m.w2.data().to_floats(), b2 = m.b2.data().to_floats();
  const auto t = m.targets.to_ints();
  const int N = 4, I = 6, H = 5, O = 3;
  std::vector<double> h(N * H), logits(N * O), dlogits(N * O), dh(N * H);
  Reference r;
  r.dw1.assign(H * I, 0), r.db1.assign(H, 0), r.dw2.assign(O * H, 0), r.db2.assign(O, 0);
  for (int n = 0; n < N; ++n)
    for (int j = 0; j < H; ++j) {
      double s = b1[j];
      for (int i = 0; i < I; ++i) s += rb(x[n * I + i]) * rb(w1[j * I + i]);
      h[n * H + j] = rb(s > 0 ? s : 0);
    }
  for (int n = 0; n < N; ++n) {
    double mx = -1e30, z = 0;
    for (int o = 0; o < O; ++o) {
      double s = b2[o];
      for (int j = 0; j < H; ++j) s += h[n * H + j] * rb(w2[o * H + j]);
      logits[n * O + o] = rb(s);
      mx = std::max(mx, logits[n * O + o]);
    }
    for (int o = 0; o < O; ++o) z += std::exp(logits[n * O + o] - mx);
    r.loss += (std::log(z) + mx - logits[n * O + t[n]]) / N;
    for (int o = 0; o < O; ++o) {
      const double p = std::exp(logits[n * O + o] - mx) / z;
      dlogits[n * O + o] = rb((p - (o == t[n] ? 1.0 : 0.0)) / N);
    }
  }
  for (int n = 0; n < N; ++n)
    for (int j = 0; j < H; ++j) {
      double s = 0;
      for (int o = 0; o < O; ++o) s += dlogits[n * O + o] * rb(w2[o * H + j]);
      dh[n * H + j] = h[n * H + j] > 0 ? rb(s) : 0.0;
    }
  for (int n = 0; n < N; ++n) {
    for (int o = 0; o < O; ++o) {
      r.db2[o] += dlogits[n * O + o];
      for (int j = 0; j < H; ++j) r.dw2[o * H + j] += dlogits[n * O + o] * h[n * H + j];
    }
    for (int j = 0; j < H; ++j) {
      r.db1[j] += dh[n * H + j];
      for (int i = 0; i < I; ++i) r.dw1[j * I + i] += dh[n * H + j] * rb(x[n * I + i]);
    }
  }
  return r;
}

double worst_relative(const Tensor& got, const std::vector<double>& want) {
  const auto g = got.to_floats();
  double worst = 0, scale = 0;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(g[i] - want[i]));
  return worst / scale;
}

// Parity of a whole forward and backward with autocast's semantics, against the float64
// reference above; the same model in fp32 must be measurably further from it, or the test
// could not tell the modes apart.
TEST(Autocast, AnMlpsGradientsMatchAHandWrittenBf16Reference) {
  const Mlp fp32_model = make_mlp();
  const Reference ref = hand_reference(fp32_model);
  const Var fp32_loss = mlp_loss(fp32_model);
  const Mlp model = make_mlp();
  Var loss;
  {
    Bf16Mode mode;
    loss = mlp_loss(model);
  }
  EXPECT_EQ(loss.data().dtype(), DType::F32);
  EXPECT_NEAR(loss.data().item(), ref.loss, 1e-6 * std::fabs(ref.loss));
  const std::pair<const Var*, const std::vector<double>*> grads[] = {
      {&model.w1, &ref.dw1}, {&model.b1, &ref.db1}, {&model.w2, &ref.dw2}, {&model.b2, &ref.db2}};
  for (const auto& [param, want] : grads) {
    EXPECT_EQ(param->grad().dtype(), DType::F32) << "gradients of f32 parameters are f32";
    EXPECT_LT(worst_relative(param->grad(), *want), 1e-5);
  }
  EXPECT_GT(worst_relative(fp32_model.w1.grad(), ref.dw1), 1e-4) << "fp32 is not autocast";
  EXPECT_GT(std::fabs(fp32_loss.data().item() - ref.loss), 1e-6 * std::fabs(ref.loss));
}

// What each function leaves under autocast: bf16 from the GEMMs and what follows them in
// their dtype, f32 from the f32 functions and from a sum with the f32 residual; every
// gradient in its Var's dtype.
TEST(Autocast, FunctionsStoreWhatAutocastStores) {
  Bf16Mode mode;
  const Var x(testing::random_tensor({8, 16}, 21), true);
  const Var w(testing::random_tensor({16, 16}, 22, 0.25f), true);
  const Var b(testing::random_tensor({16}, 23), true);
  const Var ln_w(testing::random_tensor({16}, 24), true),
      ln_b(testing::random_tensor({16}, 25), true);
  const Var h = fn::linear(fn::layer_norm(x, ln_w, ln_b), w, b);
  EXPECT_EQ(h.data().dtype(), DType::BF16);
  const Var g = fn::gelu(h);
  EXPECT_EQ(g.data().dtype(), DType::BF16);
  const Var residual = fn::add(x, fn::linear(g, w, b));
  EXPECT_EQ(residual.data().dtype(), DType::F32) << "f32 + bf16 promotes";
  const Var both = fn::add(g, g);
  EXPECT_EQ(both.data().dtype(), DType::BF16);
  const Var normed = fn::layer_norm(fn::add(residual, fn::reshape(both, {8, 16})), ln_w, ln_b);
  EXPECT_EQ(normed.data().dtype(), DType::F32);
  const Var logits = fn::linear(normed, w, Var());
  fn::cross_entropy(logits, Tensor::from_ints({1, 2, 3, 4, 5, 6, 7, 8}, {8})).backward();
  for (const Var* p : {&x, &w, &b, &ln_w, &ln_b}) {
    ASSERT_TRUE(p->grad().defined());
    EXPECT_EQ(p->grad().dtype(), DType::F32);
    for (float v : p->grad().to_floats()) ASSERT_TRUE(std::isfinite(v));
  }
}

// Attention computes in f32 whatever it is given: a bf16 qkv gives the f32 result of its
// values exactly, and gets its gradient back in bf16, rounded once, in both kernels.
TEST(Autocast, AttentionTakesBf16AndComputesInF32) {
  struct KindGuard {
    ~KindGuard() { ops::set_attention_kind(ops::AttentionKind::Math); }
  } guard;
  for (auto kind : {ops::AttentionKind::Math, ops::AttentionKind::Flash}) {
    ops::set_attention_kind(kind);
    const Tensor values = rounded(testing::random_tensor({2, 5, 24}, 31));
    const Var bf16(to_dtype(values, DType::BF16), true), f32(values, true);
    const Var y_bf16 = fn::causal_attention(bf16, 2), y_f32 = fn::causal_attention(f32, 2);
    EXPECT_EQ(y_bf16.data().dtype(), DType::F32);
    EXPECT_TRUE(same_bits(y_bf16.data(), y_f32.data()));
    const Tensor dy = testing::random_tensor({2, 5, 8}, 32);
    y_bf16.backward(dy);
    y_f32.backward(dy);
    ASSERT_EQ(bf16.grad().dtype(), DType::BF16);
    EXPECT_TRUE(same_bits(bf16.grad(), to_dtype(f32.grad(), DType::BF16)));
  }
}

}  // namespace
}  // namespace ddpb
