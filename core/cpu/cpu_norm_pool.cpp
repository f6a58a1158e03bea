// CPU batch normalisation and pooling, NCHW or NHWC. Hand-written rather than oneDNN's
// primitives: oneDNN's fused batch-norm backward cannot take the cross-rank gradient sums
// SyncBatchNorm needs (core/ops.h gives the decomposition), and PyTorch's own CPU batch norm
// and pooling are native loops too. The loops are templates on the layout: in NCHW the H * W
// values of one channel of one image are contiguous (the inner loops vectorise); in NHWC they
// are C apart. Sums accumulate in double.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/cpu_backend.h"

namespace ddpb::cpu {
namespace {

// Where value j (0 <= j < H * W) of channel ch of image i is.
template <bool kNhwc>
struct Index {
  static constexpr bool kNhwcValue = kNhwc;
  int64_t n, c, hw;
  int64_t operator()(int64_t i, int64_t ch, int64_t j) const {
    return kNhwc ? (i * hw + j) * c + ch : (i * c + ch) * hw + j;
  }
};

template <bool kNhwc>
Index<kNhwc> index_of(const Tensor& x, ops::ImageLayout layout) {
  const ops::ImageDims d = ops::image_dims(x, layout);
  return {d.n, d.c, d.h * d.w};
}

// Calls fn(Index<true>) or fn(Index<false>) for x's layout.
template <typename Fn>
void with_index(const Tensor& x, ops::ImageLayout layout, Fn&& fn) {
  if (layout == ops::ImageLayout::NHWC) {
    fn(index_of<true>(x, layout));
  } else {
    fn(index_of<false>(x, layout));
  }
}

}  // namespace

void CpuBackend::batch_norm_stats(const Tensor& x, const Tensor& stats, ops::ImageLayout layout) {
  run_on_stream(x.device(), [=] {
    with_index(x, layout, [&](auto at) {
      const float* xs = x.data<float>();
      float* out = stats.data<float>();  // mean | var | count
      const double count = static_cast<double>(at.n * at.hw);
      for (int64_t ch = 0; ch < at.c; ++ch) {
        double sum = 0;
        for (int64_t i = 0; i < at.n; ++i)
          for (int64_t j = 0; j < at.hw; ++j) sum += xs[at(i, ch, j)];
        const double mu = sum / count;
        double m2 = 0;
        for (int64_t i = 0; i < at.n; ++i)
          for (int64_t j = 0; j < at.hw; ++j)
            m2 += (xs[at(i, ch, j)] - mu) * (xs[at(i, ch, j)] - mu);
        out[ch] = static_cast<float>(mu);
        out[at.c + ch] = static_cast<float>(m2 / count);
      }
      out[2 * at.c] = static_cast<float>(count);
    });
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
                                  const Tensor& weight, const Tensor& bias, const Tensor& y,
                                  ops::ImageLayout layout) {
  run_on_stream(y.device(), [=] {
    with_index(x, layout, [&](auto at) {
      for (int64_t ch = 0; ch < at.c; ++ch) {
        // y = x * a + b with a = invstd * weight, b = bias - mean * a.
        const float a = invstd.data<float>()[ch] * weight.data<float>()[ch];
        const float b = bias.data<float>()[ch] - mean.data<float>()[ch] * a;
        const float* xs = x.data<float>();
        float* ys = y.data<float>();
        for (int64_t i = 0; i < at.n; ++i)
          for (int64_t j = 0; j < at.hw; ++j) ys[at(i, ch, j)] = xs[at(i, ch, j)] * a + b;
      }
    });
  });
}

void CpuBackend::batch_norm_backward_reduce(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                            const Tensor& invstd, const Tensor& sums,
                                            ops::ImageLayout layout) {
  run_on_stream(x.device(), [=] {
    with_index(x, layout, [&](auto at) {
      const float *xs = x.data<float>(), *ds = dy.data<float>();
      for (int64_t ch = 0; ch < at.c; ++ch) {
        const float mu = mean.data<float>()[ch];
        double s = 0, s_xmu = 0;
        for (int64_t i = 0; i < at.n; ++i) {
          for (int64_t j = 0; j < at.hw; ++j) {
            const int64_t k = at(i, ch, j);
            s += ds[k];
            s_xmu += static_cast<double>(ds[k]) * (xs[k] - mu);
          }
        }
        sums.data<float>()[ch] = static_cast<float>(s);
        sums.data<float>()[at.c + ch] = static_cast<float>(s_xmu * invstd.data<float>()[ch]);
      }
    });
  });
}

void CpuBackend::batch_norm_backward_elemt(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                           const Tensor& invstd, const Tensor& weight,
                                           const Tensor& sums, const Tensor& count,
                                           const Tensor& dx, ops::ImageLayout layout) {
  run_on_stream(dx.device(), [=] {
    with_index(x, layout, [&](auto at) {
      const double total = count.data<float>()[0];
      const float *xs = x.data<float>(), *ds = dy.data<float>();
      float* out = dx.data<float>();
      for (int64_t ch = 0; ch < at.c; ++ch) {
        const float is = invstd.data<float>()[ch], mu = mean.data<float>()[ch];
        const float scale = weight.data<float>()[ch] * is;
        const float mean_dy = static_cast<float>(sums.data<float>()[ch] / total);
        // xhat * sum_dy_xhat / M, with xhat = (x - mean) * invstd, folded into one factor.
        const float k = static_cast<float>(sums.data<float>()[at.c + ch] / total) * is;
        for (int64_t i = 0; i < at.n; ++i) {
          for (int64_t j = 0; j < at.hw; ++j) {
            const int64_t e = at(i, ch, j);
            out[e] = scale * (ds[e] - mean_dy - (xs[e] - mu) * k);
          }
        }
      }
    });
  });
}

void CpuBackend::max_pool2d_forward(const Tensor& x, const Tensor& y, const Tensor& indices,
                                    int64_t kernel, ops::Conv2dGeometry g,
                                    ops::ImageLayout layout) {
  run_on_stream(y.device(), [=] {
    const ops::ImageDims in = ops::image_dims(x, layout), out = ops::image_dims(y, layout);
    with_index(x, layout, [&](auto at_in) {
      const auto at_out = index_of<decltype(at_in)::kNhwcValue>(y, layout);
      for (int64_t i = 0; i < in.n; ++i) {
        for (int64_t ch = 0; ch < in.c; ++ch) {
          for (int64_t oy = 0; oy < out.h; ++oy) {
            const int64_t y0 = std::max<int64_t>(oy * g.stride - g.padding, 0);
            const int64_t y1 = std::min<int64_t>(oy * g.stride - g.padding + kernel, in.h);
            for (int64_t ox = 0; ox < out.w; ++ox) {
              const int64_t x0 = std::max<int64_t>(ox * g.stride - g.padding, 0);
              const int64_t x1 = std::min<int64_t>(ox * g.stride - g.padding + kernel, in.w);
              float best = -std::numeric_limits<float>::infinity();
              int64_t pos = y0 * in.w + x0;
              for (int64_t yy = y0; yy < y1; ++yy) {
                for (int64_t xx = x0; xx < x1; ++xx) {
                  const float v = x.data<float>()[at_in(i, ch, yy * in.w + xx)];
                  if (v > best || std::isnan(v)) {  // a NaN wins, as in PyTorch
                    best = v;
                    pos = yy * in.w + xx;
                  }
                }
              }
              const int64_t o = at_out(i, ch, oy * out.w + ox);
              y.data<float>()[o] = best;
              indices.data<int32_t>()[o] = static_cast<int32_t>(pos);
            }
          }
        }
      }
    });
  });
}

// The saved indices say where each window's maximum was; the geometry is not needed here.
void CpuBackend::max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Tensor& dx,
                                     int64_t /*kernel*/, ops::Conv2dGeometry /*g*/,
                                     ops::ImageLayout layout) {
  run_on_stream(dx.device(), [=] {
    std::fill(dx.data<float>(), dx.data<float>() + dx.numel(), 0.0f);
    with_index(dx, layout, [&](auto at_in) {
      const auto at_out = index_of<decltype(at_in)::kNhwcValue>(dy, layout);
      for (int64_t i = 0; i < at_out.n; ++i)
        for (int64_t ch = 0; ch < at_out.c; ++ch)
          for (int64_t j = 0; j < at_out.hw; ++j) {
            const int64_t o = at_out(i, ch, j);
            dx.data<float>()[at_in(i, ch, indices.data<int32_t>()[o])] += dy.data<float>()[o];
          }
    });
  });
}

void CpuBackend::global_avg_pool_forward(const Tensor& x, const Tensor& y,
                                         ops::ImageLayout layout) {
  run_on_stream(y.device(), [=] {
    with_index(x, layout, [&](auto at) {
      for (int64_t i = 0; i < at.n; ++i) {
        for (int64_t ch = 0; ch < at.c; ++ch) {
          double s = 0;
          for (int64_t j = 0; j < at.hw; ++j) s += x.data<float>()[at(i, ch, j)];
          y.data<float>()[i * at.c + ch] = static_cast<float>(s / static_cast<double>(at.hw));
        }
      }
    });
  });
}

void CpuBackend::global_avg_pool_backward(const Tensor& dy, const Tensor& dx,
                                          ops::ImageLayout layout) {
  run_on_stream(dx.device(), [=] {
    with_index(dx, layout, [&](auto at) {
      for (int64_t i = 0; i < at.n; ++i) {
        for (int64_t ch = 0; ch < at.c; ++ch) {
          const float v = dy.data<float>()[i * at.c + ch] / static_cast<float>(at.hw);
          for (int64_t j = 0; j < at.hw; ++j) dx.data<float>()[at(i, ch, j)] = v;
        }
      }
    });
  });
}

void CpuBackend::nchw_to_nhwc(const Tensor& x, const Tensor& y) {
  run_on_stream(y.device(), [=] {
    const auto from = index_of<false>(x, ops::ImageLayout::NCHW);
    const Index<true> to{from.n, from.c, from.hw};
    for (int64_t i = 0; i < from.n; ++i)
      for (int64_t ch = 0; ch < from.c; ++ch)
        for (int64_t j = 0; j < from.hw; ++j)
          y.data<float>()[to(i, ch, j)] = x.data<float>()[from(i, ch, j)];
  });
}

void CpuBackend::normalize_u8_images(const Tensor& x, const Tensor& out, const float* scale,
                                     const float* shift, int channels) {
  std::array<float, 4> sc{}, sh{};
  std::copy(scale, scale + channels, sc.begin());
  std::copy(shift, shift + channels, sh.begin());
  run_on_stream(out.device(), [=] {
    const uint8_t* in = x.data<uint8_t>();
    float* o = out.data<float>();
    const int64_t plane = x.size(2) * x.size(3);
    const int64_t planes = x.size(0) * channels;
    for (int64_t p = 0; p < planes; ++p) {
      const auto c = static_cast<size_t>(p % channels);
      for (int64_t i = p * plane; i < (p + 1) * plane; ++i) o[i] = in[i] * sc[c] + sh[c];
    }
  });
}

}  // namespace ddpb::cpu
