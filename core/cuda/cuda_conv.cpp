// CUDA convolutions through cuDNN 9's graph API (the backend descriptors): forward,
// backward-data and backward-filter, NCHW or NHWC, f32.
//
// Note [cuDNN convolution plans]
// For each shape and direction a one-operation graph is built, cuDNN's heuristics (mode A,
// then the fallback list) rank the engine configurations, and the first one that passes the
// filter and finalises into an execution plan is kept (Note [cuDNN engine choice],
// core/cuda/conv_engines.h). Each new plan is logged once and kept in the run record's
// conv_plans (core/conv_plans.h). Plans are cached per (thread, device, shape, direction,
// alignment): a plan holds its cudnnHandle, which must not be used by two threads at once. The
// workspace comes from the caching allocator on the op's stream (Note [Scratch memory in CUDA
// ops]).
//
// Note [cuDNN filter layout]
// Our weights are [K,C,R,R] (OIHW) in both image layouts. Many engines want x, w and y in one
// layout, so an NHWC graph describes w as KRSC, as PyTorch's channels_last weights are, and
// the call works on a KRSC copy: written from w before forward and backward-data, copied
// back into dw (OIHW) after backward-filter. The copies cost two passes over the weights.
//
// libcudnn is opened at the first convolution (dlopen), not linked: a machine without cuDNN
// runs everything else, and the first convolution says what is missing.
#include <cuda_runtime_api.h>
#include <cudnn_graph.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/check.h"
#include "core/conv_plans.h"
#include "core/cuda/conv_engines.h"
#include "core/cuda/cuda_kernels.h"
#include "core/ops.h"
#include "core/tensor.h"

namespace ddpb::gpu {
namespace {

// The cuDNN entry points we use, resolved from libcudnn.so.9.
struct Cudnn {
  decltype(&cudnnCreate) create;
  decltype(&cudnnSetStream) set_stream;
  decltype(&cudnnGetErrorString) error_string;
  decltype(&cudnnBackendCreateDescriptor) create_descriptor;
  decltype(&cudnnBackendDestroyDescriptor) destroy_descriptor;
  decltype(&cudnnBackendFinalize) finalize;
  decltype(&cudnnBackendSetAttribute) set_attribute;
  decltype(&cudnnBackendGetAttribute) get_attribute;
  decltype(&cudnnBackendExecute) execute;
};

template <typename F>
void resolve(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  DDPB_CHECK(fn != nullptr) << "libcudnn.so.9 has no " << name;
}

const Cudnn& cudnn() {
  static Cudnn api = [] {
    void* lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_GLOBAL);
    DDPB_CHECK(lib != nullptr) << "convolutions on CUDA need cuDNN 9 (libcudnn.so.9), which "
                                  "was not found: install it or add its folder to "
                                  "LD_LIBRARY_PATH ("
                               << dlerror() << ")";
    Cudnn a{};
    resolve(lib, "cudnnCreate", a.create);
    resolve(lib, "cudnnSetStream", a.set_stream);
    resolve(lib, "cudnnGetErrorString", a.error_string);
    resolve(lib, "cudnnBackendCreateDescriptor", a.create_descriptor);
    resolve(lib, "cudnnBackendDestroyDescriptor", a.destroy_descriptor);
    resolve(lib, "cudnnBackendFinalize", a.finalize);
    resolve(lib, "cudnnBackendSetAttribute", a.set_attribute);
    resolve(lib, "cudnnBackendGetAttribute", a.get_attribute);
    resolve(lib, "cudnnBackendExecute", a.execute);
    return a;
  }();
  return api;
}

}  // namespace

std::string cudnn_version_string() {
  void* lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_GLOBAL);  // as cudnn() opens it
  if (lib == nullptr) return "";
  const auto get = reinterpret_cast<size_t (*)()>(dlsym(lib, "cudnnGetVersion"));
  return get != nullptr ? format_cudnn_version(get()) : "";
}

namespace {

#define CUDNN_CALL(expr)                                                                    \
  do {                                                                                      \
    const cudnnStatus_t status_ = (expr);                                                   \
    DDPB_CHECK(status_ == CUDNN_STATUS_SUCCESS)                                             \
        << #expr << " failed: " << cudnn().error_string(status_) << " (" << status_ << ")"; \
  } while (false)

// An owned backend descriptor.
class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type) {
    CUDNN_CALL(cudnn().create_descriptor(type, &d_));
  }
  ~Descriptor() {
    if (d_ != nullptr) cudnn().destroy_descriptor(d_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }

  template <typename T>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
           const std::vector<T>& values) {
    CUDNN_CALL(
        cudnn().set_attribute(d_, name, type, static_cast<int64_t>(values.size()), values.data()));
  }
  template <typename T>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, T value) {
    CUDNN_CALL(cudnn().set_attribute(d_, name, type, 1, &value));
  }
  void set(cudnnBackendAttributeName_t name, const Descriptor& other) {
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, other.get());
  }
  void finalize() { CUDNN_CALL(cudnn().finalize(d_)); }
  bool try_finalize() { return cudnn().finalize(d_) == CUDNN_STATUS_SUCCESS; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// The operands' unique ids in the graph and the variant pack.
enum Uid : int64_t { kX = 1, kW = 2, kY = 3 };

struct ConvKey {
  int device;
  ConvDirection direction;
  std::array<int64_t, 8> dims;  // N, C, H, W, K, R, stride, padding
  bool nhwc;
  int64_t alignment;
  bool tensor_cores;
  bool operator<(const ConvKey& o) const {
    return std::tie(device, direction, dims, nhwc, alignment, tensor_cores) <
           std::tie(o.device, o.direction, o.dims, o.nhwc, o.alignment, o.tensor_cores);
  }
};

// dims are always (N, C, H, W) in cuDNN; the strides say how they are laid out.
std::unique_ptr<Descriptor> tensor_desc(Uid uid, const std::vector<int64_t>& dims,
                                        int64_t alignment, bool nhwc) {
  const int64_t c = dims[1], h = dims[2], w = dims[3];
  const std::vector<int64_t> strides = nhwc ? std::vector<int64_t>{h * w * c, 1, w * c, c}
                                            : std::vector<int64_t>{c * h * w, h * w, w, 1};
  auto t = std::make_unique<Descriptor>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT);
  t->set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims);
  t->set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides);
  t->set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, static_cast<int64_t>(uid));
  t->set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, alignment);
  t->finalize();
  return t;
}

std::unique_ptr<Descriptor> conv_desc(int64_t stride, int64_t padding) {
  auto c = std::make_unique<Descriptor>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  c->set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT);
  c->set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, CUDNN_CROSS_CORRELATION);
  c->set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, int64_t{2});
  c->set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, std::vector<int64_t>{1, 1});
  c->set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64,
         std::vector<int64_t>{stride, stride});
  c->set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64,
         std::vector<int64_t>{padding, padding});
  c->set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64,
         std::vector<int64_t>{padding, padding});
  c->finalize();
  return c;
}

// The one operation of the graph, wired to the x, w and y tensors.
std::unique_ptr<Descriptor> conv_operation(ConvDirection d, const Descriptor& x,
                                           const Descriptor& w, const Descriptor& y,
                                           const Descriptor& conv) {
  const float alpha = 1.0f, beta = 0.0f;
  std::unique_ptr<Descriptor> op;
  switch (d) {
    case ConvDirection::Forward:
      op = std::make_unique<Descriptor>(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, alpha);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, beta);
      break;
    case ConvDirection::BackwardData:
      op = std::make_unique<Descriptor>(
          CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, x);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, w);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, y);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, conv);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, alpha);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, beta);
      break;
    case ConvDirection::BackwardFilter:
      op = std::make_unique<Descriptor>(
          CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, x);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, w);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, y);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, conv);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, alpha);
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, beta);
      break;
  }
  op->finalize();
  return op;
}

// The configurations one heuristics mode ranks for the graph, best first. Mode A is required;
// a FALLBACK list that cuDNN cannot give is empty.
std::vector<std::unique_ptr<Descriptor>> heuristic_configs(const Descriptor& graph,
                                                           cudnnBackendHeurMode_t mode) {
  const bool required = mode == CUDNN_HEUR_MODE_A;
  Descriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, mode);
  if (required) {
    heuristics.finalize();
  } else if (!heuristics.try_finalize()) {
    return {};
  }
  int64_t available = 0;
  const cudnnStatus_t counted =
      cudnn().get_attribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                            CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &available, nullptr);
  if (!required && counted != CUDNN_STATUS_SUCCESS) return {};
  CUDNN_CALL(counted);
  std::vector<std::unique_ptr<Descriptor>> configs;
  std::vector<cudnnBackendDescriptor_t> handles;
  for (int64_t i = 0; i < available; ++i) {
    configs.push_back(std::make_unique<Descriptor>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    handles.push_back(configs.back()->get());
  }
  int64_t returned = 0;
  CUDNN_CALL(cudnn().get_attribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, available, &returned,
                                   handles.data()));
  configs.resize(static_cast<size_t>(std::min(returned, available)));
  return configs;
}

// What cuDNN says of a configuration (Note [cuDNN engine choice]). The numerical notes are
// required; the engine id, behaviour notes and workspace are read where this cuDNN has them.
EngineNotes read_notes(const Descriptor& config, bool from_fallback) {
  EngineNotes n;
  n.from_fallback = from_fallback;
  Descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t engine_handle = engine.get();
  int64_t count = 0;
  CUDNN_CALL(cudnn().get_attribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &engine_handle));
  // Larger than any cuDNN 9's note count, so that a newer library's extra notes fit.
  std::array<cudnnBackendNumericalNote_t, 32> numerical{};
  CUDNN_CALL(cudnn().get_attribute(
      engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
      static_cast<int64_t>(numerical.size()), &count, numerical.data()));
  for (int64_t i = 0; i < count; ++i) {
    const auto note = numerical[static_cast<size_t>(i)];
    n.tensor_core |= note == CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
    n.down_convert_inputs |= note == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS;
    n.nondeterministic |= note == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
  }
  std::array<cudnnBackendBehaviorNote_t, 32> behavior{};
  if (cudnn().get_attribute(engine.get(), CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                            static_cast<int64_t>(behavior.size()), &count,
                            behavior.data()) == CUDNN_STATUS_SUCCESS) {
    for (int64_t i = 0; i < count; ++i) {
      n.runtime_compilation |=
          behavior[static_cast<size_t>(i)] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION;
    }
  }
  int64_t value = 0;
  if (cudnn().get_attribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1,
                            &count, &value) == CUDNN_STATUS_SUCCESS) {
    n.global_index = value;
  }
  if (cudnn().get_attribute(config.get(), CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                            &count, &value) == CUDNN_STATUS_SUCCESS) {
    n.workspace_bytes = value;
  }
  return n;
}

struct ConvPlan {
  cudnnHandle_t handle = nullptr;
  std::unique_ptr<Descriptor> plan;
  int64_t workspace_bytes = 0;
};

const char* direction_name(ConvDirection d) {
  switch (d) {
    case ConvDirection::Forward:
      return "forward";
    case ConvDirection::BackwardData:
      return "backward_data";
    case ConvDirection::BackwardFilter:
      break;
  }
  return "backward_filter";
}

// "forward N,C,H,W 64,3,224,224 K 64 R 7 stride 2 padding 3, nhwc, tf32 allowed"
std::string describe_shape(const ConvKey& key) {
  const auto& d = key.dims;
  return std::string(direction_name(key.direction)) + " N,C,H,W " + std::to_string(d[0]) + "," +
         std::to_string(d[1]) + "," + std::to_string(d[2]) + "," + std::to_string(d[3]) + " K " +
         std::to_string(d[4]) + " R " + std::to_string(d[5]) + " stride " + std::to_string(d[6]) +
         " padding " + std::to_string(d[7]) + ", " + (key.nhwc ? "nhwc" : "nchw") + ", alignment " +
         std::to_string(key.alignment) + ", " +
         (key.tensor_cores ? "tensor cores allowed" : "fp32 (no tensor cores)");
}

struct ChosenPlan {
  std::unique_ptr<Descriptor> plan;
  int64_t workspace_bytes = 0;
  EngineNotes notes;
  int candidates = 0, allowed = 0, tried = 0;
};

// The first configuration that finalises, in Note [cuDNN engine choice]'s order. A plan whose
// real workspace is over the bound is kept aside and used only if no other one builds.
ChosenPlan choose_plan(cudnnHandle_t handle, const Descriptor& graph, const ConvKey& key) {
  std::vector<std::unique_ptr<Descriptor>> configs = heuristic_configs(graph, CUDNN_HEUR_MODE_A);
  const size_t from_a = configs.size();
  for (auto& c : heuristic_configs(graph, CUDNN_HEUR_MODE_FALLBACK))
    configs.push_back(std::move(c));
  std::vector<EngineNotes> notes;
  for (size_t i = 0; i < configs.size(); ++i) notes.push_back(read_notes(*configs[i], i >= from_a));
  const EngineFilter filter{key.tensor_cores, kConvWorkspaceBound};
  const std::vector<size_t> order = engine_try_order(notes, filter);
  ChosenPlan chosen, oversized;
  chosen.candidates = static_cast<int>(configs.size());
  chosen.allowed = static_cast<int>(order.size());
  for (size_t i : order) {
    ++chosen.tried;
    auto plan = std::make_unique<Descriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // the handle attribute, as 9.0 has it
    plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, handle);
#pragma GCC diagnostic pop
    plan->set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *configs[i]);
    if (!plan->try_finalize()) continue;
    int64_t count = 0, workspace = 0;
    CUDNN_CALL(cudnn().get_attribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                     CUDNN_TYPE_INT64, 1, &count, &workspace));
    if (workspace > kConvWorkspaceBound) {
      if (!oversized.plan) {  // the first one is kept aside
        oversized.plan = std::move(plan);
        oversized.workspace_bytes = workspace;
        oversized.notes = notes[i];
      }
      continue;
    }
    chosen.plan = std::move(plan);
    chosen.workspace_bytes = workspace;
    chosen.notes = notes[i];
    return chosen;
  }
  if (oversized.plan) {
    oversized.candidates = chosen.candidates;
    oversized.allowed = chosen.allowed;
    oversized.tried = chosen.tried;
    return oversized;
  }
  DDPB_FAIL() << "cuDNN has no engine for the convolution " << describe_shape(key) << ": "
              << chosen.candidates << " configurations offered (" << from_a
              << " from heuristics mode A), " << chosen.allowed
              << " left after the filter, none finalised (rerun with CUDNN_LOGLEVEL_DBG=2 "
                 "CUDNN_LOGDEST_DBG=stderr for cuDNN's reasons)";
  return chosen;
}

cudnnHandle_t thread_handle(int device) {
  thread_local std::map<int, cudnnHandle_t> handles;  // one per device, never destroyed
  auto& h = handles[device];
  if (h == nullptr) CUDNN_CALL(cudnn().create(&h));
  return h;
}

// Records the plan in the run record's conv_plans and says so once per shape.
void record_plan(const ConvKey& key, const ChosenPlan& chosen, double build_ms) {
  ConvPlanRecord r;
  r.device = key.device;
  r.direction = direction_name(key.direction);
  r.dims = key.dims;
  r.layout = key.nhwc ? "nhwc" : "nchw";
  r.tensor_cores = key.tensor_cores;
  r.engine = describe_engine(chosen.notes);
  r.engine_index = chosen.notes.global_index;
  r.workspace_bytes = chosen.workspace_bytes;
  r.build_ms = build_ms;
  r.candidates = chosen.candidates;
  r.allowed = chosen.allowed;
  r.tried = chosen.tried;
  if (!record_conv_plan(r)) return;
  std::fprintf(stderr,
               "ddpbench: cuDNN plan for %s on cuda:%d: %s, workspace %.1f MiB, built in %.1f ms "
               "(tried %d of %d allowed, %d offered)\n",
               describe_shape(key).c_str(), key.device, r.engine.c_str(),
               static_cast<double>(r.workspace_bytes) / 1048576.0, build_ms, r.tried, r.allowed,
               r.candidates);
}

std::unique_ptr<ConvPlan> make_plan(const ConvKey& key) {
  const auto start = std::chrono::steady_clock::now();
  const auto [n, c, h, w, k, r, stride, pad] = key.dims;
  const int64_t p = (h + 2 * pad - r) / stride + 1, q = (w + 2 * pad - r) / stride + 1;
  // One layout for x, w and y (Note [cuDNN filter layout]).
  auto x = tensor_desc(kX, {n, c, h, w}, key.alignment, key.nhwc);
  auto wt = tensor_desc(kW, {k, c, r, r}, key.alignment, key.nhwc);
  auto y = tensor_desc(kY, {n, k, p, q}, key.alignment, key.nhwc);
  auto conv = conv_desc(stride, pad);
  auto op = conv_operation(key.direction, *x, *wt, *y, *conv);
  auto result = std::make_unique<ConvPlan>();
  result->handle = thread_handle(key.device);
  Descriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
            std::vector<cudnnBackendDescriptor_t>{op->get()});
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, result->handle);
#pragma GCC diagnostic pop
  graph.finalize();
  ChosenPlan chosen = choose_plan(result->handle, graph, key);
  result->plan = std::move(chosen.plan);
  result->workspace_bytes = chosen.workspace_bytes;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  record_plan(key, chosen, ms);
  return result;
}

int64_t alignment_of(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return 4;
  }
  return 16;
}

// One convolution with its plan (made on first use per thread and shape).
void convolve(const ConvKey& key, const ConvDims& d, const float* x, const float* w, const float* y,
              cudaStream_t stream) {
  const ConvDirection direction = key.direction;
  const int device = key.device;
  thread_local std::map<ConvKey, std::unique_ptr<ConvPlan>> plans;
  auto& plan = plans[key];
  if (!plan) plan = make_plan(key);
  CUDNN_CALL(cudnn().set_stream(plan->handle, stream));
  Tensor workspace;  // Note [Scratch memory in CUDA ops]
  if (plan->workspace_bytes > 0) {
    workspace = Tensor::empty({(plan->workspace_bytes + 3) / 4}, DType::F32, Device::cuda(device));
  }
  // Note [cuDNN filter layout]: an NHWC graph sees the weights as KRSC, a copy of ours.
  const ImageExtents filter{d.k, d.c, d.r * d.r, true};
  Tensor w_krsc;
  const float* w_graph = w;
  if (d.nhwc) {
    w_krsc = Tensor::empty({d.k, d.r, d.r, d.c}, DType::F32, Device::cuda(device));
    if (direction != ConvDirection::BackwardFilter) {
      launch_nchw_to_nhwc(w, w_krsc.data<float>(), filter, stream);
    }
    w_graph = w_krsc.data<float>();
  }
  std::vector<int64_t> uids = {kX, kW, kY};
  std::vector<void*> pointers = {const_cast<float*>(x), const_cast<float*>(w_graph),
                                 const_cast<float*>(y)};
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids);
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers);
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR,
           workspace.defined() ? workspace.data<float>() : nullptr);
  pack.finalize();
  CUDNN_CALL(cudnn().execute(plan->handle, plan->plan->get(), pack.get()));
  if (d.nhwc && direction == ConvDirection::BackwardFilter) {
    launch_nhwc_to_nchw(w_krsc.data<float>(), const_cast<float*>(w), filter, stream);
  }
}

}  // namespace

void run_convolution(ConvDirection direction, const ConvDims& d, const float* x, const float* w,
                     const float* y, int device, cudaStream_t stream) {
  const ConvKey key{device,
                    direction,
                    {d.n, d.c, d.h, d.w, d.k, d.r, d.stride, d.padding},
                    d.nhwc,
                    alignment_of({x, w, y}),
                    ops::math_mode() != ops::MathMode::FP32};
  // Every error names the convolution, and keeps its type (a CUDA error, out of memory).
  try {
    convolve(key, d, x, w, y, stream);
  } catch (const CudaError& e) {
    throw CudaError(with_conv_shape(e.what(), describe_shape(key)));
  } catch (const UsageError& e) {
    throw UsageError(with_conv_shape(e.what(), describe_shape(key)));
  } catch (const Error& e) {
    throw Error(with_conv_shape(e.what(), describe_shape(key)));
  }
}

}  // namespace ddpb::gpu
