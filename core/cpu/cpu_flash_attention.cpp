// Causal self-attention on CPU without the [T,T] probabilities: the flash-attention
// algorithm (Dao et al.) with BLAS tiles. Per (batch, head), queries and keys are taken in
// tiles of kTile rows straight from the packed qkv tensor (strided views, no copies):
//
//   forward   for each query tile, for each key tile at or before it: S = scale * Q K^T,
//             an online softmax over the tile's valid (causal) columns that rescales the
//             running output and sum, then O += P V. Each row's log-sum-exp is kept.
//   backward  Delta_i = dout_i . out_i; then for each key tile, for each query tile at or
//             after it: P = exp(scale * Q K^T - lse) (masked), dV += P^T dO, dP = dO V^T,
//             dS = P * (dP - Delta) * scale, dQ += dS K, dK += dS^T Q.
//
// Scratch is a few kTile x kTile tiles, so memory does not grow with T^2. The same
// algorithm runs on CUDA (core/cuda/cuda_flash_attention.cu); tests compare both with the
// materialised attention of cpu_attention.cpp.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cpu/cpu_backend.h"
#include "core/cpu/cpu_math.h"

namespace ddpb::cpu {
namespace {

constexpr int64_t kTile = 64;

struct FlashDims {
  int64_t b, t, c, h, d;
  FlashDims(const Tensor& qkv, int n_head)
      : b(qkv.size(0)), t(qkv.size(1)), c(qkv.size(2) / 3), h(n_head), d(c / n_head) {}
  int64_t qkv_row() const { return 3 * c; }  // row stride of q, k, v (and dq, dk, dv)
  // Offsets of row `i` of head `hd` of batch `bi`.
  int64_t q(int64_t bi, int64_t hd, int64_t i) const { return (bi * t + i) * 3 * c + hd * d; }
  int64_t k(int64_t bi, int64_t hd, int64_t i) const { return q(bi, hd, i) + c; }
  int64_t v(int64_t bi, int64_t hd, int64_t i) const { return q(bi, hd, i) + 2 * c; }
  int64_t o(int64_t bi, int64_t hd, int64_t i) const { return (bi * t + i) * c + hd * d; }
  int64_t lse(int64_t bi, int64_t hd) const { return (bi * h + hd) * t; }
};

}  // namespace

void CpuBackend::flash_attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                         int n_head) {
  run_on_stream(out.device(), [=] {
    const FlashDims dm(qkv, n_head);
    const float* x = qkv.data<float>();
    float* o = out.data<float>();
    float* l_out = lse.data<float>();
    const float scale = 1.0f / std::sqrt(static_cast<float>(dm.d));
    std::vector<float> s(static_cast<size_t>(kTile * kTile));
    std::vector<float> row_max(kTile), row_sum(kTile);
    for (int64_t bi = 0; bi < dm.b; ++bi) {
      for (int64_t hd = 0; hd < dm.h; ++hd) {
        for (int64_t i0 = 0; i0 < dm.t; i0 += kTile) {
          const int64_t rows = std::min(kTile, dm.t - i0);
          float* ot = o + dm.o(bi, hd, i0);
          for (int64_t r = 0; r < rows; ++r) {
            std::fill_n(ot + r * dm.c, dm.d, 0.0f);
            row_max[r] = -INFINITY;
            row_sum[r] = 0.0f;
          }
          // Key tiles up to the last query row of this tile (causal).
          for (int64_t j0 = 0; j0 < i0 + rows; j0 += kTile) {
            const int64_t cols = std::min(kTile, i0 + rows - j0);
            sgemm(false, true, rows, cols, dm.d, scale, x + dm.q(bi, hd, i0), dm.qkv_row(),
                  x + dm.k(bi, hd, j0), dm.qkv_row(), 0.0f, s.data(), kTile);
            for (int64_t r = 0; r < rows; ++r) {
              float* sr = s.data() + r * kTile;
              const int64_t valid = std::clamp<int64_t>(i0 + r - j0 + 1, 0, cols);
              if (valid == 0) {  // every key of this tile is after query i0 + r
                std::fill_n(sr, cols, 0.0f);
                continue;
              }
              float mx = row_max[r];
              for (int64_t j = 0; j < valid; ++j) mx = std::max(mx, sr[j]);
              const float correction = fast_exp(row_max[r] - mx);  // 0 on the first tile
              float sum = 0.0f;
              for (int64_t j = 0; j < valid; ++j) {
                sr[j] = fast_exp(sr[j] - mx);
                sum += sr[j];
              }
              std::fill(sr + valid, sr + cols, 0.0f);
              row_sum[r] = row_sum[r] * correction + sum;
              row_max[r] = mx;
              float* orow = ot + r * dm.c;
              for (int64_t e = 0; e < dm.d; ++e) orow[e] *= correction;
            }
            sgemm(false, false, rows, dm.d, cols, 1.0f, s.data(), kTile, x + dm.v(bi, hd, j0),
                  dm.qkv_row(), 1.0f, ot, dm.c);
          }
          for (int64_t r = 0; r < rows; ++r) {
            const float inv = 1.0f / row_sum[r];
            float* orow = ot + r * dm.c;
            for (int64_t e = 0; e < dm.d; ++e) orow[e] *= inv;
            l_out[dm.lse(bi, hd) + i0 + r] = row_max[r] + std::log(row_sum[r]);
          }
        }
      }
    }
  });
}

void CpuBackend::flash_attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& out,
                                          const Tensor& lse, const Tensor& dqkv, int n_head) {
  run_on_stream(dqkv.device(), [=] {
    const FlashDims dm(qkv, n_head);
    const float* x = qkv.data<float>();
    const float* go = dout.data<float>();
    const float* o = out.data<float>();
    const float* l_in = lse.data<float>();
    float* dx = dqkv.data<float>();
    const float scale = 1.0f / std::sqrt(static_cast<float>(dm.d));
    std::vector<float> p(static_cast<size_t>(kTile * kTile)), ds(p.size());
    std::vector<float> delta(static_cast<size_t>(dm.t));
    for (int64_t bi = 0; bi < dm.b; ++bi) {
      for (int64_t hd = 0; hd < dm.h; ++hd) {
        const float* lrow = l_in + dm.lse(bi, hd);
        for (int64_t i = 0; i < dm.t; ++i) {
          const float* a = go + dm.o(bi, hd, i);
          const float* b = o + dm.o(bi, hd, i);
          double acc = 0.0;
          for (int64_t e = 0; e < dm.d; ++e) acc += static_cast<double>(a[e]) * b[e];
          delta[static_cast<size_t>(i)] = static_cast<float>(acc);
          // dq, dk and dv of this head are accumulated below; start them at zero.
          for (int64_t part = 0; part < 3; ++part)
            std::fill_n(dx + dm.q(bi, hd, i) + part * dm.c, dm.d, 0.0f);
        }
        for (int64_t j0 = 0; j0 < dm.t; j0 += kTile) {
          const int64_t cols = std::min(kTile, dm.t - j0);
          // Query tiles at or after this key tile (kTile-aligned, so the first starts at j0).
          for (int64_t i0 = j0; i0 < dm.t; i0 += kTile) {
            const int64_t rows = std::min(kTile, dm.t - i0);
            sgemm(false, true, rows, cols, dm.d, scale, x + dm.q(bi, hd, i0), dm.qkv_row(),
                  x + dm.k(bi, hd, j0), dm.qkv_row(), 0.0f, p.data(), kTile);
            for (int64_t r = 0; r < rows; ++r) {
              float* pr = p.data() + r * kTile;
              const int64_t valid = std::clamp<int64_t>(i0 + r - j0 + 1, 0, cols);
              const float l = lrow[i0 + r];
              for (int64_t j = 0; j < valid; ++j) pr[j] = fast_exp(pr[j] - l);
              std::fill(pr + valid, pr + cols, 0.0f);
            }
            // dV_j += P^T dO_i
            sgemm(true, false, cols, dm.d, rows, 1.0f, p.data(), kTile, go + dm.o(bi, hd, i0), dm.c,
                  1.0f, dx + dm.v(bi, hd, j0), dm.qkv_row());
            // dP = dO_i V_j^T, then dS = P * (dP - Delta) * scale (0 where P is masked).
            sgemm(false, true, rows, cols, dm.d, 1.0f, go + dm.o(bi, hd, i0), dm.c,
                  x + dm.v(bi, hd, j0), dm.qkv_row(), 0.0f, ds.data(), kTile);
            for (int64_t r = 0; r < rows; ++r) {
              const float* pr = p.data() + r * kTile;
              float* dr = ds.data() + r * kTile;
              const float dl = delta[static_cast<size_t>(i0 + r)];
              for (int64_t j = 0; j < cols; ++j) dr[j] = pr[j] * (dr[j] - dl) * scale;
            }
            // dQ_i += dS K_j;  dK_j += dS^T Q_i
            sgemm(false, false, rows, dm.d, cols, 1.0f, ds.data(), kTile, x + dm.k(bi, hd, j0),
                  dm.qkv_row(), 1.0f, dx + dm.q(bi, hd, i0), dm.qkv_row());
            sgemm(true, false, cols, dm.d, rows, 1.0f, ds.data(), kTile, x + dm.q(bi, hd, i0),
                  dm.qkv_row(), 1.0f, dx + dm.k(bi, hd, j0), dm.qkv_row());
          }
        }
      }
    }
  });
}

}  // namespace ddpb::cpu
