// The device backends behind core/ops.h, core/stream.h and core/allocator.h.
//
// There is one backend per device type: the CPU backend (core/cpu/) is always present; the
// CUDA backend (core/cuda/) is registered when ddpbench is built with CUDA. core/ops.cpp
// validates arguments once and then calls the backend of the tensors' device, so a backend
// method may assume shapes, dtypes and devices were already checked.
//
// Adding a backend means implementing this interface and registering it; nothing above
// core/ changes.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "core/allocator.h"
#include "core/ops.h"
#include "core/stream.h"

namespace ddpb {

class Backend {
 public:
  virtual ~Backend() = default;

  // ---- Runtime ----
  virtual StreamPtr make_stream(const Device& device, std::string name, StreamKind kind) = 0;
  virtual std::unique_ptr<EventImpl> make_event(const Device& device) = 0;
  virtual std::unique_ptr<MemoryBackend> make_memory(const Device& device) = 0;
  virtual void set_device(const Device& device) = 0;
  // The calling thread's current device index of this type (-1 where that means nothing).
  virtual int current_device_index() const { return -1; }

  // ---- Ops: the same contracts as core/ops.h, arguments already validated ----
  virtual void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
                    float alpha, float beta, const Tensor& bias, ops::Activation act) = 0;
  virtual void fill(const Tensor& t, float value) = 0;
  virtual void zero(const Tensor& t) = 0;
  virtual void add(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  virtual void mul(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  virtual void axpy(float alpha, const Tensor& x, const Tensor& y) = 0;
  virtual void scale(const Tensor& t, float s) = 0;
  virtual void scale_copy(const Tensor& src, const Tensor& dst, float s) = 0;
  virtual void relu_forward(const Tensor& x, const Tensor& y) = 0;
  virtual void relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) = 0;
  virtual void gelu_forward(const Tensor& x, const Tensor& y) = 0;
  virtual void gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& dx) = 0;
  virtual void cast(const Tensor& src, const Tensor& dst) = 0;
  virtual void sum_rows(const Tensor& x, const Tensor& out) = 0;
  virtual void sum_all(const Tensor& x, const Tensor& out) = 0;
  virtual void all_finite(const Tensor& x, const Tensor& out) = 0;
  virtual void orthogonalize_columns(const Tensor& m, float epsilon) = 0;
  virtual void softmax_forward(const Tensor& x, const Tensor& y) = 0;
  virtual void softmax_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) = 0;
  virtual void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                 const Tensor& y, const Tensor& mean, const Tensor& rstd,
                                 float eps) = 0;
  virtual void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                  const Tensor& mean, const Tensor& rstd, const Tensor& dx,
                                  const Tensor& dweight, const Tensor& dbias) = 0;
  virtual void embedding_forward(const Tensor& ids, const Tensor& table, const Tensor& out) = 0;
  virtual void embedding_backward(const Tensor& dout, const Tensor& ids, const Tensor& dtable) = 0;
  virtual void attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& att,
                                 int n_head) = 0;
  virtual void attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& att,
                                  const Tensor& dqkv, int n_head) = 0;
  virtual void flash_attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                       int n_head) = 0;
  virtual void flash_attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& out,
                                        const Tensor& lse, const Tensor& dqkv, int n_head) = 0;
  // out[n,c,:] = x[n,c,:] * scale[c] + shift[c] (x u8, out f32; ops::normalize_u8_images).
  virtual void normalize_u8_images(const Tensor& x, const Tensor& out, const float* scale,
                                   const float* shift, int channels) = 0;
  virtual void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& y,
                              ops::Conv2dGeometry g, ops::ImageLayout layout) = 0;
  virtual void conv2d_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx,
                                    ops::Conv2dGeometry g, ops::ImageLayout layout) = 0;
  virtual void conv2d_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& dw,
                                      ops::Conv2dGeometry g, ops::ImageLayout layout) = 0;
  virtual void batch_norm_stats(const Tensor& x, const Tensor& stats, ops::ImageLayout layout) = 0;
  virtual void batch_norm_gather_stats(const Tensor& stats, float eps, float momentum,
                                       const Tensor& mean, const Tensor& invstd,
                                       const Tensor& count, const Tensor& running_mean,
                                       const Tensor& running_var,
                                       const Tensor& num_batches_tracked) = 0;
  virtual void batch_norm_elemt(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                const Tensor& weight, const Tensor& bias, const Tensor& y,
                                ops::ImageLayout layout) = 0;
  virtual void batch_norm_backward_reduce(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                          const Tensor& invstd, const Tensor& sums,
                                          ops::ImageLayout layout) = 0;
  virtual void batch_norm_backward_elemt(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                         const Tensor& invstd, const Tensor& weight,
                                         const Tensor& sums, const Tensor& count, const Tensor& dx,
                                         ops::ImageLayout layout) = 0;
  virtual void max_pool2d_forward(const Tensor& x, const Tensor& y, const Tensor& indices,
                                  int64_t kernel, ops::Conv2dGeometry g,
                                  ops::ImageLayout layout) = 0;
  virtual void max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Tensor& dx,
                                   int64_t kernel, ops::Conv2dGeometry g,
                                   ops::ImageLayout layout) = 0;
  virtual void global_avg_pool_forward(const Tensor& x, const Tensor& y,
                                       ops::ImageLayout layout) = 0;
  virtual void global_avg_pool_backward(const Tensor& dy, const Tensor& dx,
                                        ops::ImageLayout layout) = 0;
  virtual void nchw_to_nhwc(const Tensor& x, const Tensor& y) = 0;
  virtual void cross_entropy_forward(const Tensor& logits, const Tensor& targets,
                                     const Tensor& loss, const Tensor& probs) = 0;
  virtual void cross_entropy_backward(const Tensor& dloss, const Tensor& probs,
                                      const Tensor& targets, const Tensor& dlogits) = 0;
  // Called when src or dst is on this backend's device type (CUDA handles every copy that
  // touches a GPU; the CPU backend only host-to-host).
  virtual void copy(const Tensor& src, const Tensor& dst) = 0;
  virtual void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf,
                        float lr, float momentum, float weight_decay, bool first_step) = 0;
  virtual void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                          float lr, float beta1, float beta2, float eps, float weight_decay,
                          int64_t step) = 0;
  // Lists of equal length; momentum_bufs is empty when momentum == 0.
  virtual void sgd_step_multi(std::span<const Tensor> params, std::span<const Tensor> grads,
                              std::span<const Tensor> momentum_bufs, float lr, float momentum,
                              float weight_decay, bool first_step) = 0;
  virtual void adamw_step_multi(std::span<const Tensor> params, std::span<const Tensor> grads,
                                std::span<const Tensor> m, std::span<const Tensor> v, float lr,
                                float beta1, float beta2, float eps, float weight_decay,
                                int64_t step) = 0;
};

// The backend for a device type. Throws UsageError for CUDA in a build without CUDA.
Backend& backend_for(DeviceType type);

// Defined by the CPU backend (always) and the CUDA backend (CUDA builds only).
Backend& cpu_backend();
// Plain 256-byte-aligned host memory (the CPU devices' memory source).
std::unique_ptr<MemoryBackend> make_host_memory();
#ifdef DDPB_HAVE_CUDA
Backend& cuda_backend();
// Memory source for page-locked host buffers (cudaHostAlloc).
std::unique_ptr<MemoryBackend> make_pinned_host_memory();
int cuda_device_count_impl();
#endif

}  // namespace ddpb
