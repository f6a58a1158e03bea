// Argument validation of the image ops (convolution, batch normalisation, pooling), then
// dispatch to the backend of the tensors' device. Backends may rely on these checks.
#include "core/check.h"
#include "core/op_checks.h"
#include "core/ops.h"

namespace ddpb::ops {

using namespace detail;

namespace {

void require_nchw(const char* op, const Tensor& t) {
  DDPB_CHECK(t.dim() == 4) << op << " needs an NCHW tensor, got " << t.describe();
}

// The output shape of a convolution, or the reason there is none.
Shape conv_output_shape(const char* op, const Tensor& x, const Tensor& w, Conv2dGeometry g) {
  require_nchw(op, x);
  DDPB_CHECK(w.dim() == 4 && w.size(1) == x.size(1) && w.size(2) == w.size(3))
      << op << ": weight " << w.describe() << " does not fit input " << x.describe()
      << " (expected [K, " << x.size(1) << ", R, R])";
  DDPB_CHECK(g.stride >= 1 && g.padding >= 0)
      << op << ": stride " << g.stride << ", padding " << g.padding;
  const int64_t p = g.out_extent(x.size(2), w.size(2)), q = g.out_extent(x.size(3), w.size(3));
  DDPB_CHECK(p >= 1 && q >= 1) << op << ": input " << x.describe() << " is smaller than the "
                               << w.size(2) << "x" << w.size(3) << " kernel";
  return {x.size(0), w.size(0), p, q};
}

void require_channels(const char* op, const Tensor& x, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts) require_shape(op, *t, {x.size(1)});
}

}  // namespace

void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& y, Conv2dGeometry g) {
  DDPB_OP_RANGE("conv2d_forward");
  Backend& be = same_device("conv2d_forward", {{&x, F}, {&w, F}, {&y, F}});
  require_shape("conv2d_forward output", y, conv_output_shape("conv2d_forward", x, w, g));
  accesses("conv2d_forward", y.device(), {&x, &w}, {&y});
  be.conv2d_forward(x, w, y, g);
}

void conv2d_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx, Conv2dGeometry g) {
  DDPB_OP_RANGE("conv2d_backward_data");
  Backend& be = same_device("conv2d_backward_data", {{&dy, F}, {&w, F}, {&dx, F}});
  require_shape("conv2d_backward_data dy", dy, conv_output_shape("conv2d_backward_data", dx, w, g));
  accesses("conv2d_backward_data", dx.device(), {&dy, &w}, {&dx});
  be.conv2d_backward_data(dy, w, dx, g);
}

void conv2d_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& dw, Conv2dGeometry g) {
  DDPB_OP_RANGE("conv2d_backward_weight");
  Backend& be = same_device("conv2d_backward_weight", {{&dy, F}, {&x, F}, {&dw, F}});
  require_shape("conv2d_backward_weight dy", dy,
                conv_output_shape("conv2d_backward_weight", x, dw, g));
  accesses("conv2d_backward_weight", dw.device(), {&dy, &x}, {&dw});
  be.conv2d_backward_weight(dy, x, dw, g);
}

void batch_norm_stats(const Tensor& x, const Tensor& stats) {
  DDPB_OP_RANGE("batch_norm_stats");
  Backend& be = same_device("batch_norm_stats", {{&x, F}, {&stats, F}});
  require_nchw("batch_norm_stats", x);
  require_shape("batch_norm_stats stats", stats, {2 * x.size(1) + 1});
  DDPB_CHECK(x.numel() > 0) << "batch_norm_stats of an empty batch " << x.describe();
  accesses("batch_norm_stats", x.device(), {&x}, {&stats});
  be.batch_norm_stats(x, stats);
}

void batch_norm_gather_stats(const Tensor& stats, float eps, float momentum, const Tensor& mean,
                             const Tensor& invstd, const Tensor& count, const Tensor& running_mean,
                             const Tensor& running_var, const Tensor& num_batches_tracked) {
  Backend& be =
      same_device("batch_norm_gather_stats", {{&stats, F}, {&mean, F}, {&invstd, F}, {&count, F}});
  const int64_t channels = mean.numel();
  DDPB_CHECK(stats.dim() == 2 && stats.size(1) == 2 * channels + 1)
      << "batch_norm_gather_stats: stats must be [G, " << 2 * channels + 1 << "], got "
      << stats.describe();
  require_shape("batch_norm_gather_stats mean", mean, {channels});
  require_shape("batch_norm_gather_stats invstd", invstd, {channels});
  require_shape("batch_norm_gather_stats count", count, {1});
  DDPB_CHECK(eps > 0 && momentum >= 0 && momentum <= 1)
      << "batch_norm_gather_stats: eps " << eps << ", momentum " << momentum;
  if (running_mean.defined()) {
    same_device("batch_norm_gather_stats running stats",
                {{&mean, F}, {&running_mean, F}, {&running_var, F}});
    same_device("batch_norm_gather_stats num_batches_tracked",
                {{&mean, F}, {&num_batches_tracked, DType::I64}});
    require_shape("batch_norm_gather_stats running_mean", running_mean, {channels});
    require_shape("batch_norm_gather_stats running_var", running_var, {channels});
    DDPB_CHECK(num_batches_tracked.numel() == 1)
        << "num_batches_tracked must hold one value, got " << num_batches_tracked.describe();
    accesses("batch_norm_gather_stats", mean.device(), {&stats},
             {&mean, &invstd, &count, &running_mean, &running_var, &num_batches_tracked});
  } else {
    accesses("batch_norm_gather_stats", mean.device(), {&stats}, {&mean, &invstd, &count});
  }
  be.batch_norm_gather_stats(stats, eps, momentum, mean, invstd, count, running_mean, running_var,
                             num_batches_tracked);
}

void batch_norm_elemt(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                      const Tensor& weight, const Tensor& bias, const Tensor& y) {
  DDPB_OP_RANGE("batch_norm_elemt");
  Backend& be = same_device("batch_norm_elemt",
                            {{&x, F}, {&mean, F}, {&invstd, F}, {&weight, F}, {&bias, F}, {&y, F}});
  require_nchw("batch_norm_elemt", x);
  require_channels("batch_norm_elemt", x, {&mean, &invstd, &weight, &bias});
  require_shape("batch_norm_elemt output", y, x.shape());
  accesses("batch_norm_elemt", y.device(), {&x, &mean, &invstd, &weight, &bias}, {&y});
  be.batch_norm_elemt(x, mean, invstd, weight, bias, y);
}

void batch_norm_backward_reduce(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                const Tensor& invstd, const Tensor& sums) {
  DDPB_OP_RANGE("batch_norm_backward_reduce");
  Backend& be = same_device("batch_norm_backward_reduce",
                            {{&dy, F}, {&x, F}, {&mean, F}, {&invstd, F}, {&sums, F}});
  require_nchw("batch_norm_backward_reduce", x);
  require_shape("batch_norm_backward_reduce dy", dy, x.shape());
  require_channels("batch_norm_backward_reduce", x, {&mean, &invstd});
  require_shape("batch_norm_backward_reduce sums", sums, {2 * x.size(1)});
  accesses("batch_norm_backward_reduce", x.device(), {&dy, &x, &mean, &invstd}, {&sums});
  be.batch_norm_backward_reduce(dy, x, mean, invstd, sums);
}

void batch_norm_backward_elemt(const Tensor& dy, const Tensor& x, const Tensor& mean,
                               const Tensor& invstd, const Tensor& weight, const Tensor& sums,
                               const Tensor& count, const Tensor& dx) {
  DDPB_OP_RANGE("batch_norm_backward_elemt");
  Backend& be = same_device("batch_norm_backward_elemt", {{&dy, F},
                                                          {&x, F},
                                                          {&mean, F},
                                                          {&invstd, F},
                                                          {&weight, F},
                                                          {&sums, F},
                                                          {&count, F},
                                                          {&dx, F}});
  require_nchw("batch_norm_backward_elemt", x);
  require_shape("batch_norm_backward_elemt dy", dy, x.shape());
  require_shape("batch_norm_backward_elemt dx", dx, x.shape());
  require_channels("batch_norm_backward_elemt", x, {&mean, &invstd, &weight});
  require_shape("batch_norm_backward_elemt sums", sums, {2 * x.size(1)});
  require_shape("batch_norm_backward_elemt count", count, {1});
  accesses("batch_norm_backward_elemt", dx.device(),
           {&dy, &x, &mean, &invstd, &weight, &sums, &count}, {&dx});
  be.batch_norm_backward_elemt(dy, x, mean, invstd, weight, sums, count, dx);
}

void max_pool2d_forward(const Tensor& x, const Tensor& y, const Tensor& indices, int64_t kernel,
                        Conv2dGeometry g) {
  DDPB_OP_RANGE("max_pool2d_forward");
  Backend& be = same_device("max_pool2d_forward", {{&x, F}, {&y, F}});
  same_device("max_pool2d_forward indices", {{&y, F}, {&indices, I}});
  require_nchw("max_pool2d_forward", x);
  DDPB_CHECK(kernel >= 1 && g.stride >= 1 && g.padding >= 0 && 2 * g.padding <= kernel)
      << "max_pool2d: kernel " << kernel << ", stride " << g.stride << ", padding " << g.padding
      << " (padding may be at most half the kernel)";
  const int64_t p = g.out_extent(x.size(2), kernel), q = g.out_extent(x.size(3), kernel);
  DDPB_CHECK(p >= 1 && q >= 1) << "max_pool2d: input " << x.describe() << " is smaller than the "
                               << kernel << "x" << kernel << " window";
  require_shape("max_pool2d_forward output", y, {x.size(0), x.size(1), p, q});
  require_shape("max_pool2d_forward indices", indices, y.shape());
  accesses("max_pool2d_forward", y.device(), {&x}, {&y, &indices});
  be.max_pool2d_forward(x, y, indices, kernel, g);
}

void max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Tensor& dx, int64_t kernel,
                         Conv2dGeometry g) {
  DDPB_OP_RANGE("max_pool2d_backward");
  Backend& be = same_device("max_pool2d_backward", {{&dy, F}, {&dx, F}});
  same_device("max_pool2d_backward indices", {{&dy, F}, {&indices, I}});
  require_nchw("max_pool2d_backward", dx);
  require_nchw("max_pool2d_backward", dy);
  require_shape("max_pool2d_backward indices", indices, dy.shape());
  DDPB_CHECK(dy.size(0) == dx.size(0) && dy.size(1) == dx.size(1) &&
             dy.size(2) == g.out_extent(dx.size(2), kernel) &&
             dy.size(3) == g.out_extent(dx.size(3), kernel))
      << "max_pool2d_backward: dy " << dy.describe() << " does not match dx " << dx.describe()
      << " pooled " << kernel << "x" << kernel << " with stride " << g.stride;
  accesses("max_pool2d_backward", dx.device(), {&dy, &indices}, {&dx});
  be.max_pool2d_backward(dy, indices, dx, kernel, g);
}

void global_avg_pool_forward(const Tensor& x, const Tensor& y) {
  Backend& be = same_device("global_avg_pool_forward", {{&x, F}, {&y, F}});
  require_nchw("global_avg_pool_forward", x);
  require_shape("global_avg_pool_forward output", y, {x.size(0), x.size(1)});
  DDPB_CHECK(x.size(2) * x.size(3) > 0) << "global_avg_pool of empty planes " << x.describe();
  accesses("global_avg_pool_forward", y.device(), {&x}, {&y});
  be.global_avg_pool_forward(x, y);
}

void global_avg_pool_backward(const Tensor& dy, const Tensor& dx) {
  Backend& be = same_device("global_avg_pool_backward", {{&dy, F}, {&dx, F}});
  require_nchw("global_avg_pool_backward", dx);
  require_shape("global_avg_pool_backward dy", dy, {dx.size(0), dx.size(1)});
  accesses("global_avg_pool_backward", dx.device(), {&dy}, {&dx});
  be.global_avg_pool_backward(dy, dx);
}

}  // namespace ddpb::ops
