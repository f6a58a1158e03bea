// Causal self-attention on CPU: per (batch, head), GEMMs on strided views of the packed
// qkv tensor, so no permuted copies of q, k and v are made.
#include <cmath>
#include <vector>

#include "core/cpu/cpu_backend.h"
#include "core/cpu/cpu_math.h"

namespace ddpb::cpu {
namespace {

struct AttentionDims {
  int64_t b, t, c, h, d;
  AttentionDims(const Tensor& qkv, int n_head)
      : b(qkv.size(0)), t(qkv.size(1)), c(qkv.size(2) / 3), h(n_head), d(c / n_head) {}
  // Offsets of head `hd` of batch `bi` within qkv (row stride 3c) and out (row stride c).
  int64_t q(int64_t bi, int64_t hd) const { return bi * t * 3 * c + hd * d; }
  int64_t k(int64_t bi, int64_t hd) const { return q(bi, hd) + c; }
  int64_t v(int64_t bi, int64_t hd) const { return q(bi, hd) + 2 * c; }
  int64_t o(int64_t bi, int64_t hd) const { return bi * t * c + hd * d; }
  int64_t att(int64_t bi, int64_t hd) const { return (bi * h + hd) * t * t; }
};

}  // namespace

void CpuBackend::attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& att,
                                   int n_head) {
  run_on_stream(out.device(), [=] {
    AttentionDims dm(qkv, n_head);
    const float* x = qkv.data<float>();
    float* o = out.data<float>();
    float* a = att.data<float>();
    float scale = 1.0f / std::sqrt(static_cast<float>(dm.d));
    for (int64_t bi = 0; bi < dm.b; ++bi) {
      for (int64_t hd = 0; hd < dm.h; ++hd) {
        float* ap = a + dm.att(bi, hd);
        // scores = scale * q k^T, then a causal softmax over s <= t (zeros above).
        sgemm(false, true, dm.t, dm.t, dm.d, scale, x + dm.q(bi, hd), 3 * dm.c, x + dm.k(bi, hd),
              3 * dm.c, 0.0f, ap, dm.t);
        for (int64_t i = 0; i < dm.t; ++i) {
          float* row = ap + i * dm.t;
          float mx = row[0];
          for (int64_t j = 1; j <= i; ++j) mx = std::max(mx, row[j]);
          double sum = 0.0;
          for (int64_t j = 0; j <= i; ++j) {
            row[j] = fast_exp(row[j] - mx);
            sum += row[j];
          }
          float inv = static_cast<float>(1.0 / sum);
          for (int64_t j = 0; j <= i; ++j) row[j] *= inv;
          for (int64_t j = i + 1; j < dm.t; ++j) row[j] = 0.0f;
        }
        sgemm(false, false, dm.t, dm.d, dm.t, 1.0f, ap, dm.t, x + dm.v(bi, hd), 3 * dm.c, 0.0f,
              o + dm.o(bi, hd), dm.c);
      }
    }
  });
}

void CpuBackend::attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& att,
                                    const Tensor& dqkv, int n_head) {
  run_on_stream(dqkv.device(), [=] {
    AttentionDims dm(qkv, n_head);
    const float* x = qkv.data<float>();
    const float* go = dout.data<float>();
    const float* a = att.data<float>();
    float* dx = dqkv.data<float>();
    float scale = 1.0f / std::sqrt(static_cast<float>(dm.d));
    std::vector<float> datt(static_cast<size_t>(dm.t * dm.t));
    for (int64_t bi = 0; bi < dm.b; ++bi) {
      for (int64_t hd = 0; hd < dm.h; ++hd) {
        const float* ap = a + dm.att(bi, hd);
        // dv = att^T dout;  datt = dout v^T
        sgemm(true, false, dm.t, dm.d, dm.t, 1.0f, ap, dm.t, go + dm.o(bi, hd), dm.c, 0.0f,
              dx + dm.v(bi, hd), 3 * dm.c);
        sgemm(false, true, dm.t, dm.t, dm.d, 1.0f, go + dm.o(bi, hd), dm.c, x + dm.v(bi, hd),
              3 * dm.c, 0.0f, datt.data(), dm.t);
        // Softmax backward on the causal rows, with the score scale folded in.
        for (int64_t i = 0; i < dm.t; ++i) {
          float* dr = datt.data() + i * dm.t;
          const float* ar = ap + i * dm.t;
          double dot = 0.0;
          for (int64_t j = 0; j <= i; ++j) dot += static_cast<double>(dr[j]) * ar[j];
          for (int64_t j = 0; j <= i; ++j)
            dr[j] = scale * ar[j] * (dr[j] - static_cast<float>(dot));
          for (int64_t j = i + 1; j < dm.t; ++j) dr[j] = 0.0f;
        }
        // dq = dscores k;  dk = dscores^T q
        sgemm(false, false, dm.t, dm.d, dm.t, 1.0f, datt.data(), dm.t, x + dm.k(bi, hd), 3 * dm.c,
              0.0f, dx + dm.q(bi, hd), 3 * dm.c);
        sgemm(true, false, dm.t, dm.d, dm.t, 1.0f, datt.data(), dm.t, x + dm.q(bi, hd), 3 * dm.c,
              0.0f, dx + dm.k(bi, hd), 3 * dm.c);
      }
    }
  });
}

}  // namespace ddpb::cpu
