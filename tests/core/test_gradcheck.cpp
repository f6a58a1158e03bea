// Central-difference gradient checks for every differentiable op and module: the analytic
// gradient of sum(out * R), for a fixed random R, against (f(x+h) - f(x-h)) / 2h on sampled
// elements of every input.
#include <functional>

#include "core/functional.h"
#include "core/nn.h"
#include "test_util.h"
#include "workloads/model.h"

namespace ddpb {
namespace {

using autograd::Var;
using testing::random_tensor;

struct Tolerance {
  float h = 1e-2f, atol = 2e-3f, rtol = 2e-2f;
};

using Fn = std::function<Var(const std::vector<Var>&)>;

double objective(const Fn& f, const std::vector<Var>& inputs, const std::vector<float>& r) {
  autograd::NoGradGuard no_grad;
  auto out = f(inputs).data().to_floats();
  double s = 0;
  for (size_t i = 0; i < out.size(); ++i) s += double(out[i]) * r[i];
  return s;
}

void gradcheck(const Fn& f, const std::vector<Var>& inputs, Tolerance tol = {},
               int max_elems = 24) {
  Var out = f(inputs);
  Tensor r = random_tensor(out.shape(), 1234);
  out.backward(r);
  auto rv = r.to_floats();
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Var& in = inputs[k];
    if (!in.requires_grad()) continue;
    ASSERT_TRUE(in.grad().defined()) << "input " << k << " got no gradient";
    auto analytic = in.grad().to_floats();
    float* x = in.data().data<float>();
    int64_t n = in.data().numel();
    int64_t stride = std::max<int64_t>(1, n / max_elems);
    for (int64_t i = (k * 7) % stride; i < n; i += stride) {
      float saved = x[i];
      x[i] = saved + tol.h;
      double plus = objective(f, inputs, rv);
      x[i] = saved - tol.h;
      double minus = objective(f, inputs, rv);
      x[i] = saved;
      double numeric = (plus - minus) / (2.0 * tol.h);
      double a = analytic[static_cast<size_t>(i)];
      EXPECT_NEAR(a, numeric, tol.atol + tol.rtol * std::fabs(numeric))
          << "input " << k << " element " << i << " of " << in.data().describe();
    }
  }
}

Var leaf(const Shape& shape, uint64_t seed, float scale = 1.0f) {
  return Var(random_tensor(shape, seed, scale), /*requires_grad=*/true);
}

TEST(GradCheck, Linear) {
  gradcheck([](auto& v) { return fn::linear(v[0], v[1], v[2]); },
            {leaf({5, 7}, 1), leaf({3, 7}, 2), leaf({3}, 3)});
}

TEST(GradCheck, LinearNoBias) {
  gradcheck([](auto& v) { return fn::linear(v[0], v[1], Var()); },
            {leaf({4, 6}, 4), leaf({5, 6}, 5)});
}

TEST(GradCheck, LinearFusedRelu) {
  gradcheck([](auto& v) { return fn::linear(v[0], v[1], v[2], ops::Activation::ReLU); },
            {leaf({6, 5}, 6), leaf({4, 5}, 7), leaf({4}, 8)},
            {.h = 1e-3f, .atol = 3e-3f, .rtol = 2e-2f});
}

TEST(GradCheck, Conv2d3x3Padded) {
  const ops::Conv2dGeometry g{.stride = 1, .padding = 1};
  gradcheck([g](auto& v) { return fn::conv2d(v[0], v[1], g); },
            {leaf({2, 3, 5, 5}, 31), leaf({4, 3, 3, 3}, 32, 0.5f)});
}

TEST(GradCheck, Conv2dStrided) {
  const ops::Conv2dGeometry seven{.stride = 2, .padding = 3};
  gradcheck([seven](auto& v) { return fn::conv2d(v[0], v[1], seven); },
            {leaf({2, 3, 9, 8}, 33), leaf({2, 3, 7, 7}, 34, 0.3f)});
  const ops::Conv2dGeometry downsample{.stride = 2, .padding = 0};
  gradcheck([downsample](auto& v) { return fn::conv2d(v[0], v[1], downsample); },
            {leaf({2, 4, 6, 6}, 35), leaf({3, 4, 1, 1}, 36)});
}

// Buffers of a C-channel BatchNorm at PyTorch's initial values.
fn::BatchNormBuffers bn_buffers(int64_t c) {
  return {Tensor::zeros({c}, DType::F32, Device::cpu()),
          Tensor::from_floats(std::vector<float>(static_cast<size_t>(c), 1.0f), {c}),
          Tensor::zeros({1}, DType::I64, Device::cpu())};
}

TEST(GradCheck, BatchNormTraining) {
  const auto buffers = bn_buffers(3);
  gradcheck([&](auto& v) { return fn::batch_norm(v[0], v[1], v[2], buffers, {}); },
            {leaf({4, 3, 3, 2}, 37), leaf({3}, 38), leaf({3}, 39)},
            {.h = 1e-2f, .atol = 3e-3f, .rtol = 3e-2f});
}

TEST(GradCheck, BatchNormEval) {
  auto buffers = bn_buffers(3);
  buffers.running_mean = Tensor::from_floats({0.1f, -0.2f, 0.3f}, {3});
  buffers.running_var = Tensor::from_floats({0.5f, 1.5f, 2.0f}, {3});
  gradcheck([&](auto& v) { return fn::batch_norm(v[0], v[1], v[2], buffers, {.training = false}); },
            {leaf({2, 3, 2, 2}, 40), leaf({3}, 41), leaf({3}, 42)});
}

TEST(GradCheck, MaxPool2d) {
  // Distinct values, so that a nudge of h never changes which element is a window's maximum.
  std::vector<float> values(2 * 3 * 7 * 6);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((i * 37) % 101) * 0.1f;
  Var x(Tensor::from_floats(values, {2, 3, 7, 6}), true);
  const ops::Conv2dGeometry g{.stride = 2, .padding = 1};
  gradcheck([g](auto& v) { return fn::max_pool2d(v[0], 3, g); }, {x},
            {.h = 1e-3f, .atol = 1e-3f, .rtol = 1e-2f});
}

// The same functions with the run's layout set to NHWC (--channels-last).
TEST(GradCheck, ChannelsLastImageFunctions) {
  struct LayoutGuard {
    LayoutGuard() { ops::set_image_layout(ops::ImageLayout::NHWC); }
    ~LayoutGuard() { ops::set_image_layout(ops::ImageLayout::NCHW); }
  } nhwc;
  const ops::Conv2dGeometry g{.stride = 2, .padding = 1};
  gradcheck([g](auto& v) { return fn::conv2d(v[0], v[1], g); },
            {leaf({2, 7, 6, 3}, 51), leaf({4, 3, 3, 3}, 52, 0.4f)});
  const auto buffers = bn_buffers(3);
  gradcheck([&](auto& v) { return fn::batch_norm(v[0], v[1], v[2], buffers, {}); },
            {leaf({4, 3, 2, 3}, 53), leaf({3}, 54), leaf({3}, 55)},
            {.h = 1e-2f, .atol = 3e-3f, .rtol = 3e-2f});
  gradcheck([](auto& v) { return fn::global_avg_pool(v[0]); }, {leaf({3, 2, 5, 4}, 56)});
}

TEST(GradCheck, GlobalAvgPool) {
  gradcheck([](auto& v) { return fn::global_avg_pool(v[0]); }, {leaf({3, 4, 3, 5}, 43)});
}

TEST(GradCheck, Relu) {
  gradcheck([](auto& v) { return fn::relu(v[0]); }, {leaf({40}, 9)},
            {.h = 1e-3f, .atol = 3e-3f, .rtol = 2e-2f});
}

TEST(GradCheck, Gelu) {
  gradcheck([](auto& v) { return fn::gelu(v[0]); }, {leaf({50}, 10, 2.0f)});
}

TEST(GradCheck, AddAndReshape) {
  gradcheck(
      [](auto& v) {
        return fn::reshape(fn::add(v[0], v[1]), {3, 8});
      },
      {leaf({4, 6}, 11), leaf({4, 6}, 12)});
}

TEST(GradCheck, SharedInputUsedTwice) {
  gradcheck([](auto& v) { return fn::add(fn::gelu(v[0]), v[0]); }, {leaf({10}, 13)});
}

TEST(GradCheck, LayerNorm) {
  gradcheck([](auto& v) { return fn::layer_norm(v[0], v[1], v[2]); },
            {leaf({2, 3, 16}, 14), leaf({16}, 15), leaf({16}, 16)});
}

TEST(GradCheck, Embedding) {
  Tensor ids = Tensor::from_ints({3, 0, 3, 7, 1, 3}, {2, 3});
  gradcheck([ids](auto& v) { return fn::embedding(ids, v[0]); }, {leaf({8, 5}, 17)});
}

TEST(GradCheck, CausalAttention) {
  gradcheck([](auto& v) { return fn::causal_attention(v[0], 2); }, {leaf({2, 5, 3 * 8}, 18)}, {},
            48);
}

TEST(GradCheck, FlashCausalAttention) {
  ops::set_attention_kind(ops::AttentionKind::Flash);
  gradcheck([](auto& v) { return fn::causal_attention(v[0], 2); }, {leaf({2, 5, 3 * 8}, 18)}, {},
            48);
  ops::set_attention_kind(ops::AttentionKind::Math);
}

TEST(GradCheck, CrossEntropy) {
  Tensor targets = Tensor::from_ints({2, 0, 4, 4, 1}, {5});
  gradcheck([targets](auto& v) { return fn::cross_entropy(v[0], targets); }, {leaf({5, 6}, 19)});
}

// ---- Modules: the loss of a whole model against every parameter ----------------------

void gradcheck_module(const nn::Module& m, const std::function<Var()>& loss_fn,
                      Tolerance tol = {.h = 1e-2f, .atol = 2e-3f, .rtol = 3e-2f}) {
  auto named = m.named_parameters();
  std::vector<Var> params;
  for (auto& p : named) params.push_back(p.var);
  gradcheck([&](const std::vector<Var>&) { return loss_fn(); }, params, tol, 8);
}

TEST(GradCheck, LinearAndLayerNormModules) {
  struct Net : nn::Module {
    std::shared_ptr<nn::Linear> fc;
    std::shared_ptr<nn::LayerNorm> ln;
    Net() {
      nn::Context ctx{Device::cpu(), 3, ""};
      fc = register_module("fc", std::make_shared<nn::Linear>(ctx.child("fc"), 6, 8));
      ln = register_module("ln", std::make_shared<nn::LayerNorm>(ctx.child("ln"), 8));
    }
  } net;
  Tensor x = random_tensor({4, 6}, 20);
  gradcheck_module(net, [&] { return net.ln->forward(net.fc->forward(Var(x))); });
}

TEST(GradCheck, EmbeddingModule) {
  nn::Embedding emb({Device::cpu(), 4, "emb"}, 10, 4);
  Tensor ids = Tensor::from_ints({1, 9, 1, 2}, {4});
  gradcheck_module(emb, [&] { return emb.forward(ids); });
}

WorkloadSpec tiny(const std::string& family) {
  WorkloadSpec s;
  s.family = family;
  s.in_features = 12;
  s.hidden = {16, 16};
  s.classes = 5;
  s.n_layer = 2;
  s.n_embd = 16;
  s.n_head = 2;
  s.seq_len = 6;
  s.vocab = 20;
  s.ids_per_sample = 3;
  if (family == "embed") {
    s.hidden = {12};
    s.n_embd = 4;
  }
  return s;
}

TEST(GradCheck, MlpModel) {
  auto spec = tiny("mlp");
  auto model = make_model(spec, Device::cpu(), 1);
  Tensor x = random_tensor({4, 12}, 21);
  Tensor y = Tensor::from_ints({0, 4, 2, 2}, {4});
  gradcheck_module(*model, [&] { return model_loss(model->forward(x), y); },
                   {.h = 1e-3f, .atol = 1e-3f, .rtol = 3e-2f});
}

TEST(GradCheck, GptModelWithTiedHead) {
  auto spec = tiny("gpt");
  auto model = make_model(spec, Device::cpu(), 2);
  std::vector<int32_t> tok(12);
  for (size_t i = 0; i < tok.size(); ++i) tok[i] = static_cast<int32_t>((i * 7 + 3) % 20);
  Tensor x = Tensor::from_ints(tok, {2, 6});
  std::vector<int32_t> tgt(12);
  for (size_t i = 0; i < tgt.size(); ++i) tgt[i] = static_cast<int32_t>((i * 5 + 1) % 20);
  Tensor y = Tensor::from_ints(tgt, {2, 6});
  gradcheck_module(*model, [&] { return model_loss(model->forward(x), y); },
                   {.h = 1e-2f, .atol = 1e-3f, .rtol = 5e-2f});
}

TEST(GradCheck, EmbedModel) {
  auto spec = tiny("embed");
  auto model = make_model(spec, Device::cpu(), 3);
  Tensor x = Tensor::from_ints({1, 5, 19, 5, 0, 7}, {2, 3});
  Tensor y = Tensor::from_ints({1, 3}, {2});
  gradcheck_module(*model, [&] { return model_loss(model->forward(x), y); },
                   {.h = 1e-3f, .atol = 1e-3f, .rtol = 3e-2f});
}

}  // namespace
}  // namespace ddpb
