// A NaN that enters an op comes out of it, as in PyTorch, so that a non-finite value is
// never turned into a plausible number (ReLU once mapped NaN to 0, and a NaN in --init-from
// trained to "finite" losses). Op by op on CPU; tests/core/test_cuda_parity.cpp checks CUDA.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/ops.h"
#include "test_util.h"

namespace ddpb {
namespace {

using testing::random_tensor;

// `t` with element `index` set to NaN.
Tensor with_nan(Tensor t, int64_t index = 1) {
  std::vector<float> v = t.to_floats();
  v[static_cast<size_t>(index)] = NAN;
  return Tensor::from_floats(v, t.shape());
}

int64_t nan_count(const Tensor& t) {
  int64_t n = 0;
  for (float v : t.to_floats()) n += std::isnan(v) ? 1 : 0;
  return n;
}

Tensor empty(const Shape& shape) {
  return Tensor::empty(shape, DType::F32, Device::cpu());
}

TEST(NanPropagation, ReluForwardAndBackward) {
  Tensor x = with_nan(random_tensor({8}, 1)), y = empty({8});
  ops::relu_forward(x, y);
  EXPECT_TRUE(std::isnan(y.to_floats()[1])) << "relu(NaN) is NaN";
  // threshold_backward: dy passes where y is not <= 0, so a NaN dy at a NaN output stays.
  Tensor dy = with_nan(random_tensor({8}, 2)), dx = empty({8});
  ops::relu_backward(dy, y, dx);
  EXPECT_TRUE(std::isnan(dx.to_floats()[1]));
}

TEST(NanPropagation, GemmWithAndWithoutItsReluEpilogue) {
  for (auto act : {ops::Activation::None, ops::Activation::ReLU, ops::Activation::GeLU}) {
    Tensor a = with_nan(random_tensor({4, 3}, 3)), b = random_tensor({3, 5}, 4), c = empty({4, 5});
    ops::gemm(a, false, b, false, c, 1.0f, 0.0f, Tensor(), act);
    // Row 0 of a holds the NaN (index 1): the whole row 0 of c is NaN.
    EXPECT_EQ(nan_count(c), 5) << "activation " << static_cast<int>(act);
  }
}

TEST(NanPropagation, ElementwiseOps) {
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> cases{
      {"gelu_forward",
       [](const Tensor& x) {
         Tensor y = empty(x.shape());
         ops::gelu_forward(x, y);
         return y;
       }},
      {"gelu_backward",
       [](const Tensor& x) {
         Tensor dx = empty(x.shape());
         ops::gelu_backward(random_tensor(x.shape(), 5), x, dx);
         return dx;
       }},
      {"add",
       [](const Tensor& x) {
         Tensor y = empty(x.shape());
         ops::add(x, random_tensor(x.shape(), 6), y);
         return y;
       }},
      {"axpy",
       [](const Tensor& x) {
         Tensor y = random_tensor(x.shape(), 7);
         ops::axpy(0.5f, x, y);
         return y;
       }},
      {"cast bf16",
       [](const Tensor& x) {
         Tensor h = Tensor::empty(x.shape(), DType::BF16, Device::cpu()), y = empty(x.shape());
         ops::cast(x, h);
         ops::cast(h, y);
         return y;
       }},
  };
  for (const auto& [name, op] : cases) {
    EXPECT_GE(nan_count(op(with_nan(random_tensor({16}, 8)))), 1) << name;
  }
}

TEST(NanPropagation, ReductionsNormsAndSoftmax) {
  Tensor x = with_nan(random_tensor({4, 6}, 9));
  Tensor rows = empty({6}), all = empty({1}), finite = empty({1});
  ops::sum_rows(x, rows);
  ops::sum_all(x, all);
  ops::all_finite(x, finite);
  EXPECT_EQ(nan_count(rows), 1);
  EXPECT_EQ(nan_count(all), 1);
  EXPECT_EQ(finite.to_floats()[0], 0.0f);
  Tensor y = empty({4, 6});
  ops::softmax_forward(x, y);
  EXPECT_EQ(nan_count(y), 6) << "the row holding the NaN";
  Tensor ln = empty({4, 6}), mean = empty({4}), rstd = empty({4});
  Tensor w = random_tensor({6}, 10), b = random_tensor({6}, 11);
  ops::layernorm_forward(x, w, b, ln, mean, rstd, 1e-5f);
  EXPECT_EQ(nan_count(ln), 6);
}

TEST(NanPropagation, CrossEntropyAndAttention) {
  Tensor logits = with_nan(random_tensor({3, 5}, 12));
  Tensor targets = Tensor::from_ints({0, 1, 2}, {3}), loss = empty({1}), probs = empty({3, 5});
  ops::cross_entropy_forward(logits, targets, loss, probs);
  EXPECT_TRUE(std::isnan(loss.to_floats()[0]));
  // qkv [B=1, T=4, 3C=12], one head: a NaN in the first query row reaches its output.
  Tensor qkv = with_nan(random_tensor({1, 4, 12}, 13), 0);
  Tensor out = empty({1, 4, 4}), att = empty({1, 1, 4, 4}), lse = empty({1, 1, 4});
  ops::attention_forward(qkv, out, att, 1);
  EXPECT_GE(nan_count(out), 4);
  Tensor flash_out = empty({1, 4, 4});
  ops::flash_attention_forward(qkv, flash_out, lse, 1);
  EXPECT_GE(nan_count(flash_out), 4);
}

TEST(NanPropagation, OptimizerSteps) {
  Tensor p = random_tensor({8}, 14), g = with_nan(random_tensor({8}, 15)), buf = empty({8});
  ops::sgd_step(p, g, buf, 0.1f, 0.9f, 0.0f, true);
  EXPECT_TRUE(std::isnan(p.to_floats()[1]));
  Tensor q = random_tensor({8}, 16), m = Tensor::zeros({8}, DType::F32, Device::cpu());
  Tensor v = Tensor::zeros({8}, DType::F32, Device::cpu());
  ops::adamw_step(q, g, m, v, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, 1);
  EXPECT_TRUE(std::isnan(q.to_floats()[1]));
}

}  // namespace
}  // namespace ddpb
