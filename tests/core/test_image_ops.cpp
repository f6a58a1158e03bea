// The image ops against direct definitions: convolution against the textbook loop, batch
// normalisation's statistics and running averages against PyTorch's formulas, SyncBatchNorm's
// decomposition against BatchNorm of the whole batch, and the pooling ops' edge cases.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/functional.h"
#include "core/ops.h"
#include "test_util.h"

namespace ddpb {
namespace {

using testing::random_tensor;

// y[n,k,p,q] = sum_{c,r,s} x[n,c,p*stride-pad+r, q*stride-pad+s] * w[k,c,r,s].
std::vector<double> direct_conv(const Tensor& x, const Tensor& w, ops::Conv2dGeometry g) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t k = w.size(0), r = w.size(2);
  const int64_t p = g.out_extent(h, r), q = g.out_extent(wd, r);
  const float *xs = x.data<float>(), *ws = w.data<float>();
  std::vector<double> y(static_cast<size_t>(n * k * p * q), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < k; ++o)
      for (int64_t yy = 0; yy < p; ++yy)
        for (int64_t xx = 0; xx < q; ++xx) {
          double s = 0;
          for (int64_t ch = 0; ch < c; ++ch)
            for (int64_t a = 0; a < r; ++a)
              for (int64_t b = 0; b < r; ++b) {
                const int64_t iy = yy * g.stride - g.padding + a,
                              ix = xx * g.stride - g.padding + b;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                s += double(xs[((i * c + ch) * h + iy) * wd + ix]) *
                     ws[((o * c + ch) * r + a) * r + b];
              }
          y[static_cast<size_t>(((i * k + o) * p + yy) * q + xx)] = s;
        }
  return y;
}

TEST(ImageOps, Conv2dMatchesTheDirectLoop) {
  for (const auto& [r, g] : std::vector<std::pair<int64_t, ops::Conv2dGeometry>>{
           {3, {1, 1}}, {7, {2, 3}}, {1, {2, 0}}, {3, {2, 1}}}) {
    Tensor x = random_tensor({2, 3, 11, 9}, 7);
    Tensor w = random_tensor({5, 3, r, r}, 8, 0.2f);
    Tensor y =
        Tensor::empty({2, 5, g.out_extent(11, r), g.out_extent(9, r)}, DType::F32, Device::cpu());
    ops::conv2d_forward(x, w, y, g);
    const auto want = direct_conv(x, w, g);
    const auto got = y.to_floats();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i])))
          << "kernel " << r << " stride " << g.stride << " element " << i;
    }
  }
}

TEST(ImageOps, BatchNormStatisticsAndRunningAveragesFollowPyTorch) {
  // Channel 0 holds 1..8, channel 1 holds 2, 4, ..., 16, over N = 2 and H*W = 4.
  std::vector<float> v(16);
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 2; ++c)
      for (int j = 0; j < 4; ++j) v[(n * 2 + c) * 4 + j] = float((n * 4 + j + 1) * (c + 1));
  Tensor x = Tensor::from_floats(v, {2, 2, 2, 2});
  Tensor stats = Tensor::empty({5}, DType::F32, Device::cpu());
  ops::batch_norm_stats(x, stats);
  const auto s = stats.to_floats();
  EXPECT_FLOAT_EQ(s[0], 4.5f);
  EXPECT_FLOAT_EQ(s[1], 9.0f);
  EXPECT_FLOAT_EQ(s[2], 5.25f);  // biased variance of 1..8
  EXPECT_FLOAT_EQ(s[3], 21.0f);
  EXPECT_FLOAT_EQ(s[4], 8.0f);  // the count
  Tensor mean = Tensor::empty({2}, DType::F32, Device::cpu());
  Tensor invstd = Tensor::empty({2}, DType::F32, Device::cpu());
  Tensor count = Tensor::empty({1}, DType::F32, Device::cpu());
  Tensor rm = Tensor::zeros({2}, DType::F32, Device::cpu());
  Tensor rv = Tensor::from_floats({1, 1}, {2});
  Tensor tracked = Tensor::zeros({1}, DType::I64, Device::cpu());
  ops::batch_norm_gather_stats(stats.view({1, 5}), 1e-5f, 0.1f, mean, invstd, count, rm, rv,
                               tracked);
  EXPECT_FLOAT_EQ(invstd.to_floats()[0], 1.0f / std::sqrt(5.25f + 1e-5f));
  EXPECT_FLOAT_EQ(rm.to_floats()[0], 0.45f);
  // running_var takes the unbiased variance: 5.25 * 8 / 7 = 6.
  EXPECT_FLOAT_EQ(rv.to_floats()[0], 0.9f + 0.1f * 6.0f);
  EXPECT_FLOAT_EQ(rv.to_floats()[1], 0.9f + 0.1f * 24.0f);
  EXPECT_EQ(tracked.data<int64_t>()[0], 1);
  EXPECT_FLOAT_EQ(count.item(), 8.0f);
}

// SyncBatchNorm's statistics: the groups' (mean, var, count) gathered equal the statistics of
// the concatenated batch, also for unequal group sizes, and running_var uses the global count.
TEST(ImageOps, GatheredStatisticsEqualTheWholeBatch) {
  Tensor whole = random_tensor({5, 3, 2, 3}, 11, 2.0f);
  const auto v = whole.to_floats();
  Tensor a = Tensor::from_floats({v.begin(), v.begin() + 2 * 18}, {2, 3, 2, 3});
  Tensor b = Tensor::from_floats({v.begin() + 2 * 18, v.end()}, {3, 3, 2, 3});
  Tensor groups = Tensor::empty({2, 7}, DType::F32, Device::cpu());
  ops::batch_norm_stats(a, groups.flat_view(0, {7}));
  ops::batch_norm_stats(b, groups.flat_view(7, {7}));
  Tensor one = Tensor::empty({1, 7}, DType::F32, Device::cpu());
  ops::batch_norm_stats(whole, one.view({7}));
  auto gather = [](const Tensor& stats) {
    std::vector<Tensor> out = {Tensor::empty({3}, DType::F32, Device::cpu()),
                               Tensor::empty({3}, DType::F32, Device::cpu()),
                               Tensor::empty({1}, DType::F32, Device::cpu()),
                               Tensor::zeros({3}, DType::F32, Device::cpu()),
                               Tensor::from_floats({1, 1, 1}, {3}),
                               Tensor::zeros({1}, DType::I64, Device::cpu())};
    ops::batch_norm_gather_stats(stats, 1e-5f, 0.1f, out[0], out[1], out[2], out[3], out[4],
                                 out[5]);
    return out;
  };
  const auto split = gather(groups), together = gather(one);
  for (size_t i = 0; i < 5; ++i) {
    const auto p = split[i].to_floats(), q = together[i].to_floats();
    for (size_t j = 0; j < p.size(); ++j) EXPECT_NEAR(p[j], q[j], 1e-5 * (1 + std::fabs(q[j])));
  }
  EXPECT_FLOAT_EQ(split[2].item(), 30.0f);
}

TEST(ImageOps, MaxPoolPadsWithMinusInfinityAndLetsNanWin) {
  // A 2x2 plane of negatives pooled 3x3 with padding 1: the padding never wins.
  Tensor x = Tensor::from_floats({-4, -3, -2, -1}, {1, 1, 2, 2});
  Tensor y = Tensor::empty({1, 1, 1, 1}, DType::F32, Device::cpu());
  Tensor idx = Tensor::empty({1, 1, 1, 1}, DType::I32, Device::cpu());
  ops::max_pool2d_forward(x, y, idx, 3, {.stride = 2, .padding = 1});
  EXPECT_FLOAT_EQ(y.item(), -1.0f);
  EXPECT_EQ(idx.to_ints()[0], 3);
  Tensor with_nan =
      Tensor::from_floats({1, std::numeric_limits<float>::quiet_NaN(), 5, 2}, {1, 1, 2, 2});
  ops::max_pool2d_forward(with_nan, y, idx, 3, {.stride = 2, .padding = 1});
  EXPECT_TRUE(std::isnan(y.item()));
  EXPECT_EQ(idx.to_ints()[0], 1);
}

TEST(ImageOps, ConvolutionRefusesAnInputSmallerThanItsKernel) {
  Tensor x = random_tensor({1, 3, 2, 2}, 1);
  Tensor w = random_tensor({4, 3, 3, 3}, 2);
  Tensor y = Tensor::empty({1, 4, 1, 1}, DType::F32, Device::cpu());
  EXPECT_THROW(ops::conv2d_forward(x, w, y, {.stride = 1, .padding = 0}), Error);
}

// NCHW -> NHWC on the host, for comparing the layouts.
Tensor to_nhwc(const Tensor& x) {
  Tensor y = Tensor::empty({x.size(0), x.size(2), x.size(3), x.size(1)}, DType::F32, Device::cpu());
  ops::nchw_to_nhwc(x, y);
  return y;
}

void expect_same(const Tensor& a, const Tensor& b, double tol, const char* what) {
  const auto x = a.to_floats(), y = b.to_floats();
  ASSERT_EQ(x.size(), y.size()) << what;
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_NEAR(x[i], y[i], tol * (1 + std::fabs(x[i]))) << what << " element " << i;
}

// Every image op computes the same in NHWC as in NCHW (the NHWC result is the NCHW one with
// the channels moved last).
TEST(ImageOps, ChannelsLastComputesWhatNchwComputes) {
  const auto nhwc = ops::ImageLayout::NHWC;
  const ops::Conv2dGeometry g{.stride = 2, .padding = 1};
  Tensor x = random_tensor({2, 3, 9, 7}, 21), w = random_tensor({4, 3, 3, 3}, 22, 0.3f);
  Tensor y = Tensor::empty({2, 4, 5, 4}, DType::F32, Device::cpu());
  Tensor y_l = Tensor::empty({2, 5, 4, 4}, DType::F32, Device::cpu());
  ops::conv2d_forward(x, w, y, g);
  ops::conv2d_forward(to_nhwc(x), w, y_l, g, nhwc);
  expect_same(to_nhwc(y), y_l, 1e-5, "conv forward");
  Tensor dy = random_tensor(y.shape(), 23);
  Tensor dx = Tensor::empty(x.shape(), DType::F32, Device::cpu());
  Tensor dx_l = Tensor::empty({2, 9, 7, 3}, DType::F32, Device::cpu());
  Tensor dw = Tensor::empty(w.shape(), DType::F32, Device::cpu()), dw_l = dw.clone();
  ops::conv2d_backward_data(dy, w, dx, g);
  ops::conv2d_backward_data(to_nhwc(dy), w, dx_l, g, nhwc);
  expect_same(to_nhwc(dx), dx_l, 1e-5, "conv backward data");
  ops::conv2d_backward_weight(dy, x, dw, g);
  ops::conv2d_backward_weight(to_nhwc(dy), to_nhwc(x), dw_l, g, nhwc);
  expect_same(dw, dw_l, 1e-5, "conv backward weight");

  Tensor stats = Tensor::empty({9}, DType::F32, Device::cpu()), stats_l = stats.clone();
  ops::batch_norm_stats(y, stats);
  ops::batch_norm_stats(y_l, stats_l, nhwc);
  expect_same(stats, stats_l, 1e-6, "batch norm stats");
  Tensor mean = stats.flat_view(0, {4}), invstd = random_tensor({4}, 24, 0.5f);
  Tensor wt = random_tensor({4}, 25), bias = random_tensor({4}, 26);
  Tensor sums = Tensor::empty({8}, DType::F32, Device::cpu()), sums_l = sums.clone();
  ops::batch_norm_backward_reduce(dy, y, mean, invstd, sums);
  ops::batch_norm_backward_reduce(to_nhwc(dy), y_l, mean, invstd, sums_l, nhwc);
  expect_same(sums, sums_l, 1e-5, "batch norm backward reduce");
  Tensor count = Tensor::from_floats({40}, {1});
  Tensor bx = Tensor::empty(y.shape(), DType::F32, Device::cpu());
  Tensor bx_l = Tensor::empty(y_l.shape(), DType::F32, Device::cpu());
  ops::batch_norm_backward_elemt(dy, y, mean, invstd, wt, sums, count, bx);
  ops::batch_norm_backward_elemt(to_nhwc(dy), y_l, mean, invstd, wt, sums, count, bx_l, nhwc);
  expect_same(to_nhwc(bx), bx_l, 1e-5, "batch norm backward elemt");
  ops::batch_norm_elemt(y, mean, invstd, wt, bias, bx);
  ops::batch_norm_elemt(y_l, mean, invstd, wt, bias, bx_l, nhwc);
  expect_same(to_nhwc(bx), bx_l, 1e-6, "batch norm elemt");

  Tensor p = Tensor::empty({2, 4, 3, 2}, DType::F32, Device::cpu());
  Tensor p_l = Tensor::empty({2, 3, 2, 4}, DType::F32, Device::cpu());
  Tensor idx = Tensor::empty(p.shape(), DType::I32, Device::cpu());
  Tensor idx_l = Tensor::empty(p_l.shape(), DType::I32, Device::cpu());
  ops::max_pool2d_forward(y, p, idx, 3, g);
  ops::max_pool2d_forward(y_l, p_l, idx_l, 3, g, nhwc);
  expect_same(to_nhwc(p), p_l, 0, "max pool");
  Tensor dp = random_tensor(p.shape(), 27);
  ops::max_pool2d_backward(dp, idx, bx, 3, g);
  ops::max_pool2d_backward(to_nhwc(dp), idx_l, bx_l, 3, g, nhwc);
  expect_same(to_nhwc(bx), bx_l, 0, "max pool backward");
  Tensor avg = Tensor::empty({2, 4}, DType::F32, Device::cpu()), avg_l = avg.clone();
  ops::global_avg_pool_forward(y, avg);
  ops::global_avg_pool_forward(y_l, avg_l, nhwc);
  expect_same(avg, avg_l, 1e-6, "global average pool");
  ops::global_avg_pool_backward(avg, bx);
  ops::global_avg_pool_backward(avg, bx_l, nhwc);
  expect_same(to_nhwc(bx), bx_l, 1e-7, "global average pool backward");
}

// What a user can reach (an image smaller than the network expects) is a usage error.
TEST(ImageOps, TooSmallAnInputIsAUsageError) {
  autograd::Var x(random_tensor({1, 3, 2, 2}, 1));
  autograd::Var w(random_tensor({4, 3, 7, 7}, 2), true);
  EXPECT_THROW(fn::conv2d(x, w, {.stride = 2, .padding = 0}), UsageError);
  EXPECT_THROW(fn::max_pool2d(x, 3, {.stride = 2, .padding = 0}), UsageError);
  autograd::Var one(random_tensor({1, 4, 1, 1}, 3));
  autograd::Var weight(random_tensor({4}, 4), true), bias(random_tensor({4}, 5), true);
  fn::BatchNormBuffers buffers{Tensor::zeros({4}, DType::F32, Device::cpu()),
                               Tensor::zeros({4}, DType::F32, Device::cpu()),
                               Tensor::zeros({}, DType::I64, Device::cpu())};
  try {
    fn::batch_norm(one, weight, bias, buffers, {});
    FAIL() << "batch norm over one value per channel must be refused in training";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("more than 1 value per channel"), std::string::npos);
  }
}

}  // namespace
}  // namespace ddpb
