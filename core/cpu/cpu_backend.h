// The CPU backend: logical CPU devices. Each op runs on the calling thread (the device's
// Inline stream) or, on an Executor stream, is queued onto that stream's worker thread.
// GEMMs run in oneDNN (matmul plans and sgemm; OpenBLAS for matrix-vector products), pinned to
// one thread, so N logical devices use N cores.
#pragma once

#include <string>

#include "core/backend.h"

namespace ddpb::cpu {

// BLAS threads per CPU device (`--cpu-threads`, default 1). One, so that N logical devices use N
// cores; more oversubscribe the cores whenever the devices share them, which group "flags"
// of the suite prices against PyTorch's default of every core per process. Applies to the
// threads that run BLAS from then on (OpenBLAS's setting is per process; oneDNN's OpenMP
// threads are set per calling thread, see use_openmp_threads).
void set_blas_threads(int threads);
int blas_threads();

// oneDNN's OpenMP runtime (libgomp) runs the calling thread's next oneDNN calls on `threads`
// threads. OpenMP's setting is per thread, so every thread that calls oneDNN says how many
// it wants before each call (a thread-local comparison when nothing changes).
void use_openmp_threads(int threads);

// "oneDNN 2.6.3, ISA avx512_core_bf16": the version and the instruction set its kernels use
// here (`ddpbench env`; ONEDNN_MAX_CPU_ISA lowers it).
std::string onednn_summary();

class CpuBackend final : public Backend {
 public:
  CpuBackend();
  StreamPtr make_stream(const Device& device, std::string name, StreamKind kind) override;
  std::unique_ptr<EventImpl> make_event(const Device& device) override;
  std::unique_ptr<MemoryBackend> make_memory(const Device& device) override;
  void set_device(const Device&) override {}

  void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
            float alpha, float beta, const Tensor& bias, ops::Activation act) override;
  void fill(const Tensor& t, float value) override;
  void zero(const Tensor& t) override;
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void mul(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void axpy(float alpha, const Tensor& x, const Tensor& y) override;
  void scale(const Tensor& t, float s) override;
  void scale_copy(const Tensor& src, const Tensor& dst, float s) override;
  void relu_forward(const Tensor& x, const Tensor& y) override;
  void relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) override;
  void gelu_forward(const Tensor& x, const Tensor& y) override;
  void gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& dx) override;
  void cast(const Tensor& src, const Tensor& dst) override;
  void sum_rows(const Tensor& x, const Tensor& out) override;
  void sum_all(const Tensor& x, const Tensor& out) override;
  void all_finite(const Tensor& x, const Tensor& out) override;
  void orthogonalize_columns(const Tensor& m, float epsilon) override;
  void softmax_forward(const Tensor& x, const Tensor& y) override;
  void softmax_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) override;
  void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                         const Tensor& mean, const Tensor& rstd, float eps) override;
  void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                          const Tensor& mean, const Tensor& rstd, const Tensor& dx,
                          const Tensor& dweight, const Tensor& dbias) override;
  void embedding_forward(const Tensor& ids, const Tensor& table, const Tensor& out) override;
  void embedding_backward(const Tensor& dout, const Tensor& ids, const Tensor& dtable) override;
  void attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& att,
                         int n_head) override;
  void attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& att,
                          const Tensor& dqkv, int n_head) override;
  void flash_attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                               int n_head) override;
  void flash_attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& out,
                                const Tensor& lse, const Tensor& dqkv, int n_head) override;
  void normalize_u8_images(const Tensor& x, const Tensor& out, const float* scale,
                           const float* shift, int channels) override;
  void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& y, ops::Conv2dGeometry g,
                      ops::ImageLayout layout) override;
  void conv2d_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx,
                            ops::Conv2dGeometry g, ops::ImageLayout layout) override;
  void conv2d_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& dw,
                              ops::Conv2dGeometry g, ops::ImageLayout layout) override;
  void batch_norm_stats(const Tensor& x, const Tensor& stats, ops::ImageLayout layout) override;
  void batch_norm_gather_stats(const Tensor& stats, float eps, float momentum, const Tensor& mean,
                               const Tensor& invstd, const Tensor& count,
                               const Tensor& running_mean, const Tensor& running_var,
                               const Tensor& num_batches_tracked) override;
  void batch_norm_elemt(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                        const Tensor& weight, const Tensor& bias, const Tensor& y,
                        ops::ImageLayout layout) override;
  void batch_norm_backward_reduce(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                  const Tensor& invstd, const Tensor& sums,
                                  ops::ImageLayout layout) override;
  void batch_norm_backward_elemt(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                 const Tensor& invstd, const Tensor& weight, const Tensor& sums,
                                 const Tensor& count, const Tensor& dx,
                                 ops::ImageLayout layout) override;
  void max_pool2d_forward(const Tensor& x, const Tensor& y, const Tensor& indices, int64_t kernel,
                          ops::Conv2dGeometry g, ops::ImageLayout layout) override;
  void max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Tensor& dx,
                           int64_t kernel, ops::Conv2dGeometry g, ops::ImageLayout layout) override;
  void global_avg_pool_forward(const Tensor& x, const Tensor& y, ops::ImageLayout layout) override;
  void global_avg_pool_backward(const Tensor& dy, const Tensor& dx,
                                ops::ImageLayout layout) override;
  void nchw_to_nhwc(const Tensor& x, const Tensor& y) override;
  void cross_entropy_forward(const Tensor& logits, const Tensor& targets, const Tensor& loss,
                             const Tensor& probs) override;
  void cross_entropy_backward(const Tensor& dloss, const Tensor& probs, const Tensor& targets,
                              const Tensor& dlogits) override;
  void copy(const Tensor& src, const Tensor& dst) override;
  void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, float lr,
                float momentum, float weight_decay, bool first_step) override;
  void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                  float lr, float beta1, float beta2, float eps, float weight_decay,
                  int64_t step) override;
  void sgd_step_multi(std::span<const Tensor> params, std::span<const Tensor> grads,
                      std::span<const Tensor> momentum_bufs, float lr, float momentum,
                      float weight_decay, bool first_step) override;
  void adamw_step_multi(std::span<const Tensor> params, std::span<const Tensor> grads,
                        std::span<const Tensor> m, std::span<const Tensor> v, float lr, float beta1,
                        float beta2, float eps, float weight_decay, int64_t step) override;
};

// Runs `fn` on the current stream of `device`: now for an Inline stream, queued for an
// Executor, recorded while the stream captures a graph. Every CPU op goes through here so
// that side streams keep their order and captures see every op.
template <typename Fn>
void run_on_stream(const Device& device, Fn&& fn) {
  Stream& s = current_stream(device);
  if (s.is_inline() && !s.capturing()) {
    fn();
  } else {
    // Run a stack copy of the closure, not the heap one std::function holds: a kernel's
    // float stores could alias the heap closure's captured floats (lr, alpha, ...), so GCC
    // reloads them on every iteration and does not vectorise; a local copy whose address
    // does not escape is split into registers. (Measured: the SGD step of `embed` ran 2.6x
    // slower replayed from a captured graph than inline, the same on executor streams.)
    s.enqueue([fn = std::forward<Fn>(fn)] {
      auto local = fn;
      local();
    });
  }
}

// Row-major SGEMM on raw pointers with leading dimensions, on blas_threads() threads: C =
// alpha op(A) op(B) + beta C (used by attention; the GEMM op goes through the same checks
// to planned_sgemm).
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The same product through a cached oneDNN matmul plan (Note [oneDNN matmul plans]).
void planned_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                   int64_t ldc);

}  // namespace ddpb::cpu
