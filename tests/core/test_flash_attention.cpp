// Flash-style attention (core/cpu/cpu_flash_attention.cpp) against the materialised one:
// the same output, lse and gradients across tile boundaries, and no [B,H,T,T] buffer.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/functional.h"
#include "core/ops.h"
#include "test_util.h"

namespace ddpb {
namespace {

using autograd::Var;

struct KindGuard {
  ~KindGuard() { ops::set_attention_kind(ops::AttentionKind::Math); }
};

struct Case {
  int64_t b, t, c;
  int h;
  std::string describe() const {
    return "B=" + std::to_string(b) + " T=" + std::to_string(t) + " C=" + std::to_string(c) +
           " H=" + std::to_string(h);
  }
};

// T around the 64-row tile (1, 63, 64, 65, 150) and head sizes 4 to 64.
const Case kCases[] = {{2, 1, 8, 2},   {1, 63, 32, 1},  {2, 64, 24, 3},
                       {1, 65, 64, 2}, {2, 150, 48, 4}, {1, 130, 128, 2}};

TEST(FlashAttention, MatchesTheMaterialisedAttention) {
  for (const Case& k : kCases) {
    const Shape qkv_shape{k.b, k.t, 3 * k.c}, out_shape{k.b, k.t, k.c};
    Tensor qkv = testing::random_tensor(qkv_shape, 31, 1.5f);
    Tensor dout = testing::random_tensor(out_shape, 32);
    Tensor out_ref = Tensor::empty(out_shape, DType::F32, Device::cpu());
    Tensor att = Tensor::empty({k.b, k.h, k.t, k.t}, DType::F32, Device::cpu());
    Tensor dqkv_ref = Tensor::empty(qkv_shape, DType::F32, Device::cpu());
    ops::attention_forward(qkv, out_ref, att, k.h);
    ops::attention_backward(dout, qkv, att, dqkv_ref, k.h);

    Tensor out = Tensor::empty(out_shape, DType::F32, Device::cpu());
    Tensor lse = Tensor::empty({k.b, k.h, k.t}, DType::F32, Device::cpu());
    // Backward overwrites dqkv: start from garbage.
    Tensor dqkv = Tensor::from_floats(std::vector<float>(shape_numel(qkv_shape), 7.0f), qkv_shape);
    ops::flash_attention_forward(qkv, out, lse, k.h);
    ops::flash_attention_backward(dout, qkv, out, lse, dqkv, k.h);
    EXPECT_TRUE(testing::all_close(out.to_floats(), out_ref.to_floats(), 1e-5f, 1e-4f))
        << k.describe();
    EXPECT_TRUE(testing::all_close(dqkv.to_floats(), dqkv_ref.to_floats(), 2e-5f, 1e-4f))
        << k.describe();

    // lse is log sum_{s<=t} exp(q_t . k_s / sqrt(D)), computed here in double.
    const auto x = qkv.to_floats();
    const auto got = lse.to_floats();
    const int64_t d = k.c / k.h;
    for (int64_t bi = 0; bi < k.b; ++bi) {
      for (int64_t hd = 0; hd < k.h; ++hd) {
        for (int64_t t = 0; t < k.t; ++t) {
          std::vector<double> scores;
          for (int64_t s = 0; s <= t; ++s) {
            double dot = 0;
            for (int64_t e = 0; e < d; ++e) {
              dot += double(x[(bi * k.t + t) * 3 * k.c + hd * d + e]) *
                     x[(bi * k.t + s) * 3 * k.c + k.c + hd * d + e];
            }
            scores.push_back(dot / std::sqrt(double(d)));
          }
          double mx = scores[0], sum = 0;
          for (double v : scores) mx = std::max(mx, v);
          for (double v : scores) sum += std::exp(v - mx);
          const double want = mx + std::log(sum);
          ASSERT_NEAR(got[(bi * k.h + hd) * k.t + t], want, 1e-5 * (1 + std::fabs(want)))
              << k.describe() << " b " << bi << " h " << hd << " t " << t;
        }
      }
    }
  }
}

TEST(FlashAttention, GradientsThroughTheAutogradNode) {
  KindGuard guard;
  const Shape shape{2, 70, 3 * 16};
  Tensor data = testing::random_tensor(shape, 33);
  Tensor seed = testing::random_tensor({2, 70, 16}, 34);
  std::vector<std::vector<float>> grads;
  for (auto kind : {ops::AttentionKind::Math, ops::AttentionKind::Flash}) {
    ops::set_attention_kind(kind);
    Var qkv(data.clone(), /*requires_grad=*/true);
    Var y = fn::causal_attention(qkv, 2);
    y.backward(seed);
    grads.push_back(qkv.grad().to_floats());
  }
  EXPECT_TRUE(testing::all_close(grads[1], grads[0], 2e-5f, 1e-4f));
}

// What the flash path is for: a layer keeps lse [B,H,T], not the [B,H,T,T] probabilities.
TEST(FlashAttention, NeverAllocatesTheScoreMatrix) {
  KindGuard guard;
  const int64_t b = 1, t = 1024, c = 64;
  const int h = 2;
  Tensor data = testing::random_tensor({b, t, 3 * c}, 35);
  const int64_t scores_bytes = b * h * t * t * 4;  // 8 MiB
  CachingAllocator& alloc = device_allocator(Device::cpu());
  for (auto kind : {ops::AttentionKind::Math, ops::AttentionKind::Flash}) {
    ops::set_attention_kind(kind);
    Var qkv(data.clone(), /*requires_grad=*/true);
    const int64_t before = alloc.stats().current_bytes;
    alloc.reset_peak();
    Var y = fn::causal_attention(qkv, h);
    y.backward(Tensor::from_floats(std::vector<float>(b * t * c, 1.0f), {b, t, c}));
    const int64_t extra = alloc.stats().peak_bytes - before;
    if (kind == ops::AttentionKind::Math) {
      EXPECT_GE(extra, scores_bytes) << "the materialised path keeps the probabilities";
    } else {
      EXPECT_LT(extra, scores_bytes / 4) << "flash attention allocated " << extra << " bytes";
    }
  }
}

}  // namespace
}  // namespace ddpb
