// CPU convolutions through oneDNN's primitive API (the library PyTorch's CPU convolutions
// use), forward, backward-data and backward-weights.
//
// Note [oneDNN convolution plans]
// A primitive is built for one shape (N, C, H, W, K, R, stride, padding) and direction, with
// the memory layouts left to oneDNN (format_tag::any): it picks blocked layouts that its JIT
// kernels run fastest on. Our tensors are plain NCHW or NHWC (--channels-last) and OIHW, so
// each argument whose chosen layout differs is reordered into a staging buffer (inputs) or
// out of one (the output), as PyTorch's ideep does. Building a primitive costs milliseconds, so the
// plans, their reorders and staging buffers are cached per shape. The cache is per thread: a
// logical CPU device runs its ops on one thread, and a plan's staging buffers must not be shared by
// two devices running at once. OpenMP, oneDNN's threading here, is held to one thread per calling
// thread, so that N logical devices use N cores, as with OpenBLAS.
#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <map>
#include <memory>
#include <optional>

#include "core/check.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/onednn.h"

namespace ddpb::cpu {
namespace {

using dnnl::memory;
using Dims = memory::dims;

enum class Direction { Forward, BackwardData, BackwardWeights };

// The shape of one convolution: its plan's key.
struct ConvShape {
  Direction direction;
  std::array<int64_t, 8> dims;  // N, C, H, W, K, R, stride, padding
  ops::ImageLayout layout;      // of the images (the weights are OIHW in both)
  bool operator<(const ConvShape& o) const {
    return std::tie(direction, dims, layout) < std::tie(o.direction, o.dims, o.layout);
  }
};

// One primitive argument in the layout the primitive chose (Note [oneDNN convolution plans]).
struct Arg {
  int id = 0;               // DNNL_ARG_*
  memory::desc plain;       // our tensor's layout
  bool staged = false;      // the primitive's layout differs: go through `buffer`
  memory buffer;            // in the primitive's layout
  dnnl::primitive reorder;  // plain -> buffer for inputs, buffer -> plain for the output

  Arg(int arg, const memory::desc& ours, const memory::desc& chosen, bool is_output)
      : id(arg), plain(ours) {
    staged = chosen != ours;
    if (!staged) return;
    buffer = memory(chosen, onednn_engine());
    reorder = is_output ? dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), chosen,
                                                                      onednn_engine(), ours))
                        : dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), ours,
                                                                      onednn_engine(), chosen));
  }
};

struct Plan {
  dnnl::primitive primitive;
  std::vector<Arg> inputs;  // two
  std::optional<Arg> output;
};

struct Geometry {
  Dims src, wei, dst, strides, padding;
};

Geometry geometry(const ConvShape& s) {
  const auto [n, c, h, w, k, r, stride, pad] = s.dims;
  const int64_t p = (h + 2 * pad - r) / stride + 1, q = (w + 2 * pad - r) / stride + 1;
  return {{n, c, h, w}, {k, c, r, r}, {n, k, p, q}, {stride, stride}, {pad, pad}};
}

memory::desc plain_desc(const Dims& dims, memory::format_tag tag) {
  return memory::desc(dims, memory::data_type::f32, tag);
}
memory::desc any_desc(const Dims& dims) {
  return memory::desc(dims, memory::data_type::f32, memory::format_tag::any);
}

dnnl::convolution_forward::primitive_desc forward_desc(const Geometry& g) {
  dnnl::convolution_forward::desc d(
      dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, any_desc(g.src),
      any_desc(g.wei), any_desc(g.dst), g.strides, g.padding, g.padding);
  return dnnl::convolution_forward::primitive_desc(d, onednn_engine());
}

std::unique_ptr<Plan> make_plan(const ConvShape& s) {
  const Geometry g = geometry(s);
  // oneDNN's dims are always (N, C, H, W); the tag says how they are laid out.
  const auto images =
      s.layout == ops::ImageLayout::NHWC ? memory::format_tag::nhwc : memory::format_tag::nchw;
  const auto src = plain_desc(g.src, images);
  const auto wei = plain_desc(g.wei, memory::format_tag::oihw);
  const auto dst = plain_desc(g.dst, images);
  auto plan = std::make_unique<Plan>();
  const auto fwd = forward_desc(g);
  switch (s.direction) {
    case Direction::Forward:
      plan->primitive = dnnl::convolution_forward(fwd);
      plan->inputs = {Arg(DNNL_ARG_SRC, src, fwd.src_desc(), false),
                      Arg(DNNL_ARG_WEIGHTS, wei, fwd.weights_desc(), false)};
      plan->output.emplace(DNNL_ARG_DST, dst, fwd.dst_desc(), true);
      break;
    case Direction::BackwardData: {
      dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, any_desc(g.src),
                                              any_desc(g.wei), any_desc(g.dst), g.strides,
                                              g.padding, g.padding);
      dnnl::convolution_backward_data::primitive_desc pd(d, onednn_engine(), fwd);
      plan->primitive = dnnl::convolution_backward_data(pd);
      plan->inputs = {Arg(DNNL_ARG_DIFF_DST, dst, pd.diff_dst_desc(), false),
                      Arg(DNNL_ARG_WEIGHTS, wei, pd.weights_desc(), false)};
      plan->output.emplace(DNNL_ARG_DIFF_SRC, src, pd.diff_src_desc(), true);
      break;
    }
    case Direction::BackwardWeights: {
      dnnl::convolution_backward_weights::desc d(dnnl::algorithm::convolution_direct,
                                                 any_desc(g.src), any_desc(g.wei), any_desc(g.dst),
                                                 g.strides, g.padding, g.padding);
      dnnl::convolution_backward_weights::primitive_desc pd(d, onednn_engine(), fwd);
      plan->primitive = dnnl::convolution_backward_weights(pd);
      plan->inputs = {Arg(DNNL_ARG_DIFF_DST, dst, pd.diff_dst_desc(), false),
                      Arg(DNNL_ARG_SRC, src, pd.src_desc(), false)};
      plan->output.emplace(DNNL_ARG_DIFF_WEIGHTS, wei, pd.diff_weights_desc(), true);
      break;
    }
  }
  return plan;
}

Plan& plan_for(const ConvShape& s) {
  thread_local std::map<ConvShape, std::unique_ptr<Plan>> plans;
  auto& slot = plans[s];
  if (!slot) {
    try {
      slot = make_plan(s);
    } catch (const dnnl::error& e) {
      plans.erase(s);
      DDPB_FAIL() << "oneDNN has no convolution for this shape: " << e.what();
    }
  }
  return *slot;
}

// Runs the plan on our plain buffers: inputs a and b, output out.
void execute(Plan& plan, const float* a, const float* b, float* out) {
  dnnl::stream& stream = onednn_stream(1);  // OpenMP held to this one thread
  std::unordered_map<int, memory> args;
  const float* in_ptrs[2] = {a, b};
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    Arg& arg = plan.inputs[i];
    memory user(arg.plain, onednn_engine(), const_cast<float*>(in_ptrs[i]));
    if (arg.staged) {
      arg.reorder.execute(stream, {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, arg.buffer}});
      args.emplace(arg.id, arg.buffer);
    } else {
      args.emplace(arg.id, user);
    }
  }
  Arg& o = *plan.output;
  memory user_out(o.plain, onednn_engine(), out);
  args.emplace(o.id, o.staged ? o.buffer : user_out);
  plan.primitive.execute(stream, args);
  if (o.staged) o.reorder.execute(stream, {{DNNL_ARG_FROM, o.buffer}, {DNNL_ARG_TO, user_out}});
  stream.wait();
}

ConvShape shape_of(Direction d, const Tensor& x, const Tensor& w, ops::Conv2dGeometry g,
                   ops::ImageLayout layout) {
  const ops::ImageDims i = ops::image_dims(x, layout);
  return {d, {i.n, i.c, i.h, i.w, w.size(0), w.size(2), g.stride, g.padding}, layout};
}

}  // namespace

void CpuBackend::conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& y,
                                ops::Conv2dGeometry g, ops::ImageLayout layout) {
  run_on_stream(y.device(), [=] {
    execute(plan_for(shape_of(Direction::Forward, x, w, g, layout)), x.data<float>(),
            w.data<float>(), y.data<float>());
  });
}

void CpuBackend::conv2d_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx,
                                      ops::Conv2dGeometry g, ops::ImageLayout layout) {
  run_on_stream(dx.device(), [=] {
    execute(plan_for(shape_of(Direction::BackwardData, dx, w, g, layout)), dy.data<float>(),
            w.data<float>(), dx.data<float>());
  });
}

void CpuBackend::conv2d_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& dw,
                                        ops::Conv2dGeometry g, ops::ImageLayout layout) {
  run_on_stream(dw.device(), [=] {
    execute(plan_for(shape_of(Direction::BackwardWeights, x, dw, g, layout)), dy.data<float>(),
            x.data<float>(), dw.data<float>());
  });
}

}  // namespace ddpb::cpu
