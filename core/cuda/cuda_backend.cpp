// The CUDA Backend: turns the validated tensor arguments of core/ops.h into launcher calls
// (core/cuda/cuda_kernels.h) on the current stream of the tensors' device.
//
// Note [Scratch memory in CUDA ops]
// Ops that need temporary buffers take them as tensors from the device's caching allocator
// while the op's stream is current, and drop them as soon as the kernels are enqueued. That
// is safe without a sync: the allocator hands a freed block out again only to allocations of
// the same stream (core/allocator.h), whose later kernels run after ours in stream order.
#include <cuda_runtime_api.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_gemm.h"
#include "core/cuda/cuda_kernels.h"
#include "core/cuda/cuda_stream.h"
#include "core/system_info.h"
#include "core/tensor.h"

namespace ddpb {
namespace gpu {
namespace {

float* f32(const Tensor& t) {
  return t.data<float>();
}
const int32_t* i32(const Tensor& t) {
  return t.data<int32_t>();
}

// The one dtype of `ts` (bf16-capable ops, whose launchers take one dtype for the call).
// core/ops.cpp has checked it; a mismatch here would make a kernel misread a buffer.
DType same_dtype(const char* op, std::initializer_list<const Tensor*> ts) {
  const DType dtype = (*ts.begin())->dtype();
  for (const Tensor* t : ts) {
    DDPB_CHECK(t->dtype() == dtype)
        << op << ": " << t->describe() << " is not " << dtype_name(dtype);
  }
  return dtype;
}

// The device and current stream an op runs on; the device is made current for the launch,
// because a kernel cannot be launched onto another device's stream.
class OpScope {
 public:
  explicit OpScope(const Tensor& t)
      : device_(t.device()), scope_(device_.index), stream_(current_stream_handle(device_)) {}
  const Device& device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

  // Scratch of `floats` floats; see Note [Scratch memory in CUDA ops].
  float* scratch(int64_t floats) {
    if (floats <= 0) return nullptr;
    scratch_.push_back(Tensor::empty({floats}, DType::F32, device_));
    return scratch_.back().data<float>();
  }

 private:
  Device device_;
  DeviceScope scope_;
  cudaStream_t stream_;
  std::vector<Tensor> scratch_;
};

ImageExtents extents(const Tensor& images, ops::ImageLayout layout) {
  const ops::ImageDims d = ops::image_dims(images, layout);
  return {d.n, d.c, d.h * d.w, layout == ops::ImageLayout::NHWC};
}

// The pooling of `in` into `out`.
PoolExtents pool_extents(const Tensor& in, const Tensor& out, int64_t kernel, ops::Conv2dGeometry g,
                         ops::ImageLayout layout) {
  const ops::ImageDims i = ops::image_dims(in, layout), o = ops::image_dims(out, layout);
  return {i.n, i.c,    i.h,      i.w,       o.h,
          o.w, kernel, g.stride, g.padding, layout == ops::ImageLayout::NHWC};
}

// The convolution of the images x with w [K,C,R,R].
ConvDims conv_dims(const Tensor& x, const Tensor& w, ops::Conv2dGeometry g,
                   ops::ImageLayout layout) {
  const ops::ImageDims d = ops::image_dims(x, layout);
  return {d.n,      d.c,       d.h,
          d.w,      w.size(0), w.size(2),
          g.stride, g.padding, layout == ops::ImageLayout::NHWC};
}

bool is_pinned(const Tensor& t) {
  return t.storage() != nullptr && t.storage()->pinned();
}

class CudaBackend final : public Backend {
 public:
  // ---- Runtime ----
  StreamPtr make_stream(const Device& device, std::string name, StreamKind /*kind*/) override {
    return std::make_shared<CudaStream>(device, std::move(name));
  }
  std::unique_ptr<EventImpl> make_event(const Device& device) override {
    return std::make_unique<CudaEvent>(device);
  }
  std::unique_ptr<MemoryBackend> make_memory(const Device& device) override {
    return make_device_memory(device);
  }
  int current_device_index() const override {
    int index = -1;
    if (cudaGetDevice(&index) != cudaSuccess) return -1;
    return index;
  }
  void set_device(const Device& device) override {
    DDPB_CHECK(device.is_cuda()) << "CUDA set_device on " << device.str();
    CUDA_CHECK(cudaSetDevice(device.index)) << "selecting " << device.str();
  }

  // ---- GEMM ----
  void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
            float alpha, float beta, const Tensor& bias, ops::Activation act) override {
    OpScope op(c);
    Matmul mm;
    mm.a = a.raw_data();
    mm.trans_a = trans_a;
    mm.b = b.raw_data();
    mm.trans_b = trans_b;
    mm.c = c.raw_data();
    mm.ab_dtype = same_dtype("gemm", {&a, &b});
    mm.c_dtype = c.dtype();
    mm.m = c.size(0);
    mm.n = c.size(1);
    mm.k = trans_a ? a.size(0) : a.size(1);
    mm.alpha = alpha;
    mm.beta = beta;
    mm.bias = bias.defined() ? f32(bias) : nullptr;
    mm.act = act;
    mm.staging = [&op, floats = matmul_staging_floats(mm)] { return op.scratch(floats); };
    launch_matmul(gemm_context(op.device()), mm);
  }

  // ---- Element-wise ----
  void fill(const Tensor& t, float value) override {
    OpScope op(t);
    launch_fill(f32(t), t.numel(), value, op.stream());
  }
  void zero(const Tensor& t) override {
    if (t.nbytes() == 0) return;
    OpScope op(t);
    CUDA_CHECK(cudaMemsetAsync(t.raw_data(), 0, t.nbytes(), op.stream())) << t.describe();
  }
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override {
    OpScope op(out);
    launch_add(a.raw_data(), a.dtype(), b.raw_data(), b.dtype(), out.raw_data(), out.dtype(),
               out.numel(), op.stream());
  }
  void mul(const Tensor& a, const Tensor& b, const Tensor& out) override {
    OpScope op(out);
    launch_mul(f32(a), f32(b), f32(out), out.numel(), op.stream());
  }
  void axpy(float alpha, const Tensor& x, const Tensor& y) override {
    OpScope op(y);
    launch_axpy(alpha, f32(x), f32(y), y.numel(), op.stream());
  }
  void scale(const Tensor& t, float s) override {
    OpScope op(t);
    launch_scale(f32(t), t.numel(), s, op.stream());
  }
  void scale_copy(const Tensor& src, const Tensor& dst, float s) override {
    OpScope op(dst);
    launch_scale_copy(f32(src), f32(dst), dst.numel(), s, op.stream());
  }
  void relu_forward(const Tensor& x, const Tensor& y) override {
    OpScope op(y);
    launch_relu_forward(x.raw_data(), y.raw_data(), same_dtype("relu_forward", {&x, &y}), y.numel(),
                        op.stream());
  }
  void relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) override {
    OpScope op(dx);
    launch_relu_backward(dy.raw_data(), y.raw_data(), dx.raw_data(),
                         same_dtype("relu_backward", {&dy, &y, &dx}), dx.numel(), op.stream());
  }
  void gelu_forward(const Tensor& x, const Tensor& y) override {
    OpScope op(y);
    launch_gelu_forward(x.raw_data(), y.raw_data(), same_dtype("gelu_forward", {&x, &y}), y.numel(),
                        op.stream());
  }
  void gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& dx) override {
    OpScope op(dx);
    launch_gelu_backward(dy.raw_data(), x.raw_data(), dx.raw_data(),
                         same_dtype("gelu_backward", {&dy, &x, &dx}), dx.numel(), op.stream());
  }
  void cast(const Tensor& src, const Tensor& dst) override {
    OpScope op(dst);
    launch_cast(src.raw_data(), src.dtype(), dst.raw_data(), dst.dtype(), dst.numel(), op.stream());
  }

  // ---- Reductions ----
  void sum_rows(const Tensor& x, const Tensor& out) override {
    OpScope op(out);
    const int64_t cols = out.numel();
    const int64_t rows = cols > 0 ? x.numel() / cols : 0;
    launch_sum_rows(x.raw_data(), x.dtype(), rows, cols, f32(out),
                    op.scratch(sum_rows_scratch_floats(rows, cols)), op.stream());
  }
  void sum_all(const Tensor& x, const Tensor& out) override {
    OpScope op(out);
    launch_sum_all(f32(x), x.numel(), f32(out), 1.0f, op.scratch(sum_all_scratch_floats(x.numel())),
                   op.stream());
  }
  void all_finite(const Tensor& x, const Tensor& out) override {
    OpScope op(out);
    launch_all_finite(f32(x), x.numel(), f32(out), op.stream());
  }

  void orthogonalize_columns(const Tensor& m, float epsilon) override {
    OpScope op(m);
    launch_orthogonalize_columns(f32(m), m.size(0), m.size(1), epsilon, op.stream());
  }

  // ---- Softmax, layer norm ----
  void softmax_forward(const Tensor& x, const Tensor& y) override {
    OpScope op(y);
    const int64_t cols = x.size(-1);
    launch_softmax_forward(f32(x), f32(y), x.numel() / cols, cols, op.stream());
  }
  void softmax_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) override {
    OpScope op(dx);
    const int64_t cols = y.size(-1);
    launch_softmax_backward(f32(dy), f32(y), f32(dx), y.numel() / cols, cols, op.stream());
  }
  void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                         const Tensor& mean, const Tensor& rstd, float eps) override {
    OpScope op(y);
    const int64_t cols = x.size(-1);
    launch_layernorm_forward(f32(x), f32(weight), f32(bias), f32(y), f32(mean), f32(rstd),
                             x.numel() / cols, cols, eps, op.stream());
  }
  void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                          const Tensor& mean, const Tensor& rstd, const Tensor& dx,
                          const Tensor& dweight, const Tensor& dbias) override {
    OpScope op(dx);
    const int64_t cols = x.size(-1);
    const int64_t rows = x.numel() / cols;
    launch_layernorm_backward(
        f32(dy), f32(x), f32(weight), f32(mean), f32(rstd), f32(dx), f32(dweight), f32(dbias), rows,
        cols, op.scratch(layernorm_backward_scratch_floats(rows, cols)), op.stream());
  }

  // ---- Embedding ----
  void embedding_forward(const Tensor& ids, const Tensor& table, const Tensor& out) override {
    OpScope op(out);
    launch_embedding_forward(i32(ids), f32(table), f32(out), ids.numel(), table.size(0),
                             table.size(1), op.stream());
  }
  void embedding_backward(const Tensor& dout, const Tensor& ids, const Tensor& dtable) override {
    OpScope op(dtable);
    launch_embedding_backward(f32(dout), i32(ids), f32(dtable), ids.numel(), dtable.size(0),
                              dtable.size(1), op.stream());
  }

  // ---- Attention ----
  void attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& att,
                         int n_head) override {
    OpScope op(out);
    const int64_t batch = qkv.size(0);
    const int64_t seq = qkv.size(1);
    const int64_t channels = out.size(2);
    float* scratch = op.scratch(attention_forward_scratch_floats(batch, seq, channels, n_head));
    launch_attention_forward(gemm_context(op.device()), f32(qkv), f32(out), f32(att), batch, seq,
                             channels, n_head, scratch);
  }
  void attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& att,
                          const Tensor& dqkv, int n_head) override {
    OpScope op(dqkv);
    const int64_t batch = qkv.size(0);
    const int64_t seq = qkv.size(1);
    const int64_t channels = dout.size(2);
    float* scratch = op.scratch(attention_backward_scratch_floats(batch, seq, channels, n_head));
    launch_attention_backward(gemm_context(op.device()), f32(dout), f32(qkv), f32(att), f32(dqkv),
                              batch, seq, channels, n_head, scratch);
  }

  void flash_attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                               int n_head) override {
    OpScope op(out);
    launch_flash_attention_forward(f32(qkv), f32(out), f32(lse), qkv.size(0), qkv.size(1),
                                   out.size(2), n_head, op.stream());
  }
  void flash_attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& out,
                                const Tensor& lse, const Tensor& dqkv, int n_head) override {
    OpScope op(dqkv);
    const int64_t batch = qkv.size(0), seq = qkv.size(1);
    float* scratch = op.scratch(flash_attention_backward_scratch_floats(batch, seq, n_head));
    launch_flash_attention_backward(f32(dout), f32(qkv), f32(out), f32(lse), f32(dqkv), batch, seq,
                                    out.size(2), n_head, scratch, op.stream());
  }

  // ---- Cross-entropy ----
  void cross_entropy_forward(const Tensor& logits, const Tensor& targets, const Tensor& loss,
                             const Tensor& probs) override {
    OpScope op(probs);
    const int64_t rows = logits.size(0);
    const int64_t vocab = logits.size(1);
    launch_cross_entropy_forward(f32(logits), i32(targets), f32(loss), f32(probs), rows, vocab,
                                 op.scratch(cross_entropy_forward_scratch_floats(rows)),
                                 op.stream());
  }
  void cross_entropy_backward(const Tensor& dloss, const Tensor& probs, const Tensor& targets,
                              const Tensor& dlogits) override {
    OpScope op(dlogits);
    launch_cross_entropy_backward(f32(dloss), f32(probs), i32(targets), f32(dlogits), probs.size(0),
                                  probs.size(1), op.stream());
  }

  // ---- Images (cuda_conv.cpp, cuda_norm_pool.cu) ----
  void normalize_u8_images(const Tensor& x, const Tensor& out, const float* scale,
                           const float* shift, int channels) override {
    OpScope op(out);
    launch_normalize_u8(x.data<uint8_t>(), f32(out), out.numel(), x.size(2) * x.size(3), channels,
                        scale, shift, op.stream());
  }
  void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& y, ops::Conv2dGeometry g,
                      ops::ImageLayout layout) override {
    OpScope op(y);
    run_convolution(ConvDirection::Forward, conv_dims(x, w, g, layout), f32(x), f32(w), f32(y),
                    op.device().index, op.stream());
  }
  void conv2d_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx,
                            ops::Conv2dGeometry g, ops::ImageLayout layout) override {
    OpScope op(dx);
    run_convolution(ConvDirection::BackwardData, conv_dims(dx, w, g, layout), f32(dx), f32(w),
                    f32(dy), op.device().index, op.stream());
  }
  void conv2d_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& dw,
                              ops::Conv2dGeometry g, ops::ImageLayout layout) override {
    OpScope op(dw);
    run_convolution(ConvDirection::BackwardFilter, conv_dims(x, dw, g, layout), f32(x), f32(dw),
                    f32(dy), op.device().index, op.stream());
  }
  void batch_norm_stats(const Tensor& x, const Tensor& stats, ops::ImageLayout layout) override {
    OpScope op(x);
    const ImageExtents e = extents(x, layout);
    launch_batch_norm_stats(f32(x), f32(stats), e, op.scratch(batch_norm_stats_scratch_floats(e)),
                            op.stream());
  }
  void batch_norm_gather_stats(const Tensor& stats, float eps, float momentum, const Tensor& mean,
                               const Tensor& invstd, const Tensor& count,
                               const Tensor& running_mean, const Tensor& running_var,
                               const Tensor& num_batches_tracked) override {
    OpScope op(mean);
    const bool running = running_mean.defined();
    launch_batch_norm_gather_stats(
        f32(stats), stats.size(0), mean.numel(), eps, momentum, f32(mean), f32(invstd), f32(count),
        running ? f32(running_mean) : nullptr, running ? f32(running_var) : nullptr,
        running ? num_batches_tracked.data<int64_t>() : nullptr, op.stream());
  }
  void batch_norm_elemt(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                        const Tensor& weight, const Tensor& bias, const Tensor& y,
                        ops::ImageLayout layout) override {
    OpScope op(y);
    launch_batch_norm_elemt(f32(x), f32(mean), f32(invstd), f32(weight), f32(bias), f32(y),
                            extents(x, layout), op.stream());
  }
  void batch_norm_backward_reduce(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                  const Tensor& invstd, const Tensor& sums,
                                  ops::ImageLayout layout) override {
    OpScope op(x);
    const ImageExtents e = extents(x, layout);
    launch_batch_norm_backward_reduce(f32(dy), f32(x), f32(mean), f32(invstd), f32(sums), e,
                                      op.scratch(batch_norm_backward_reduce_scratch_floats(e)),
                                      op.stream());
  }
  void batch_norm_backward_elemt(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                 const Tensor& invstd, const Tensor& weight, const Tensor& sums,
                                 const Tensor& count, const Tensor& dx,
                                 ops::ImageLayout layout) override {
    OpScope op(dx);
    launch_batch_norm_backward_elemt(f32(dy), f32(x), f32(mean), f32(invstd), f32(weight),
                                     f32(sums), f32(count), f32(dx), extents(x, layout),
                                     op.stream());
  }
  void max_pool2d_forward(const Tensor& x, const Tensor& y, const Tensor& indices, int64_t kernel,
                          ops::Conv2dGeometry g, ops::ImageLayout layout) override {
    OpScope op(y);
    launch_max_pool2d_forward(f32(x), f32(y), indices.data<int32_t>(),
                              pool_extents(x, y, kernel, g, layout), op.stream());
  }
  void max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Tensor& dx,
                           int64_t kernel, ops::Conv2dGeometry g,
                           ops::ImageLayout layout) override {
    OpScope op(dx);
    launch_max_pool2d_backward(f32(dy), i32(indices), f32(dx),
                               pool_extents(dx, dy, kernel, g, layout), op.stream());
  }
  void global_avg_pool_forward(const Tensor& x, const Tensor& y, ops::ImageLayout layout) override {
    OpScope op(y);
    launch_global_avg_pool_forward(f32(x), f32(y), extents(x, layout), op.stream());
  }
  void global_avg_pool_backward(const Tensor& dy, const Tensor& dx,
                                ops::ImageLayout layout) override {
    OpScope op(dx);
    launch_global_avg_pool_backward(f32(dy), f32(dx), extents(dx, layout), op.stream());
  }
  void nchw_to_nhwc(const Tensor& x, const Tensor& y) override {
    OpScope op(y);
    launch_nchw_to_nhwc(f32(x), f32(y), extents(x, ops::ImageLayout::NCHW), op.stream());
  }

  // ---- Copies ----
  void copy(const Tensor& src, const Tensor& dst) override {
    const size_t nbytes = src.nbytes();
    if (nbytes == 0) return;
    const Device& from = src.device();
    const Device& to = dst.device();
    if (from.is_cuda() && to.is_cuda()) {
      if (from.index == to.index) {
        OpScope op(dst);
        CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), nbytes, cudaMemcpyDeviceToDevice,
                                   op.stream()))
            << src.describe() << " -> " << dst.describe();
      } else {
        copy_peer(src, dst, nbytes);
      }
      return;
    }
    // Host <-> device on the GPU side's current stream. Pageable host memory cannot be read
    // or written by the copy engine asynchronously with respect to the caller, who may reuse
    // the buffer on return: such copies wait for the stream before returning.
    const bool to_device = to.is_cuda();
    DDPB_CHECK(to_device || from.is_cuda())
        << "CUDA copy between two host tensors: " << src.describe() << " -> " << dst.describe();
    const Tensor& gpu_side = to_device ? dst : src;
    const Tensor& host_side = to_device ? src : dst;
    OpScope op(gpu_side);
    CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), nbytes,
                               to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                               op.stream()))
        << src.describe() << " -> " << dst.describe();
    if (!is_pinned(host_side)) {
      CUDA_CHECK(cudaStreamSynchronize(op.stream()))
          << "copy " << src.describe() << " -> " << dst.describe();
    }
  }

  // ---- Optimizers ----
  void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, float lr,
                float momentum, float weight_decay, bool first_step) override {
    OpScope op(param);
    float* buf = momentum != 0.0f ? f32(momentum_buf) : nullptr;
    launch_sgd_step(f32(param), f32(grad), buf, param.numel(), lr, momentum, weight_decay,
                    first_step, op.stream());
  }
  void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                  float lr, float beta1, float beta2, float eps, float weight_decay,
                  int64_t step) override {
    OpScope op(param);
    launch_adamw_step(f32(param), f32(grad), f32(m), f32(v), param.numel(), lr, beta1, beta2, eps,
                      weight_decay, step, op.stream());
  }
  // Note [Multi-tensor apply] (cuda_optim.cu): the whole list in a few launches.
  void sgd_step_multi(std::span<const Tensor> params, std::span<const Tensor> grads,
                      std::span<const Tensor> momentum_bufs, float lr, float momentum,
                      float weight_decay, bool first_step) override {
    if (params.empty()) return;
    OpScope op(params[0]);
    std::vector<SgdTensors> list;
    list.reserve(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      list.push_back({f32(params[i]), f32(grads[i]),
                      momentum_bufs.empty() ? nullptr : f32(momentum_bufs[i]), params[i].numel()});
    }
    launch_sgd_step_multi(list, lr, momentum, weight_decay, first_step, op.stream());
  }
  void adamw_step_multi(std::span<const Tensor> params, std::span<const Tensor> grads,
                        std::span<const Tensor> m, std::span<const Tensor> v, float lr, float beta1,
                        float beta2, float eps, float weight_decay, int64_t step) override {
    if (params.empty()) return;
    OpScope op(params[0]);
    std::vector<AdamwTensors> list;
    list.reserve(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      list.push_back({f32(params[i]), f32(grads[i]), f32(m[i]), f32(v[i]), params[i].numel()});
    }
    launch_adamw_step_multi(list, lr, beta1, beta2, eps, weight_decay, step, op.stream());
  }

 private:
  // Note [Peer copies]
  // The copy runs on dst's current stream, as core/ops.h says. Two events order it against
  // src's current stream without blocking the host: the copy starts after the work that
  // produced src, and src's stream cannot reuse src's memory (a freed block goes back to
  // that stream's pool) before the copy has read it.
  static void copy_peer(const Tensor& src, const Tensor& dst, size_t nbytes) {
    const int from = src.device().index;
    const int to = dst.device().index;
    // Direct over NVLink/PCIe instead of staged through the host, where the pair supports
    // it (enabled once per pair; recorded in the run's context).
    enable_peer_access({src.device(), dst.device()});
    cudaStream_t src_stream = nullptr;
    OrderingEvent src_ready;
    {
      DeviceScope scope(from);
      src_stream = current_stream_handle(src.device());
      src_ready.create();
      CUDA_CHECK(cudaEventRecord(src_ready.event, src_stream));
    }
    DeviceScope scope(to);
    cudaStream_t dst_stream = current_stream_handle(dst.device());
    OrderingEvent copy_done;
    copy_done.create();
    CUDA_CHECK(cudaStreamWaitEvent(dst_stream, src_ready.event, 0));
    CUDA_CHECK(cudaMemcpyPeerAsync(dst.raw_data(), to, src.raw_data(), from, nbytes, dst_stream))
        << src.describe() << " -> " << dst.describe();
    CUDA_CHECK(cudaEventRecord(copy_done.event, dst_stream));
    CUDA_CHECK(cudaStreamWaitEvent(src_stream, copy_done.event, 0));
  }

  // An event used only for ordering (no timing). Destroying it while recorded work is still
  // pending is fine: CUDA releases it once that work has completed.
  struct OrderingEvent {
    cudaEvent_t event = nullptr;
    void create() { CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming)); }
    ~OrderingEvent() {
      if (event != nullptr) CUDA_CHECK_NOTHROW(cudaEventDestroy(event));
    }
  };
};

}  // namespace
}  // namespace gpu

Backend& cuda_backend() {
  static gpu::CudaBackend backend;
  return backend;
}

}  // namespace ddpb
