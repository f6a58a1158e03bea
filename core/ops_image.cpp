// Argument validation of the image ops (convolution, batch normalisation, pooling), then
// dispatch to the backend of the tensors' device. Backends may rely on these checks.
#include <atomic>

#include "core/check.h"
#include "core/op_checks.h"
#include "core/ops.h"

namespace ddpb::ops {

using namespace detail;

namespace {

std::atomic<ImageLayout> g_image_layout{ImageLayout::NCHW};

// The output shape of a convolution, or the reason there is none.
Shape conv_output_shape(const char* op, const Tensor& x, const Tensor& w, Conv2dGeometry g,
                        ImageLayout layout) {
  const ImageDims d = image_dims(x, layout);
  DDPB_CHECK(w.dim() == 4 && w.size(1) == d.c && w.size(2) == w.size(3))
      << op << ": weight " << w.describe() << " does not fit input " << x.describe()
      << " (expected [K, " << d.c << ", R, R])";
  DDPB_CHECK(g.stride >= 1 && g.padding >= 0)
      << op << ": stride " << g.stride << ", padding " << g.padding;
  const int64_t p = g.out_extent(d.h, w.size(2)), q = g.out_extent(d.w, w.size(3));
  DDPB_CHECK(p >= 1 && q >= 1) << op << ": input " << x.describe() << " is smaller than the "
                               << w.size(2) << "x" << w.size(3) << " kernel";
  return image_shape({d.n, w.size(0), p, q}, layout);
}

void require_channels(const char* op, int64_t c, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts) require_shape(op, *t, {c});
}

}  // namespace

void set_image_layout(ImageLayout layout) {
  g_image_layout = layout;
}
ImageLayout image_layout() {
  return g_image_layout;
}

ImageDims image_dims(const Tensor& t, ImageLayout layout) {
  DDPB_CHECK(t.dim() == 4) << "an image batch must be 4-D (" << enum_name(layout) << "), got "
                           << t.describe();
  if (layout == ImageLayout::NCHW) return {t.size(0), t.size(1), t.size(2), t.size(3)};
  return {t.size(0), t.size(3), t.size(1), t.size(2)};
}

Shape image_shape(const ImageDims& d, ImageLayout layout) {
  return layout == ImageLayout::NCHW ? Shape{d.n, d.c, d.h, d.w} : Shape{d.n, d.h, d.w, d.c};
}

void normalize_u8_images(const Tensor& x, const Tensor& out, const std::vector<float>& mean,
                         const std::vector<float>& stddev) {
  DDPB_OP_RANGE("normalize_u8_images");
  Backend& be = same_device("normalize_u8_images", {{&x, DType::U8}, {&out, F}});
  DDPB_CHECK(x.dim() == 4 && x.shape() == out.shape())
      << "normalize_u8_images: x [N,C,H,W] and out of its shape, got " << x.describe() << " and "
      << out.describe();
  const int channels = static_cast<int>(x.size(1));
  DDPB_CHECK(channels >= 1 && channels <= 4 && mean.size() == static_cast<size_t>(channels) &&
             stddev.size() == mean.size())
      << "normalize_u8_images: one mean and stddev per channel (1 to 4), got " << channels
      << " channels, " << mean.size() << " means, " << stddev.size() << " stddevs";
  float scale[4] = {}, shift[4] = {};
  for (int c = 0; c < channels; ++c) {
    DDPB_CHECK(stddev[static_cast<size_t>(c)] > 0) << "normalize_u8_images: stddev must be > 0";
    scale[c] = 1.0f / (255.0f * stddev[static_cast<size_t>(c)]);
    shift[c] = -mean[static_cast<size_t>(c)] / stddev[static_cast<size_t>(c)];
  }
  accesses("normalize_u8_images", out.device(), {&x}, {&out});
  be.normalize_u8_images(x, out, scale, shift, channels);
}

void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& y, Conv2dGeometry g,
                    ImageLayout layout) {
  DDPB_OP_RANGE("conv2d_forward");
  Backend& be = same_device("conv2d_forward", {{&x, F}, {&w, F}, {&y, F}});
  require_shape("conv2d_forward output", y, conv_output_shape("conv2d_forward", x, w, g, layout));
  accesses("conv2d_forward", y.device(), {&x, &w}, {&y});
  be.conv2d_forward(x, w, y, g, layout);
}

void conv2d_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx, Conv2dGeometry g,
                          ImageLayout layout) {
  DDPB_OP_RANGE("conv2d_backward_data");
  Backend& be = same_device("conv2d_backward_data", {{&dy, F}, {&w, F}, {&dx, F}});
  require_shape("conv2d_backward_data dy", dy,
                conv_output_shape("conv2d_backward_data", dx, w, g, layout));
  accesses("conv2d_backward_data", dx.device(), {&dy, &w}, {&dx});
  be.conv2d_backward_data(dy, w, dx, g, layout);
}

void conv2d_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& dw, Conv2dGeometry g,
                            ImageLayout layout) {
  DDPB_OP_RANGE("conv2d_backward_weight");
  Backend& be = same_device("conv2d_backward_weight", {{&dy, F}, {&x, F}, {&dw, F}});
  require_shape("conv2d_backward_weight dy", dy,
                conv_output_shape("conv2d_backward_weight", x, dw, g, layout));
  accesses("conv2d_backward_weight", dw.device(), {&dy, &x}, {&dw});
  be.conv2d_backward_weight(dy, x, dw, g, layout);
}

void batch_norm_stats(const Tensor& x, const Tensor& stats, ImageLayout layout) {
  DDPB_OP_RANGE("batch_norm_stats");
  Backend& be = same_device("batch_norm_stats", {{&x, F}, {&stats, F}});
  const ImageDims d = image_dims(x, layout);
  require_shape("batch_norm_stats stats", stats, {2 * d.c + 1});
  DDPB_CHECK(x.numel() > 0) << "batch_norm_stats of an empty batch " << x.describe();
  accesses("batch_norm_stats", x.device(), {&x}, {&stats});
  be.batch_norm_stats(x, stats, layout);
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
                      const Tensor& weight, const Tensor& bias, const Tensor& y,
                      ImageLayout layout) {
  DDPB_OP_RANGE("batch_norm_elemt");
  Backend& be = same_device("batch_norm_elemt",
                            {{&x, F}, {&mean, F}, {&invstd, F}, {&weight, F}, {&bias, F}, {&y, F}});
  const ImageDims d = image_dims(x, layout);
  require_channels("batch_norm_elemt", d.c, {&mean, &invstd, &weight, &bias});
  require_shape("batch_norm_elemt output", y, x.shape());
  accesses("batch_norm_elemt", y.device(), {&x, &mean, &invstd, &weight, &bias}, {&y});
  be.batch_norm_elemt(x, mean, invstd, weight, bias, y, layout);
}

void batch_norm_backward_reduce(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                const Tensor& invstd, const Tensor& sums, ImageLayout layout) {
  DDPB_OP_RANGE("batch_norm_backward_reduce");
  Backend& be = same_device("batch_norm_backward_reduce",
                            {{&dy, F}, {&x, F}, {&mean, F}, {&invstd, F}, {&sums, F}});
  const ImageDims d = image_dims(x, layout);
  require_shape("batch_norm_backward_reduce dy", dy, x.shape());
  require_channels("batch_norm_backward_reduce", d.c, {&mean, &invstd});
  require_shape("batch_norm_backward_reduce sums", sums, {2 * d.c});
  accesses("batch_norm_backward_reduce", x.device(), {&dy, &x, &mean, &invstd}, {&sums});
  be.batch_norm_backward_reduce(dy, x, mean, invstd, sums, layout);
}

void batch_norm_backward_elemt(const Tensor& dy, const Tensor& x, const Tensor& mean,
                               const Tensor& invstd, const Tensor& weight, const Tensor& sums,
                               const Tensor& count, const Tensor& dx, ImageLayout layout) {
  DDPB_OP_RANGE("batch_norm_backward_elemt");
  Backend& be = same_device("batch_norm_backward_elemt", {{&dy, F},
                                                          {&x, F},
                                                          {&mean, F},
                                                          {&invstd, F},
                                                          {&weight, F},
                                                          {&sums, F},
                                                          {&count, F},
                                                          {&dx, F}});
  const ImageDims d = image_dims(x, layout);
  require_shape("batch_norm_backward_elemt dy", dy, x.shape());
  require_shape("batch_norm_backward_elemt dx", dx, x.shape());
  require_channels("batch_norm_backward_elemt", d.c, {&mean, &invstd, &weight});
  require_shape("batch_norm_backward_elemt sums", sums, {2 * d.c});
  require_shape("batch_norm_backward_elemt count", count, {1});
  accesses("batch_norm_backward_elemt", dx.device(),
           {&dy, &x, &mean, &invstd, &weight, &sums, &count}, {&dx});
  be.batch_norm_backward_elemt(dy, x, mean, invstd, weight, sums, count, dx, layout);
}

void max_pool2d_forward(const Tensor& x, const Tensor& y, const Tensor& indices, int64_t kernel,
                        Conv2dGeometry g, ImageLayout layout) {
  DDPB_OP_RANGE("max_pool2d_forward");
  Backend& be = same_device("max_pool2d_forward", {{&x, F}, {&y, F}});
  same_device("max_pool2d_forward indices", {{&y, F}, {&indices, I}});
  const ImageDims d = image_dims(x, layout);
  DDPB_CHECK(kernel >= 1 && g.stride >= 1 && g.padding >= 0 && 2 * g.padding <= kernel)
      << "max_pool2d: kernel " << kernel << ", stride " << g.stride << ", padding " << g.padding
      << " (padding may be at most half the kernel)";
  const int64_t p = g.out_extent(d.h, kernel), q = g.out_extent(d.w, kernel);
  DDPB_CHECK(p >= 1 && q >= 1) << "max_pool2d: input " << x.describe() << " is smaller than the "
                               << kernel << "x" << kernel << " window";
  require_shape("max_pool2d_forward output", y, image_shape({d.n, d.c, p, q}, layout));
  require_shape("max_pool2d_forward indices", indices, y.shape());
  accesses("max_pool2d_forward", y.device(), {&x}, {&y, &indices});
  be.max_pool2d_forward(x, y, indices, kernel, g, layout);
}

void max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Tensor& dx, int64_t kernel,
                         Conv2dGeometry g, ImageLayout layout) {
  DDPB_OP_RANGE("max_pool2d_backward");
  Backend& be = same_device("max_pool2d_backward", {{&dy, F}, {&dx, F}});
  same_device("max_pool2d_backward indices", {{&dy, F}, {&indices, I}});
  const ImageDims in = image_dims(dx, layout), out = image_dims(dy, layout);
  require_shape("max_pool2d_backward indices", indices, dy.shape());
  DDPB_CHECK(in.n == out.n && in.c == out.c && out.h == g.out_extent(in.h, kernel) &&
             out.w == g.out_extent(in.w, kernel))
      << "max_pool2d_backward: dy " << dy.describe() << " does not match dx " << dx.describe()
      << " pooled " << kernel << "x" << kernel << " with stride " << g.stride;
  accesses("max_pool2d_backward", dx.device(), {&dy, &indices}, {&dx});
  be.max_pool2d_backward(dy, indices, dx, kernel, g, layout);
}

void global_avg_pool_forward(const Tensor& x, const Tensor& y, ImageLayout layout) {
  Backend& be = same_device("global_avg_pool_forward", {{&x, F}, {&y, F}});
  const ImageDims d = image_dims(x, layout);
  require_shape("global_avg_pool_forward output", y, {d.n, d.c});
  DDPB_CHECK(d.h * d.w > 0) << "global_avg_pool of empty planes " << x.describe();
  accesses("global_avg_pool_forward", y.device(), {&x}, {&y});
  be.global_avg_pool_forward(x, y, layout);
}

void global_avg_pool_backward(const Tensor& dy, const Tensor& dx, ImageLayout layout) {
  Backend& be = same_device("global_avg_pool_backward", {{&dy, F}, {&dx, F}});
  const ImageDims d = image_dims(dx, layout);
  require_shape("global_avg_pool_backward dy", dy, {d.n, d.c});
  accesses("global_avg_pool_backward", dx.device(), {&dy}, {&dx});
  be.global_avg_pool_backward(dy, dx, layout);
}

void nchw_to_nhwc(const Tensor& x, const Tensor& y) {
  Backend& be = same_device("nchw_to_nhwc", {{&x, F}, {&y, F}});
  const ImageDims d = image_dims(x, ImageLayout::NCHW);
  require_shape("nchw_to_nhwc output", y, image_shape(d, ImageLayout::NHWC));
  accesses("nchw_to_nhwc", y.device(), {&x}, {&y});
  be.nchw_to_nhwc(x, y);
}

}  // namespace ddpb::ops
