// CPU batch normalisation and pooling, NCHW. Hand-written rather than oneDNN's primitives:
// oneDNN's fused batch-norm backward cannot take the cross-rank gradient sums SyncBatchNorm
// needs (core/ops.h gives the decomposition), and PyTorch's own CPU batch norm and pooling
// are native loops too. Each (n, c) plane is a contiguous run of H * W floats, so every loop
// below walks planes; sums accumulate in double.
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/cpu_backend.h"

namespace ddpb::cpu {
namespace {

struct Planes {
  int64_t n, c, hw;
  explicit Planes(const Tensor& x) : n(x.size(0)), c(x.size(1)), hw(x.size(2) * x.size(3)) {}
  int64_t offset(int64_t i, int64_t ch) const { return (i * c + ch) * hw; }
};

}  // namespace

void CpuBackend::batch_norm_stats(const Tensor& x, const Tensor& stats) {
  run_on_stream(x.device(), [=] {
    const Planes p(x);
    const float* xs = x.data<float>();
    float* out = stats.data<float>();  // mean | var | count
    const double count = static_cast<double>(p.n * p.hw);
    for (int64_t ch = 0; ch < p.c; ++ch) {
      double sum = 0;
      for (int64_t i = 0; i < p.n; ++i) {
        const float* plane = xs + p.offset(i, ch);
        for (int64_t j = 0; j < p.hw; ++j) sum += plane[j];
      }
      const double mu = sum / count;
      double m2 = 0;
      for (int64_t i = 0; i < p.n; ++i) {
        const float* plane = xs + p.offset(i, ch);
        for (int64_t j = 0; j < p.hw; ++j) m2 += (plane[j] - mu) * (plane[j] - mu);
      }
      out[ch] = static_cast<float>(mu);
      out[p.c + ch] = static_cast<float>(m2 / count);
    }
    out[2 * p.c] = static_cast<float>(count);
  });
}

void CpuBackend::batch_norm_gather_stats(const Tensor& stats, float eps, float momentum,
                                         const Tensor& mean, const Tensor& invstd,
                                         const Tensor& count, const Tensor& running_mean,
                                         const Tensor& running_var,
                                         const Tensor& num_batches_tracked) {
  run_on_stream(mean.device(), [=] {
    const int64_t groups = stats.size(0), channels = mean.numel(), row = 2 * channels + 1;
    const float* s = stats.data<float>();
    double total = 0;
    for (int64_t g = 0; g < groups; ++g) total += s[g * row + 2 * channels];
    for (int64_t ch = 0; ch < channels; ++ch) {
      // The union's mean, then its biased variance: each group's variance about its own
      // mean plus the spread of the group means (Chan et al.).
      double mu = 0;
      for (int64_t g = 0; g < groups; ++g) mu += s[g * row + 2 * channels] * s[g * row + ch];
      mu /= total;
      double m2 = 0;
      for (int64_t g = 0; g < groups; ++g) {
        const double d = s[g * row + ch] - mu;
        m2 += s[g * row + 2 * channels] * (s[g * row + channels + ch] + d * d);
      }
      const double var = m2 / total;
      mean.data<float>()[ch] = static_cast<float>(mu);
      invstd.data<float>()[ch] = static_cast<float>(1.0 / std::sqrt(var + eps));
      if (!running_mean.defined()) continue;
      float& rm = running_mean.data<float>()[ch];
      float& rv = running_var.data<float>()[ch];
      const double unbiased = total > 1 ? var * total / (total - 1) : var;
      rm = static_cast<float>((1.0 - momentum) * rm + momentum * mu);
      rv = static_cast<float>((1.0 - momentum) * rv + momentum * unbiased);
    }
    count.data<float>()[0] = static_cast<float>(total);
    if (running_mean.defined()) num_batches_tracked.data<int64_t>()[0] += 1;
  });
}

void CpuBackend::batch_norm_elemt(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                  const Tensor& weight, const Tensor& bias, const Tensor& y) {
  run_on_stream(y.device(), [=] {
    const Planes p(x);
    for (int64_t ch = 0; ch < p.c; ++ch) {
      // y = x * a + b with a = invstd * weight, b = bias - mean * a.
      const float a = invstd.data<float>()[ch] * weight.data<float>()[ch];
      const float b = bias.data<float>()[ch] - mean.data<float>()[ch] * a;
      for (int64_t i = 0; i < p.n; ++i) {
        const float* xp = x.data<float>() + p.offset(i, ch);
        float* yp = y.data<float>() + p.offset(i, ch);
        for (int64_t j = 0; j < p.hw; ++j) yp[j] = xp[j] * a + b;
      }
    }
  });
}

void CpuBackend::batch_norm_backward_reduce(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                            const Tensor& invstd, const Tensor& sums) {
  run_on_stream(x.device(), [=] {
    const Planes p(x);
    for (int64_t ch = 0; ch < p.c; ++ch) {
      const float mu = mean.data<float>()[ch];
      double s = 0, s_xmu = 0;
      for (int64_t i = 0; i < p.n; ++i) {
        const float* xp = x.data<float>() + p.offset(i, ch);
        const float* dp = dy.data<float>() + p.offset(i, ch);
        for (int64_t j = 0; j < p.hw; ++j) {
          s += dp[j];
          s_xmu += static_cast<double>(dp[j]) * (xp[j] - mu);
        }
      }
      sums.data<float>()[ch] = static_cast<float>(s);
      sums.data<float>()[p.c + ch] = static_cast<float>(s_xmu * invstd.data<float>()[ch]);
    }
  });
}

void CpuBackend::batch_norm_backward_elemt(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                           const Tensor& invstd, const Tensor& weight,
                                           const Tensor& sums, const Tensor& count,
                                           const Tensor& dx) {
  run_on_stream(dx.device(), [=] {
    const Planes p(x);
    const double total = count.data<float>()[0];
    for (int64_t ch = 0; ch < p.c; ++ch) {
      const float is = invstd.data<float>()[ch], mu = mean.data<float>()[ch];
      const float scale = weight.data<float>()[ch] * is;
      const float mean_dy = static_cast<float>(sums.data<float>()[ch] / total);
      // xhat * sum_dy_xhat / M, with xhat = (x - mean) * invstd, folded into one factor.
      const float k = static_cast<float>(sums.data<float>()[p.c + ch] / total) * is;
      for (int64_t i = 0; i < p.n; ++i) {
        const float* xp = x.data<float>() + p.offset(i, ch);
        const float* dp = dy.data<float>() + p.offset(i, ch);
        float* out = dx.data<float>() + p.offset(i, ch);
        for (int64_t j = 0; j < p.hw; ++j) out[j] = scale * (dp[j] - mean_dy - (xp[j] - mu) * k);
      }
    }
  });
}

void CpuBackend::max_pool2d_forward(const Tensor& x, const Tensor& y, const Tensor& indices,
                                    int64_t kernel, ops::Conv2dGeometry g) {
  run_on_stream(y.device(), [=] {
    const int64_t planes = x.size(0) * x.size(1), h = x.size(2), w = x.size(3);
    const int64_t ph = y.size(2), pw = y.size(3);
    for (int64_t pl = 0; pl < planes; ++pl) {
      const float* in = x.data<float>() + pl * h * w;
      float* out = y.data<float>() + pl * ph * pw;
      int32_t* idx = indices.data<int32_t>() + pl * ph * pw;
      for (int64_t oy = 0; oy < ph; ++oy) {
        const int64_t y0 = std::max<int64_t>(oy * g.stride - g.padding, 0);
        const int64_t y1 = std::min<int64_t>(oy * g.stride - g.padding + kernel, h);
        for (int64_t ox = 0; ox < pw; ++ox) {
          const int64_t x0 = std::max<int64_t>(ox * g.stride - g.padding, 0);
          const int64_t x1 = std::min<int64_t>(ox * g.stride - g.padding + kernel, w);
          float best = -std::numeric_limits<float>::infinity();
          int64_t at = y0 * w + x0;
          for (int64_t yy = y0; yy < y1; ++yy) {
            for (int64_t xx = x0; xx < x1; ++xx) {
              const float v = in[yy * w + xx];
              if (v > best || std::isnan(v)) {  // a NaN wins, as in PyTorch
                best = v;
                at = yy * w + xx;
              }
            }
          }
          out[oy * pw + ox] = best;
          idx[oy * pw + ox] = static_cast<int32_t>(at);
        }
      }
    }
  });
}

// The saved indices say where each window's maximum was; the geometry is not needed here.
void CpuBackend::max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Tensor& dx,
                                     int64_t /*kernel*/, ops::Conv2dGeometry /*g*/) {
  run_on_stream(dx.device(), [=] {
    const int64_t planes = dx.size(0) * dx.size(1), hw = dx.size(2) * dx.size(3);
    const int64_t out_hw = dy.size(2) * dy.size(3);
    std::fill(dx.data<float>(), dx.data<float>() + dx.numel(), 0.0f);
    for (int64_t pl = 0; pl < planes; ++pl) {
      float* plane = dx.data<float>() + pl * hw;
      const float* d = dy.data<float>() + pl * out_hw;
      const int32_t* idx = indices.data<int32_t>() + pl * out_hw;
      for (int64_t j = 0; j < out_hw; ++j) plane[idx[j]] += d[j];
    }
  });
}

void CpuBackend::global_avg_pool_forward(const Tensor& x, const Tensor& y) {
  run_on_stream(y.device(), [=] {
    const int64_t planes = x.size(0) * x.size(1), hw = x.size(2) * x.size(3);
    for (int64_t pl = 0; pl < planes; ++pl) {
      const float* in = x.data<float>() + pl * hw;
      double s = 0;
      for (int64_t j = 0; j < hw; ++j) s += in[j];
      y.data<float>()[pl] = static_cast<float>(s / static_cast<double>(hw));
    }
  });
}

void CpuBackend::global_avg_pool_backward(const Tensor& dy, const Tensor& dx) {
  run_on_stream(dx.device(), [=] {
    const int64_t planes = dx.size(0) * dx.size(1), hw = dx.size(2) * dx.size(3);
    for (int64_t pl = 0; pl < planes; ++pl) {
      const float v = dy.data<float>()[pl] / static_cast<float>(hw);
      std::fill(dx.data<float>() + pl * hw, dx.data<float>() + (pl + 1) * hw, v);
    }
  });
}

}  // namespace ddpb::cpu
