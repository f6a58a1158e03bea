// DP over 1-4 logical CPU devices trains exactly like one device on the same global batch.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/device.h"
#include "core/ops.h"

#include "../util/param_diff.h"
#include "bench/run/trainer.h"

namespace ddpb {
namespace {

using testing::max_param_rel_diff;

struct Case {
  std::string workload;
  int64_t batch;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.workload << " batch " << c.batch;
}

class DpEquivalence : public ::testing::TestWithParam<Case> {
 protected:
  std::string run(const std::string& mode, int world, const std::string& tag,
                  const std::string& device = "cpu", const std::string& devices = "",
                  ops::MathMode precision = ops::MathMode::FP32) {
    auto dir = std::filesystem::temp_directory_path() /
               ("ddpb_dp_" + std::to_string(::getpid()) + "_" + tag);
    bench::RunConfig c;
    c.mode = mode;
    c.workload = GetParam().workload;
    c.world_size = world;
    c.device = device;
    c.devices = devices;
    c.global_batch = GetParam().batch;
    c.steps = 5;
    c.warmup = 0;
    c.seed = 3;
    c.optimizer.lr = 0.05f;
    c.optimizer.momentum = 0.9f;
    c.optimizer.weight_decay = 0.01f;
    c.dp_broadcast_mb = 0.3;  // several coalesced chunks, one parameter larger than the cap
    c.precision = precision;
    c.dump = dir.string();
    c.quiet = true;
    c.validate();
    bench::run_training(c);
    dirs_.push_back(dir);
    return (dir / "final.safetensors").string();
  }
  void TearDown() override {
    for (auto& d : dirs_) std::filesystem::remove_all(d);
  }
  std::vector<std::filesystem::path> dirs_;
};

TEST_P(DpEquivalence, MatchesSingleDeviceAfterFiveSgdSteps) {
  std::string single = run("single", 1, "single");
  for (int world : {1, 2, 3, 4}) {
    std::string dp = run("dp", world, "dp" + std::to_string(world));
    double d = max_param_rel_diff(dp, single);
    std::printf("%s batch %ld: DP over %d CPU devices vs single: max rel diff %.3g\n",
                GetParam().workload.c_str(), static_cast<long>(GetParam().batch), world, d);
    EXPECT_LE(d, 1e-5) << "world size " << world;
  }
}

// The same on a GPU: two logical replicas on cuda:0 (NCCL refuses duplicate GPUs, so they
// use copies), and distinct GPUs (NCCL broadcast/reduce) when there are several.
TEST_P(DpEquivalence, MatchesSingleDeviceOnCuda) {
  const int gpus = cuda_device_count();
  if (gpus == 0)
    GTEST_SKIP() << "no CUDA device (cuda_device_count() == 0): GPU DP equivalence not run";
  std::string single = run("single", 1, "cuda_single", "cuda:0");
  std::string logical = run("dp", 2, "cuda_logical", "cuda", "cuda:0,cuda:0");
  double d = max_param_rel_diff(logical, single);
  std::printf("%s: DP over cuda:0,cuda:0 vs single cuda:0: max rel diff %.3g\n",
              GetParam().workload.c_str(), d);
  EXPECT_LE(d, 1e-5);
  if (gpus >= 2) {
    std::string distinct = run("dp", 2, "cuda_distinct", "cuda");
    double d2 = max_param_rel_diff(distinct, single);
    std::printf("%s: DP over cuda:0,cuda:1 vs single cuda:0: max rel diff %.3g\n",
                GetParam().workload.c_str(), d2);
    EXPECT_LE(d2, 1e-5);
  }
}

// Note [Autocast] on a GPU: bf16 GEMMs through cuBLASLt and the bf16 element-wise kernels
// train as the CPU's emulation does, to bf16's rounding (a value near a rounding boundary can
// go either way with another summation order), and DP's replicas on one GPU as one device.
// A wrong layout, dtype or epilogue would be off by far more.
TEST_P(DpEquivalence, Bf16OnCudaTrainsAsTheCpuEmulation) {
  if (cuda_device_count() == 0)
    GTEST_SKIP() << "no CUDA device (cuda_device_count() == 0): GPU bf16 training not run";
  const auto bf16 = ops::MathMode::BF16;
  const std::string cpu = run("single", 1, "bf16_cpu", "cpu", "", bf16);
  const std::string gpu = run("single", 1, "bf16_cuda", "cuda:0", "", bf16);
  const std::string logical = run("dp", 2, "bf16_cuda_dp", "cuda", "cuda:0,cuda:0", bf16);
  const double d = max_param_rel_diff(gpu, cpu), dp = max_param_rel_diff(logical, gpu);
  std::printf("%s bf16: single cuda:0 vs cpu %.3g; DP over cuda:0,cuda:0 vs single %.3g\n",
              GetParam().workload.c_str(), d, dp);
  EXPECT_LE(d, 1e-2);
  EXPECT_LE(dp, 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Workloads, DpEquivalence,
                         ::testing::Values(Case{"mlp-small", 32}, Case{"mlp-small", 30},
                                           Case{"gpt-tiny", 8}, Case{"gpt-tiny", 7}),
                         [](const auto& info) {
                           std::string n =
                               info.param.workload + "_b" + std::to_string(info.param.batch);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace ddpb
