// Training makes progress: the loss falls over 50 steps on mlp-small and gpt-tiny.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "bench/run/run_config.h"
#include "bench/run/trainer.h"
#include "core/check.h"

namespace ddpb::bench {
namespace {

nlohmann::json train(const std::string& workload, int64_t batch, float lr, float momentum,
                     ops::MathMode precision = ops::MathMode::FP32, int64_t steps = 50,
                     bool cuda_graph = false) {
  RunConfig c;
  c.precision = precision;
  c.cuda_graph = cuda_graph;
  c.workload = workload;
  c.global_batch = batch;
  c.steps = steps;
  c.warmup = 0;
  c.seed = 1;
  c.optimizer.lr = lr;
  c.optimizer.momentum = momentum;
  c.quiet = true;
  c.validate();
  return run_training(c).to_json();
}

double mean_loss(const nlohmann::json& steps, size_t from, size_t to) {
  double s = 0;
  for (size_t i = from; i < to; ++i) s += steps[i]["loss"].get<double>();
  return s / double(to - from);
}

TEST(Training, MlpSmallLossFalls) {
  auto r = train("mlp-small", 64, 0.1f, 0.9f);
  double first = mean_loss(r["steps"], 0, 5), last = mean_loss(r["steps"], 45, 50);
  std::printf("mlp-small loss: first 5 steps %.4f, last 5 steps %.4f\n", first, last);
  EXPECT_NEAR(first, std::log(10.0), 0.1) << "10 classes start near ln(10)";
  EXPECT_LT(last, 0.85 * first);
}

TEST(Training, GptTinyLossFalls) {
  auto r = train("gpt-tiny", 8, 0.1f, 0.9f);
  double first = mean_loss(r["steps"], 0, 5), last = mean_loss(r["steps"], 45, 50);
  std::printf("gpt-tiny loss: first 5 steps %.4f, last 5 steps %.4f\n", first, last);
  EXPECT_NEAR(first, std::log(512.0), 0.3) << "512 tokens start near ln(512)";
  EXPECT_LT(last, 0.8 * first);
}

TEST(Training, ResNetTinyLossFalls) {
  auto r = train("resnet-tiny", 32, 0.01f, 0.9f);
  double first = mean_loss(r["steps"], 0, 5), last = mean_loss(r["steps"], 45, 50);
  std::printf("resnet-tiny loss: first 5 steps %.4f, last 5 steps %.4f\n", first, last);
  EXPECT_LT(last, 0.5 * first);
}

// Note [Step stats]: DP's reduce_add is its gradient communication, computed as DDP's is: the
// record's step holds its bytes and time, all of it exposed (it starts when backward ends),
// and the summary names the reduce with its bus bandwidth.
TEST(Training, DpRecordsItsReduceAsExposedGradientCommunication) {
  RunConfig c;
  c.mode = "dp";
  c.workload = "mlp-small";
  c.world_size = 3;
  c.global_batch = 24;
  c.steps = 3;
  c.warmup = 0;
  c.quiet = true;
  c.validate();
  const nlohmann::json r = run_training(c).to_json();
  for (const nlohmann::json& step : r["steps"]) {
    const nlohmann::json& m = step["mode"];
    EXPECT_EQ(m["comm_bytes"], m["bytes"]["reduce"]) << "two replicas' gradients to device 0";
    EXPECT_GT(m["bytes"]["reduce"].get<int64_t>(), 0);
    EXPECT_NEAR(m["comm_ms"].get<double>(), step["phases_ms"]["reduce"].get<double>(), 1e-6);
    EXPECT_EQ(m["comm_exposed_ms"], m["comm_ms"]);
    EXPECT_EQ(m["overlap_ratio"], 0.0);
  }
  const nlohmann::json& comm = r["summary"]["comm"];
  EXPECT_EQ(comm["op"], "reduce");
  EXPECT_EQ(comm["overlap_ratio"], 0.0);
  EXPECT_EQ(comm["bytes_per_step"], r["steps"][0]["mode"]["bytes"]["reduce"]);
  EXPECT_EQ(comm["busbw"]["op"], "reduce");
}

// --precision bf16 is autocast (Note [Autocast]): bf16 GEMMs and activations. The loss curve
// must follow fp32's to within bf16's precision, and must not be fp32's exactly (which would
// mean the mode never reached the model).
TEST(Training, GptTinyInBf16TracksFp32) {
  const auto f32 = train("gpt-tiny", 8, 0.1f, 0.9f, ops::MathMode::FP32, 20);
  const auto bf16 = train("gpt-tiny", 8, 0.1f, 0.9f, ops::MathMode::BF16, 20);
  EXPECT_EQ(bf16["config"]["precision"], "bf16");
  double worst = 0;
  bool any_different = false;
  for (size_t i = 0; i < 20; ++i) {
    const double a = f32["steps"][i]["loss"].get<double>(),
                 b = bf16["steps"][i]["loss"].get<double>();
    worst = std::max(worst, std::fabs(a - b) / a);
    any_different = any_different || a != b;
  }
  std::printf("gpt-tiny bf16 vs fp32: largest relative loss difference over 20 steps %.2e\n",
              worst);
  EXPECT_TRUE(any_different);
  EXPECT_LT(worst, 2e-2);
}

// Note [Autocast]: bf16 runs keep the GEMMs' outputs and what follows them in bf16, so the
// activations held for backward take less memory than in fp32 (not half: the residual stream,
// layer norms, attention and the loss stay f32, as in PyTorch), while the parameters and
// their gradients are the same f32 bytes. A linear layer's bf16 copy of its weight is an
// activation while its GEMM runs, so mlp-small runs at a batch where activations outweigh it
// (at 64 rows its 4 MiB weight copy is most of the peak).
TEST(Training, Bf16KeepsActivationsInBf16AndParametersInF32) {
  for (const char* workload : {"mlp-small", "gpt-tiny"}) {
    const bool gpt = std::string(workload) == "gpt-tiny";
    const int64_t batch = gpt ? 8 : 512;
    const auto f32 = train(workload, batch, 0.1f, 0.9f, ops::MathMode::FP32, 3);
    const auto bf16 = train(workload, batch, 0.1f, 0.9f, ops::MathMode::BF16, 3);
    auto highest = [](const nlohmann::json& r, const char* category) {
      return r["memory"][0]["highest_by_category"][category].get<double>();
    };
    const double ratio = highest(bf16, "activations") / highest(f32, "activations");
    std::printf("%s: bf16 activations / fp32 activations at their highest %.3f\n", workload, ratio);
    EXPECT_LT(ratio, gpt ? 0.75 : 0.85) << workload;
    EXPECT_GT(ratio, 0.4) << workload;
    for (const char* category : {"parameters", "gradients", "optimizer_state"}) {
      EXPECT_EQ(highest(bf16, category), highest(f32, category)) << workload << " " << category;
    }
  }
}

// --cuda-graph on CPU: step 1 eager, step 2 captured, every later step a replay of the
// recorded ops. Same ops on the same data in the same order: the same losses, bit for bit.
TEST(Training, CapturedStepReplaysTheEagerStepExactly) {
  for (const char* workload : {"mlp-small", "gpt-tiny", "embed"}) {
    const int64_t batch = std::string(workload) == "gpt-tiny" ? 8 : 32;
    const auto eager = train(workload, batch, 0.05f, 0.9f, ops::MathMode::FP32, 6, false);
    const auto graph = train(workload, batch, 0.05f, 0.9f, ops::MathMode::FP32, 6, true);
    EXPECT_TRUE(graph["config"]["cuda_graph"].get<bool>());
    for (size_t i = 0; i < 6; ++i) {
      EXPECT_EQ(eager["steps"][i]["loss"].get<double>(), graph["steps"][i]["loss"].get<double>())
          << workload << " step " << i + 1;
    }
    // Replayed steps report one phase: events inside a graph do not time its parts.
    EXPECT_TRUE(graph["steps"][5]["phases_ms"].contains("graph")) << graph["steps"][5].dump();
  }
}

TEST(Training, CudaGraphRefusesWhatAReplayCannotRedo) {
  auto config = [](auto edit) {
    RunConfig c;
    c.workload = "mlp-small";
    c.global_batch = 8;
    c.cuda_graph = true;
    edit(c);
    return c;
  };
  EXPECT_THROW(config([](RunConfig& c) {
                 c.mode = "ddp";
                 c.world_size = 2;
               }).validate(),
               UsageError);
  EXPECT_THROW(config([](RunConfig& c) { c.optimizer.name = "adamw"; }).validate(), UsageError);
  EXPECT_THROW(config([](RunConfig& c) { c.workload = "mlp-skip"; }).validate(), UsageError);
  // BatchNorm's buffers under a replayed graph are unverified: refused explicitly, so that a
  // wrong num_batches_tracked can never pass silently.
  EXPECT_THROW(config([](RunConfig& c) { c.workload = "resnet-tiny"; }).validate(), UsageError);
  EXPECT_NO_THROW(config([](RunConfig&) {}).validate());
}

}  // namespace
}  // namespace ddpb::bench
